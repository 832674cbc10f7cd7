"""vLLM 0.11: the family table (an older release: no config key for the aux ids).

Found by running 0.11.0's code, its adapter picks:
- launch `RunnerInitAnswer`: 0.11's parser, its `create_speculative_config` call, and the aux
  states decided inline in `GPUModelRunner.__init__`;
- platform `PlatformSetByHand`: the CPU platform is not detected for the official (CUDA) wheel;
- kernels `LayerAttentionAndTorchExperts`: the attention body at its old name, Intel's fused-MoE
  experts by the GPU's in torch, and gpt-oss's sinks answered by the GPU's backend, built only;
- config `CompilationByLevel`: compilation off with `level=0` (no `mode` yet);
- capture `DefaultIdsByLoadModelStatement`: one runner, V1, whose `load_model` statement sets the
  model's default layers (the draft's config is never read);
- dump `DumpSetOnModel`: no `extract_hidden_states` method;
- draft `SharedByLoadModelStatements`: the proposer's sharing statements of 0.11, its
  speculators-format conversion, and a one-layer class whose `num_hidden_layers` is read at its default;
- the bases of runner (V1) and target.
Every fact is read off the class as built, so a release of this range that builds otherwise
(0.12-0.15, placed here by their code paths) is reported as it builds.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.capture import DefaultIdsByLoadModelStatement
from ..concerns.config import CompilationByLevel
from ..concerns.draft import SharedByLoadModelStatements
from ..concerns.dump import DumpSetOnModel
from ..concerns.kernels import LayerAttentionAndTorchExperts
from ..concerns.launch import RunnerInitAnswer
from ..concerns.platform import PlatformSetByHand
from ..concerns.runner import Runner
from ..concerns.target import Target

RELEASES = SpecifierSet(">=0.11,<0.12")
VERIFIED = ("0.11.0",)

CODE_PATHS = {
    "config": "vllm.config.VllmConfig / ModelConfig / SpeculativeConfig",
    "load": "vllm.model_executor.model_loader.get_model (load_weights + process_weights_after_loading)",
    "v1": "vllm.v1.worker.gpu_model_runner.GPUModelRunner.load_model "
          "(its `if self.use_aux_hidden_state_outputs:` statement: the model's default layers)",
    "capture": "<model>.set_aux_hidden_state_layers + forward (aux hidden states)",
}

DUMP_METHOD = "the model's own capture set to the launch ids (0.11 has no extract_hidden_states)"
RUNNERS = ("v1",)
GPU_DEFAULT_RUNNER = "v1"  # 0.11 has one model runner

IMPORTS = (
    "vllm.config", "vllm.distributed", "vllm.forward_context", "vllm.model_executor.model_loader",
    "vllm.model_executor.model_loader.utils", "vllm.attention.layer", "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.spec_decode.eagle",
)
REQUIRES = ("vllm.attention.layer.Attention.forward",)  # what the kernel stand-in replaces


class Adapter(RunnerInitAnswer, PlatformSetByHand, LayerAttentionAndTorchExperts, CompilationByLevel, Runner,
              Target, DefaultIdsByLoadModelStatement, DumpSetOnModel, SharedByLoadModelStatements):
    """vLLM 0.11's calls: V1's `load_model` statement, the platform set by hand, compilation by level."""
