"""vLLM 0.8.5: the family table (the first release with EAGLE-3; the proposer builds its draft itself).

Found by running 0.8.5's code (0.8.5.post1's `EagleProposer.load_model` and `ModelConfig` are
the same), its adapter picks:
- config `ConfigArgsWithoutDefaults`: `ModelConfig` and `VllmConfig` arguments without defaults
  until 0.9, and compilation off by `level`;
- draft `BuiltByProposerStatement`: the proposer's own statement builds the draft class, its
  `load_weights` loads it and one statement shares the target's embedding (ABSENT: a release whose
  proposer builds the draft through the model loader, 0.9 on, is not this family's);
- as 0.9-0.10: `RunnerInitAnswerParserInUtils`, `SiluAndV0HeadSizes` (V0's `TorchSDPABackend`
  and `silu_and_mul`), `TargetLogitsTakeNone`; as 0.11: `PlatformSetByHand`,
  `DefaultIdsByLoadModelStatement`, `DumpSetOnModel`, the base runner (V1).
vLLM's Triton placeholder lacks `Config`, which torch 2.13's inductor imports when a
`@torch.compile` decorator is applied: torch's compiler is imported first (every family's
platform does it, concerns.platform.compiler_first). SpeculativeConfig takes EAGLE-3 only for a
Llama target ("Eagle3 is only supported for Llama models"), as in 0.9.x.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.capture import DefaultIdsByLoadModelStatement
from ..concerns.config import ConfigArgsWithoutDefaults
from ..concerns.draft import BuiltByProposerStatement
from ..concerns.dump import DumpSetOnModel
from ..concerns.kernels import SiluAndV0HeadSizes
from ..concerns.launch import RunnerInitAnswerParserInUtils
from ..concerns.platform import PlatformSetByHand
from ..concerns.runner import Runner
from ..concerns.target import TargetLogitsTakeNone

RELEASES = SpecifierSet(">=0.8.5,<0.9")
VERIFIED = ("0.8.5",)

CODE_PATHS = {
    "config": "vllm.config.VllmConfig / ModelConfig / SpeculativeConfig",
    "load": "vllm.model_executor.model_loader.get_model (load_weights + process_weights_after_loading)",
    "v1": "vllm.v1.worker.gpu_model_runner.GPUModelRunner.load_model "
          "(its `if self.use_aux_hidden_state_outputs:` statement: the model's default layers)",
    "capture": "<model>.set_aux_hidden_state_layers + forward (aux hidden states)",
    "draft": "vllm.v1.spec_decode.eagle.EagleProposer.load_model (its statement building "
             "Eagle3LlamaForCausalLM, and the one sharing the target's embedding)",
}
DUMP_METHOD = "the model's own capture set to the launch ids (0.8.5 has no extract_hidden_states)"
RUNNERS = ("v1",)
GPU_DEFAULT_RUNNER = "v1"
IMPORTS = (
    "vllm.config", "vllm.distributed", "vllm.forward_context", "vllm.model_executor.model_loader",
    "vllm.model_executor.model_loader.utils", "vllm.attention.layer", "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.spec_decode.eagle", "vllm.model_executor.models.llama_eagle3",
)
REQUIRES = ("vllm.attention.layer.Attention.forward", "vllm.model_executor.models.llama_eagle3.Eagle3LlamaForCausalLM")

# A release whose proposer builds its draft through the model loader (0.9 on) is not this family's.
ABSENT = ("vllm.model_executor.model_loader.utils.initialize_model",)
ABSENT_WHY = "the model loader's draft build, which the 0.9 family runs; this family runs the proposer's own"


class Adapter(RunnerInitAnswerParserInUtils, PlatformSetByHand, SiluAndV0HeadSizes, ConfigArgsWithoutDefaults,
              Runner, TargetLogitsTakeNone, DefaultIdsByLoadModelStatement, DumpSetOnModel, BuiltByProposerStatement):
    """vLLM 0.8.5's calls: 0.9's, with its config arguments and its proposer's own draft build."""
