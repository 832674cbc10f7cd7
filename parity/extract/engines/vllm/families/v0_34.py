"""vLLM 0.34: the family table (the V2 model runner only).

Found by running 0.34.0's code, its adapter picks:
- launch `AuxStatesByResolvedConfig`: the resolved config's `uses_aux_hidden_states` answers
  whether the aux states are captured, and V2, the one runner, runs under a parallel layout;
- config `PlatformCheckSeesTriton`: the CPU platform's config check refuses an x86 CPU without
  Triton-CPU, which parity never deploys on;
- capture `V2RunnerOnly`: the V1 runner is gone from the wheel (ABSENT: a release that still has
  it is not run by this family, its v1 column would vanish unseen);
- draft `SharedByV2LoadEagleModel`: the target's embedding and LM head shared as V2's
  `load_eagle_model` shares them;
- the bases of the other concerns, as 0.33 (platform, kernels, runner, target, dump).
DFlash (method "dflash", which a DFlash draft is served with unless the serve arguments name
another) runs as on 0.33, on V2 (DFLASH_CODE_PATHS); the 0.16-0.27 families refuse it as
parity's limit, or as the release's answer where its SpeculativeConfig has no dflash.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.capture import V2RunnerOnly
from ..concerns.config import PlatformCheckSeesTriton
from ..concerns.draft import SharedByV2LoadEagleModel
from ..concerns.dump import Dump
from ..concerns.kernels import Kernels
from ..concerns.launch import AuxStatesByResolvedConfig
from ..concerns.platform import Platform
from ..concerns.runner import Runner
from ..concerns.target import Target

RELEASES = SpecifierSet(">=0.34,<0.35")
VERIFIED = ("0.34.0",)

CODE_PATHS = {
    "config": "vllm.config.VllmConfig / ModelConfig / SpeculativeConfig",
    "load": "vllm.model_executor.model_loader.get_model (load_weights + process_weights_after_loading)",
    "v2": "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils.set_eagle3_aux_hidden_state_layers",
    "capture": "<model>.set_aux_hidden_state_layers + forward (aux hidden states)",
    "share": "vllm.v1.worker.gpu.spec_decode.eagle.utils.maybe_share_target_embed / share_target_lm_head "
             "(as load_eagle_model calls them)",
}
DFLASH_CODE_PATHS = {  # the same keys for a DFlash draft (method "dflash"): the contract records these
    **CODE_PATHS,
    "v2": CODE_PATHS["v2"] + " (ids: get_eagle3_aux_layers_from_config, dflash_config.target_layer_ids +1)"
          " -> vllm.model_executor.models.qwen3_dflash.DFlashQwen3ForCausalLM.combine_hidden_states",
}
DUMP_METHOD = "extract_hidden_states"
RUNNERS = ("v2",)
GPU_DEFAULT_RUNNER = "v2"

# A release that still has V1 is not run by this family (its v1 column would vanish unseen).
ABSENT = ("vllm.v1.worker.gpu_model_runner",)

IMPORTS = (
    "vllm.config", "vllm.config.compilation", "vllm.distributed", "vllm.forward_context",
    "vllm.model_executor.model_loader", "vllm.model_executor.model_loader.utils",
    "vllm.model_executor.layers.attention.attention", "vllm.model_executor.layers.attention.mla_attention",
    "vllm.model_executor.layers.fused_moe.experts.cpu_moe", "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils",
    "vllm.v1.worker.gpu.spec_decode.eagle.utils",
)
REQUIRES = (
    "vllm.model_executor.layers.attention.attention.Attention.forward",
    "vllm.model_executor.layers.attention.mla_attention.MLAAttention.forward",
    "vllm.model_executor.layers.fused_moe.experts.cpu_moe.CPUUnquantizedExperts.apply",
    "vllm.model_executor.layers.fused_moe.experts.cpu_moe.CPUUnquantizedExperts.process_weights_after_loading",
    "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils.set_eagle3_aux_hidden_state_layers",
    "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils.get_eagle3_aux_layers_from_config",
    "vllm.v1.worker.gpu.spec_decode.eagle.utils.maybe_share_target_embed",
    "vllm.v1.worker.gpu.spec_decode.eagle.utils.share_target_lm_head",
    "vllm.v1.worker.gpu.spec_decode.eagle.utils.get_target_lm_head",
)


class Adapter(AuxStatesByResolvedConfig, Platform, Kernels, PlatformCheckSeesTriton, Runner, Target, V2RunnerOnly,
              Dump, SharedByV2LoadEagleModel):
    """vLLM 0.34's calls: V2 alone, its launch answer, its config check and its sharing."""
