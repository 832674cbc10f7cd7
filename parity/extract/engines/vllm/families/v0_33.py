"""vLLM 0.30-0.33: the family table (both model runners; the CPU experts modular).

Every call is vLLM's own code, run on the CPU platform from the official wheel (the concerns,
parity.extract.engines.vllm.concerns, say what each runs and why); only the kernel bodies the
wheel lacks on a CPU are replaced. Its adapter picks the base of every concern: the CPU platform
selected by the environment, the modular experts' stand-ins, eager config by `mode`, V2 as a
GPU's runner, both runners' own aux-id functions (V1's
`GPUModelRunner._setup_eagle3_aux_hidden_state_outputs`, V2's
`eagle3_utils.set_eagle3_aux_hidden_state_layers`), the `extract_hidden_states` dump, and the
draft built by the loader and shared by the proposer's own methods. DFlash (method "dflash"; 0.21.0
has it, 0.17.0 not) runs on both runners (DFLASH_CODE_PATHS).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.capture import Capture
from ..concerns.config import Config
from ..concerns.draft import Draft
from ..concerns.dump import Dump
from ..concerns.kernels import Kernels
from ..concerns.launch import Launch
from ..concerns.platform import Platform
from ..concerns.runner import Runner
from ..concerns.target import Target

RELEASES = SpecifierSet(">=0.33,<0.34")
VERIFIED = ("0.33.0",)

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
DUMP_METHOD = "extract_hidden_states"  # speculators' launch script's speculative method
RUNNERS = ("v1", "v2")
GPU_DEFAULT_RUNNER = "v2"  # vLLM's default model runner on a GPU with Triton; the CPU platform uses V1

# What the calls import (parity.forkserver imports them once, before any run).
IMPORTS = (
    "vllm.config", "vllm.config.compilation", "vllm.distributed", "vllm.forward_context",
    "vllm.model_executor.model_loader", "vllm.model_executor.model_loader.utils",
    "vllm.model_executor.layers.attention.attention", "vllm.model_executor.layers.attention.mla_attention",
    "vllm.model_executor.layers.fused_moe.experts.cpu_moe", "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils", "vllm.v1.spec_decode.eagle",
)
# The names the kernel stand-ins replace: a release where one moved is not run by this family.
REQUIRES = (
    "vllm.model_executor.layers.attention.attention.Attention.forward",
    "vllm.model_executor.layers.attention.mla_attention.MLAAttention.forward",
    "vllm.model_executor.layers.fused_moe.experts.cpu_moe.CPUUnquantizedExperts.apply",
    "vllm.model_executor.layers.fused_moe.experts.cpu_moe.CPUUnquantizedExperts.process_weights_after_loading",
)


class Adapter(Launch, Platform, Kernels, Config, Runner, Target, Capture, Dump, Draft):
    """vLLM 0.30-0.33's calls: the base of every concern."""
