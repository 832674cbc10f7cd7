"""vLLM 0.17-0.21: the family table (V1 sets the aux layers inside `load_model`; V2 is opt-in).

Found by running 0.21.0's and 0.17.0's code, its adapter picks:
- capture `V1ByLoadModelStatement`: V1 has no `_setup_eagle3_aux_hidden_state_outputs`; the
  statement of its `load_model` that sets them is run, and the model's default layers under
  either name (renamed in 0.18);
- runner `RunnerByEnvironment`: V2 is opt-in (`VLLM_USE_V2_MODEL_RUNNER`), so a GPU gets V1;
- platform `PlatformSetByHandOnOlderTorch`: built against an older torch, whose private
  CPU-capability queries it calls;
- launch, kernels as the 0.22 family (`ProposerAnswerWithoutDflash`, `VllmOwnCpuExperts`);
- the bases of config, target, dump and draft (the built draft read as the 0.33 family reads it:
  both runners build the registry's class with `get_model`; the class builds no `fc_norm` or
  `norm_output` before 0.22, and 0.17.0's no `norm_before_fc`, each release reported as it builds).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.capture import V1ByLoadModelStatement
from ..concerns.config import Config
from ..concerns.draft import Draft
from ..concerns.dump import Dump
from ..concerns.kernels import VllmOwnCpuExperts
from ..concerns.launch import ProposerAnswerWithoutDflash
from ..concerns.platform import PlatformSetByHandOnOlderTorch
from ..concerns.runner import RunnerByEnvironment
from ..concerns.target import Target

RELEASES = SpecifierSet(">=0.17,<0.22")
VERIFIED = ("0.17.0",)

CODE_PATHS = {
    "config": "vllm.config.VllmConfig / ModelConfig / SpeculativeConfig",
    "load": "vllm.model_executor.model_loader.get_model (load_weights + process_weights_after_loading)",
    "v1": "vllm.v1.worker.gpu_model_runner.GPUModelRunner.load_model (its `if "
          "self.use_aux_hidden_state_outputs:` statement: _get_eagle3_aux_layers_from_config, "
          "else the model's default)",
    "v2": "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils.set_eagle3_aux_hidden_state_layers",
    "capture": "<model>.set_aux_hidden_state_layers + forward (aux hidden states)",
}
DUMP_METHOD = "extract_hidden_states"
RUNNERS = ("v1", "v2")
GPU_DEFAULT_RUNNER = "v1"  # V2 only with VLLM_USE_V2_MODEL_RUNNER=1

IMPORTS = (
    "vllm.config", "vllm.config.compilation", "vllm.distributed", "vllm.forward_context",
    "vllm.model_executor.model_loader", "vllm.model_executor.model_loader.utils",
    "vllm.model_executor.layers.attention.attention", "vllm.model_executor.layers.attention.mla_attention",
    "vllm.model_executor.layers.fused_moe.cpu_fused_moe", "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils", "vllm.v1.spec_decode.eagle",
)
REQUIRES = (
    "vllm.model_executor.layers.attention.attention.Attention.forward",
    "vllm.model_executor.layers.attention.mla_attention.MLAAttention.forward",
    "vllm.model_executor.layers.fused_moe.cpu_fused_moe.CPUFusedMOE.forward_torch",
    "vllm.model_executor.layers.fused_moe.cpu_fused_moe.cpu_fused_moe_torch",
    "vllm.v1.worker.gpu_model_runner.GPUModelRunner.load_model",
    "vllm.v1.worker.gpu_model_runner.GPUModelRunner._get_eagle3_aux_layers_from_config",
    "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils.set_eagle3_aux_hidden_state_layers",
)


class Adapter(ProposerAnswerWithoutDflash, PlatformSetByHandOnOlderTorch, VllmOwnCpuExperts, Config,
              RunnerByEnvironment, Target, V1ByLoadModelStatement, Dump, Draft):
    """vLLM 0.17-0.21's calls: V1's `load_model` statement, V2 opt-in, the platform on an older torch."""
