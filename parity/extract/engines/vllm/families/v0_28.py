"""vLLM 0.28-0.29: the family table (CPU experts that route themselves).

Found by running 0.28.0's and 0.29.0's code, its adapter picks kernels
`ExpertsThatRouteThemselves` (the monolithic `CPUUnquantizedExperts`, modular from 0.30, and
0.28's MLA prefill selector without a CPU backend) and the base of every other concern, as 0.33:
the launch contract is the 0.33 family's as it reads the release (V1's `EagleProposer` answers,
V2's `eagle3_utils` having no `requires_aux_hidden_states`).
Checked on both releases: gpt-oss serving (h1, h11, h20 by V1, h2, h12, h21 by V2) and the
DeepSeek-V3 dump (h2, h30, h58, h61 by both runners) name every slot (tests/test_vllm_0_28.py).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.capture import Capture
from ..concerns.config import Config
from ..concerns.draft import Draft
from ..concerns.dump import Dump
from ..concerns.kernels import ExpertsThatRouteThemselves
from ..concerns.launch import Launch
from ..concerns.platform import Platform
from ..concerns.runner import Runner
from ..concerns.target import Target

RELEASES = SpecifierSet(">=0.28,<0.30")
VERIFIED = ("0.28.0",)

CODE_PATHS = {
    "config": "vllm.config.VllmConfig / ModelConfig / SpeculativeConfig",
    "load": "vllm.model_executor.model_loader.get_model (load_weights + process_weights_after_loading)",
    "v1": "vllm.v1.worker.gpu_model_runner.GPUModelRunner._setup_eagle3_aux_hidden_state_outputs",
    "v2": "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils.set_eagle3_aux_hidden_state_layers",
    "capture": "<model>.set_aux_hidden_state_layers + forward (aux hidden states)",
}
DFLASH_CODE_PATHS = {  # the same keys for a DFlash draft (method "dflash"): the contract records these
    **CODE_PATHS,
    "v1": CODE_PATHS["v1"] + " (ids: _get_eagle3_aux_layers_from_config, dflash_config.target_layer_ids +1)"
          " -> vllm.model_executor.models.qwen3_dflash.DFlashQwen3ForCausalLM.combine_hidden_states",
    "v2": CODE_PATHS["v2"] + " (ids: get_eagle3_aux_layers_from_config, dflash_config.target_layer_ids +1)"
          " -> vllm.model_executor.models.qwen3_dflash.DFlashQwen3ForCausalLM.combine_hidden_states",
}
DUMP_METHOD = "extract_hidden_states"
RUNNERS = ("v1", "v2")
GPU_DEFAULT_RUNNER = "v2"

IMPORTS = (
    "vllm.config", "vllm.config.compilation", "vllm.distributed", "vllm.forward_context",
    "vllm.model_executor.model_loader", "vllm.model_executor.model_loader.utils",
    "vllm.model_executor.layers.attention.attention", "vllm.model_executor.layers.attention.mla_attention",
    "vllm.model_executor.layers.fused_moe.experts.cpu_moe", "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils", "vllm.v1.spec_decode.eagle",
    "vllm.v1.attention.backends.mla.prefill.registry",
)
# The names the kernel stand-ins replace, and the router the experts' stand-in runs.
REQUIRES = (
    "vllm.model_executor.layers.attention.attention.Attention.forward",
    "vllm.model_executor.layers.attention.mla_attention.MLAAttention.forward",
    "vllm.model_executor.layers.fused_moe.experts.cpu_moe.CPUUnquantizedExperts.apply",
    "vllm.model_executor.layers.fused_moe.experts.cpu_moe.CPUUnquantizedExperts.process_weights_after_loading",
    "vllm.model_executor.layers.fused_moe.experts.cpu_moe.CPUUnquantizedExperts._select_experts",
    "vllm.model_executor.layers.fused_moe.modular_kernel.FusedMoEExpertsMonolithic",
)


class Adapter(Launch, Platform, ExpertsThatRouteThemselves, Config, Runner, Target, Capture, Dump, Draft):
    """vLLM 0.28-0.29's calls: 0.33's, with the experts that route themselves."""
