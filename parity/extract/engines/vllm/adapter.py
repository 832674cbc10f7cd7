"""What the vLLM extraction asks of a release family's adapter: the adapter protocol.

The extractor (probe.py), the forward runner (forward_side.py) and the family placement
(families/__init__.py) call only the members below on an adapter and never branch on releases.
Every family's `Adapter` provides all of them (tests/test_adapter_protocol.py), composed of one
variant of each of the concerns in concerns/ (which split these protocol concerns finer: the
platform's kernels, the config's runner, the capture's target and dump are concerns of their own).

Nothing here imports vLLM or torch: a family module, and this protocol, import without either.
"""

from __future__ import annotations

from typing import Any, Protocol


class Launch(Protocol):
    """How the serve command resolves, and which drafts the family runs."""

    LAUNCH: Any  # the launch contract's resolver (parity.extract.engines.vllm.launch); None before 0.11
    RUNS_DFLASH: bool  # whether this family's adapter runs DFlash capture (else a DFlash draft is parity's limit)
    RUNS_RANKS: bool  # whether it runs the capture under a layout of several ranks (else that is parity's limit)

    def setup_rank(self, rank: int, tp: int, pp: int) -> None:
        """The next `config` builds its process group as rank `rank` of `tp` x `pp` ranks."""


class Platform(Protocol):
    """The CPU platform and parity's kernel stand-ins, before any vLLM model code runs."""

    def platform(self) -> None:
        """Everything before vLLM is imported and its model code runs: torch's compiler modules,
        vLLM's private cache, the CPU platform, the non-AMX path and in-process model inspection."""

    def replace_kernels(self) -> list[str]:
        """Install the stand-ins for the kernel bodies the CUDA wheel lacks on a CPU; returns one
        line per name replaced."""


class Config(Protocol):
    """vLLM's config classes, as `LLM(..., speculative_config=...)` builds them."""

    def config(self, target_dir: str, speculative: dict | None, port: int, max_model_len: int | None = 128) -> Any:
        """The VllmConfig for the target in `target_dir` and the speculative config `speculative`,
        with a world-size-1 process group on `port`."""

    @staticmethod
    def target_configs(vllm_config) -> list:
        """The target's config objects, whose reads are not the draft's."""

    def gpu_default_runner(self, vllm_config) -> str:
        """The model runner ("v1" or "v2") a GPU deployment of `vllm_config` gets."""

    def num_layers(self, vllm_config) -> int:
        """N, the target's decoder layer count, as vLLM reads it."""


class Capture(Protocol):
    """The target as vLLM builds it, the aux-state ids each runner sets, its forward and the dump."""

    def build_target(self, vllm_config) -> Any:
        """The target model as vLLM's loader builds it (weights loaded and processed)."""

    def default_ids(self, model) -> list[int]:
        """The model's own default EAGLE-3 aux layers."""

    def config_ids(self, vllm_config, runner: str) -> list[int] | None:
        """The ids runner `runner` reads from the speculative config; None when it finds none."""

    def set_capture(self, model, vllm_config, runner: str) -> None:
        """What runner `runner` does at start-up: resolve the ids (or the model default) and set them."""

    def set_ids(self, model, ids: list[int]) -> None:
        """Set the capture to `ids` with the model's own setter."""

    def capture_ids(self, model) -> list[int] | None:
        """The layer ids the built model captures; None when it captures none."""

    def forward(self, model, vllm_config, input_ids) -> tuple[Any, list]:
        """One prefill: (final hidden states, [aux states in capture order])."""

    def stage_forward(self, model, vllm_config, input_ids) -> Any:
        """One prefill of this rank's pipeline stage, the stages' tensors passed on as vLLM's worker
        and V2 runner pass them; the aux states the last stage hands the draft (else None)."""

    def stage(self, model) -> dict:
        """This rank's place (pp_rank, tp_rank, is_last) and its model's part (layers, capture)."""

    def dump_config(self, launch_ids: list[int]) -> dict | None:
        """The data-generation dump's speculative config; None when the family sets the ids on
        the model instead (set_dump)."""

    def set_dump(self, model, launch_ids: list[int]) -> None:
        """Set the data-generation dump's ids on the model (a family without a dump method)."""

    def dump_stack(self, aux) -> Any:
        """What the dump writes per token: the aux states stacked as vLLM's dump stacks them."""


class Draft(Protocol):
    """The draft as vLLM builds, loads and shares it."""

    BUILDS_DRAFT: bool  # whether the built draft is read (else the contract says it is not compared)

    def build_draft(self, vllm_config, prefix: str = "draft") -> Any:
        """The draft class the proposer builds from the speculative config's draft model config."""

    def load_draft_weights(self, draft, vllm_config, weights: list) -> None:
        """The draft's own `load_weights` on `weights`, and whatever the loader runs after it."""

    def share_with_target(self, draft, target, vllm_config) -> None:
        """Share the target's embedding (and head) with the draft exactly where the proposer does."""

    @staticmethod
    def target_embedding(target) -> Any:
        """The target's token embedding, where the proposer's sharing looks for it."""

    def draft_graph(self, draft) -> dict:
        """The graph flags vLLM's draft class stores."""

    def draft_facts(self, vllm_config, target=None, checkpoint: str | None = None,
                    reads: set[str] | None = None, dict_reads: dict[str, set[str]] | None = None) -> dict:
        """What vLLM's own draft class applies: graph flags, vocabulary mapping, embedding, module
        facts and (given `reads`) the config keys it read."""

    def real_draft_sizes(self, draft_dir: str) -> dict:
        """The draft vocabulary vLLM's draft class takes from the draft's own config files."""

    def real_draft_built(self, draft_dir: str, target_config: dict) -> dict:
        """The built draft's sizes (and dtype) as vLLM reads the draft's real config."""


class Adapter(Launch, Platform, Config, Capture, Draft, Protocol):
    """Every member the extraction calls on a vLLM family's adapter, by concern."""


CONCERNS = (Launch, Platform, Config, Capture, Draft)  # the concerns, in the order the base states them
