"""The fixed case set `parity sweep` runs under every release (issue: the bump).

Each SGLang case is a bundled target config and a draft config written the way a user writes
it (ids nested in `eagle_config`, at the top level, or absent); what the release feeds the fc
for it is extracted exactly as `parity contract serving --sglang X` (or `--engine vllm --vllm X`)
extracts it. Each vLLM release also runs the dump cases: what speculators' data generation
gets from that release's capture for the launch script's default ids. The speculators case is
the training contract of the born-from case's 4-slot dump. A trainer that captures the target's
states itself (SpecForge, with the SGLang release it pins) has no dump to describe: its cases
are a target and the run's own ids (or none: the trainer's default for the target's depth),
handed to it as is, exactly as `parity contract training --trainer NAME` runs it. Changing a case changes
every row of the published table: they are named, and the table says which is which.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..contract import Tap
from ..home import shipped


@dataclass(frozen=True)
class _Case:
    name: str        # the table's column, e.g. "llama32 [1,15,28]"
    target: str      # a bundled target (fixtures/targets/NAME)

    @property
    def target_config(self) -> Path:
        return shipped("fixtures", "targets", self.target, "config.json")


@dataclass(frozen=True)
class ServingCase(_Case):
    ids: tuple[int, ...] | None
    where: str = "nested"  # "nested": eagle_config's list (SGLang's key); "top": the top-level key

    def write_draft(self, folder: Path) -> Path:
        """The draft directory (config.json only: the serving extraction reads no weights)."""
        cfg: dict = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 4096,
                     "intermediate_size": 16384, "num_attention_heads": 32, "num_key_value_heads": 8,
                     "num_hidden_layers": 1, "vocab_size": 128256, "draft_vocab_size": 32000, "rms_norm_eps": 1e-5}
        if self.ids is not None and self.where == "nested":
            cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": list(self.ids)}
        elif self.ids is not None:
            cfg["eagle_aux_hidden_state_layer_ids"] = list(self.ids)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(cfg))
        return folder

    def describe(self) -> str:
        ids = "no ids" if self.ids is None else f"ids {list(self.ids)}"
        key = {"nested": "in eagle_config", "top": "at the top level"}[self.where] if self.ids else ""
        return f"{self.target} ({ids}{' ' + key if key else ''})"


SERVING_CASES: tuple[ServingCase, ...] = (
    ServingCase("llama32 [1,15,28]", "llama-3.1-8b", (1, 15, 28)),
    ServingCase("llama32 [-1,15,28]", "llama-3.1-8b", (-1, 15, 28)),
    ServingCase("llama32 none", "llama-3.1-8b", None),
    ServingCase("llama32 top-level [1,15,28]", "llama-3.1-8b", (1, 15, 28), "top"),
    ServingCase("qwen3-36 [1,17,32]", "qwen3-8b", (1, 17, 32)),
    ServingCase("deepseek61 [2,30,58]", "deepseek-v3-61l", (2, 30, 58)),
    ServingCase("deepseek61 [1,29,57]", "deepseek-v3-61l", (1, 29, 57)),
    ServingCase("deepseek61 [-1,2,30]", "deepseek-v3-61l", (-1, 2, 30)),
    ServingCase("gpt-oss24 [1,11,20]", "gpt-oss-20b", (1, 11, 20)),
)


@dataclass(frozen=True)
class TrainingCase(_Case):
    dump: tuple[Tap, ...]  # the dump's layout, slot by slot

    def describe(self) -> str:
        return f"{self.target}, dump layout [{', '.join(t.name for t in self.dump)}]"


TRAINING_CASES: tuple[TrainingCase, ...] = (
    TrainingCase("4-slot dump [h0,h3,h31,h59]", "deepseek-v3-61l", tuple(Tap.stream(k) for k in (0, 3, 31, 59))),
)


@dataclass(frozen=True)
class DumpCase(_Case):
    """A data-generation dump made by a vLLM release: speculators' launch script's ids (None:
    its default [2, N//2, N-3, N]) on a bundled target, each dumped slot named."""
    datagen_ids: tuple[int, ...] | None = None

    def describe(self) -> str:
        given = "the launch default ids" if self.datagen_ids is None else f"--datagen-ids {list(self.datagen_ids)}"
        return f"{self.target}, the dump for {given}"


DUMP_CASES: tuple[DumpCase, ...] = (
    DumpCase("dump llama32 (default ids)", "llama-3.1-8b"),
    DumpCase("dump deepseek61 (default ids)", "deepseek-v3-61l"),
)



@dataclass(frozen=True)
class CaptureCase(_Case):
    """A trainer that captures the target's states itself (CAPTURES_STATES): no draft and no
    dump, only the run's own ids (its override, handed to it as is; None: the trainer resolves
    its own default for the target's depth). What it trains the fc on, and its loss target."""
    ids: tuple[int, ...] | None = None

    def describe(self) -> str:
        given = "no run ids (the trainer's own default)" if self.ids is None else f"run ids {list(self.ids)}"
        return f"{self.target}, {given}, states captured by the trainer itself"


# The serving cases' targets: Llama with the trainer's default, and with the serving case's
# negative id (SpecForge's resolution takes three distinct non-negative ids below N); DeepSeek's
# 61 layers, whose SGLang capture adds 1 to the ids only when the first is 1 (SpecForge's default
# there is [1, 29, 57]; [2, 30, 58] is the serving case's other).
CAPTURE_CASES: tuple[CaptureCase, ...] = (
    CaptureCase("llama32 default ids", "llama-3.1-8b"),
    CaptureCase("llama32 [-1,15,28]", "llama-3.1-8b", (-1, 15, 28)),
    CaptureCase("deepseek61 default ids", "deepseek-v3-61l"),
    CaptureCase("deepseek61 [2,30,58]", "deepseek-v3-61l", (2, 30, 58)),
)
