"""vLLM 0.9-0.10: the family table (EAGLE-3 on the V1 engine, before any config key for the ids).

Found by running 0.10.2's code and reading each release's installed `EagleProposer.load_model`
(0.9.0, 0.9.0.1, 0.9.1, 0.9.2, 0.10.0, 0.10.1, 0.10.1.1, 0.10.2), its adapter picks:
- launch `RunnerInitAnswerParserInUtils`: 0.11's rule and call, the parser's class in `vllm.utils`;
- kernels `SiluAndV0HeadSizes`: `silu_and_mul` registered where absent, 0.11's stand-ins, and the
  tiny head size for 0.9.0.x's V0 attention backend;
- target `TargetLogitsTakeNone` and draft `SharedByFirstStatementFound`: `compute_logits` takes
  the runner's and proposer's `sampling_metadata=None`; the proposer's sharing statements, as each
  release writes them (the built draft is not read: BUILDS_DRAFT False);
- as 0.11: `PlatformSetByHand`, `CompilationByLevel`, `DefaultIdsByLoadModelStatement`,
  `DumpSetOnModel`, and the base runner (V1).
SpeculativeConfig takes EAGLE-3 only for a Llama target (0.9.x: "Eagle3 is only supported for
Llama models") or Llama and Qwen (0.10.x); other targets are the engine's own refusal.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.capture import DefaultIdsByLoadModelStatement
from ..concerns.config import CompilationByLevel
from ..concerns.draft import SharedByFirstStatementFound
from ..concerns.dump import DumpSetOnModel
from ..concerns.kernels import SiluAndV0HeadSizes
from ..concerns.launch import RunnerInitAnswerParserInUtils
from ..concerns.platform import PlatformSetByHand
from ..concerns.runner import Runner
from ..concerns.target import TargetLogitsTakeNone

RELEASES = SpecifierSet(">=0.9,<0.11")
VERIFIED = ("0.10.2",)

CODE_PATHS = {
    "config": "vllm.config.VllmConfig / ModelConfig / SpeculativeConfig",
    "load": "vllm.model_executor.model_loader.get_model (load_weights + process_weights_after_loading)",
    "v1": "vllm.v1.worker.gpu_model_runner.GPUModelRunner.load_model "
          "(its `if self.use_aux_hidden_state_outputs:` statement: the model's default layers)",
    "capture": "<model>.set_aux_hidden_state_layers + forward (aux hidden states)",
    "share": "vllm.v1.spec_decode.eagle.EagleProposer.load_model (its embedding and LM-head "
             "sharing statements)",
}
DUMP_METHOD = "the model's own capture set to the launch ids (0.9-0.10 have no extract_hidden_states)"
RUNNERS = ("v1",)
GPU_DEFAULT_RUNNER = "v1"
IMPORTS = (
    "vllm.config", "vllm.distributed", "vllm.forward_context", "vllm.model_executor.model_loader",
    "vllm.model_executor.model_loader.utils", "vllm.attention.layer", "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.spec_decode.eagle",
)
# the attention stand-in's name, and the loader function the proposer builds the draft with
# (0.8.5 builds the class itself)
REQUIRES = ("vllm.attention.layer.Attention.forward", "vllm.model_executor.model_loader.utils.initialize_model")


class Adapter(RunnerInitAnswerParserInUtils, PlatformSetByHand, SiluAndV0HeadSizes, CompilationByLevel, Runner,
              TargetLogitsTakeNone, DefaultIdsByLoadModelStatement, DumpSetOnModel, SharedByFirstStatementFound):
    """vLLM 0.9-0.10's calls: 0.11's, with `compute_logits` taking None and the proposer's sharing statements."""
