"""A training dump's layout found by running the data-generation engine (not by a typed rule)."""

from __future__ import annotations

from pydantic import Field

from .models import Finding, TapName, _Frozen


class DatagenDump(_Frozen):
    """Which state each slot of a data-generation dump holds, found by running the engine that
    writes the dump (speculators 0.5-0.9 generate training data with vLLM's
    `extract_hidden_states` speculative method) on a tiny model of the target and naming every
    dumped slot by numerical identity against transformers."""

    engine: str = Field(description="The engine whose capture was run, e.g. 'vllm'.")
    version: str = Field(description="Its installed release, e.g. '0.33.0'.")
    ids_given: tuple[int, ...] | None = Field(
        description="The data-generation ids as given (--datagen-ids); None: the launch script's default.")
    launch_ids: tuple[int, ...] = Field(
        description="The ids the launch script hands the engine (eagle_aux_hidden_state_layer_ids): the "
        "given ids plus the last layer, or the default [2, N//2, N-3, N].")
    layout: tuple[TapName, ...] = Field(description="The state each dumped slot holds, in slot order.")
    runner: str = Field(description="The engine's model runner whose capture the layout is (the GPU default).")
    method: str = Field(default="extract_hidden_states",
                        description="How the release dumps: its speculative method, or (a release without one) "
                                    "the model's own capture set to the launch ids.")
    code_path: str = Field(description="The engine functions that were run.")
    python: str | None = Field(default=None, description="The interpreter the engine ran under.")
    findings: tuple[Finding, ...] = Field(default=(), description="What was noticed on the way.")

    def describe(self) -> str:
        """One line for provenance: which engine made the dump, from which ids."""
        given = "the launch default" if self.ids_given is None else f"--datagen-ids {list(self.ids_given)}"
        return (f"{self.engine} {self.version} {self.method}, launch ids {list(self.launch_ids)} "
                f"({given}), {self.runner} runner: [{', '.join(t.name for t in self.layout)}]")
