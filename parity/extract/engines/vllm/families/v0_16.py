"""vLLM 0.16: the family table (one EAGLE-3 runner, no `extract_hidden_states` yet).

Found by running 0.16.0's code, its adapter picks:
- dump `DumpSetOnModel`: no `extract_hidden_states` speculative method, so a dump is the model's
  own capture of the launch ids, as for 0.11;
- runner `Runner`: V1 (GPU_DEFAULT_RUNNER), the one runner that sets EAGLE-3 aux layers (no
  `v1/worker/gpu/spec_decode/eagle/eagle3_utils`: the opt-in V2 runner sets none);
- the 0.17 family's others (`ProposerAnswerWithoutDflash`, `PlatformSetByHandOnOlderTorch`,
  `VllmOwnCpuExperts`, `V1ByLoadModelStatement`) and the bases of config, target and draft (its
  `Eagle3LlamaForCausalLM` is 0.17.0's, the same installed source, built by V1's
  `EagleProposer._get_model`).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.capture import V1ByLoadModelStatement
from ..concerns.config import Config
from ..concerns.draft import Draft
from ..concerns.dump import DumpSetOnModel
from ..concerns.kernels import VllmOwnCpuExperts
from ..concerns.launch import ProposerAnswerWithoutDflash
from ..concerns.platform import PlatformSetByHandOnOlderTorch
from ..concerns.runner import Runner
from ..concerns.target import Target

RELEASES = SpecifierSet(">=0.16,<0.17")
VERIFIED = ("0.16.0",)

CODE_PATHS = {
    "config": "vllm.config.VllmConfig / ModelConfig / SpeculativeConfig",
    "load": "vllm.model_executor.model_loader.get_model (load_weights + process_weights_after_loading)",
    "v1": "vllm.v1.worker.gpu_model_runner.GPUModelRunner.load_model (its `if "
          "self.use_aux_hidden_state_outputs:` statement: _get_eagle3_aux_layers_from_config, "
          "else the model's default)",
    "capture": "<model>.set_aux_hidden_state_layers + forward (aux hidden states)",
}
DUMP_METHOD = "the model's own capture set to the launch ids (0.16 has no extract_hidden_states)"
RUNNERS = ("v1",)
GPU_DEFAULT_RUNNER = "v1"  # the one runner that sets EAGLE-3 aux layers

IMPORTS = (
    "vllm.config", "vllm.config.compilation", "vllm.distributed", "vllm.forward_context",
    "vllm.model_executor.model_loader", "vllm.model_executor.model_loader.utils",
    "vllm.model_executor.layers.attention.attention", "vllm.model_executor.layers.attention.mla_attention",
    "vllm.model_executor.layers.fused_moe.cpu_fused_moe", "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.spec_decode.eagle",
)
REQUIRES = (
    "vllm.model_executor.layers.attention.attention.Attention.forward",
    "vllm.model_executor.layers.attention.mla_attention.MLAAttention.forward",
    "vllm.model_executor.layers.fused_moe.cpu_fused_moe.CPUFusedMOE.forward_torch",
    "vllm.model_executor.layers.fused_moe.cpu_fused_moe.cpu_fused_moe_torch",
    "vllm.v1.worker.gpu_model_runner.GPUModelRunner.load_model",
    "vllm.v1.worker.gpu_model_runner.GPUModelRunner._get_eagle3_aux_layers_from_config",
)


class Adapter(ProposerAnswerWithoutDflash, PlatformSetByHandOnOlderTorch, VllmOwnCpuExperts, Config, Runner,
              Target, V1ByLoadModelStatement, DumpSetOnModel, Draft):
    """vLLM 0.16's calls: the 0.17 family's, with V1 alone and the dump set on the model."""
