"""vLLM 0.22-0.27: the family table (the CPU fused-MoE experts still in `cpu_fused_moe`).

Found by running 0.22.0's and 0.27.1's code, its adapter picks:
- launch `ProposerAnswerWithoutDflash`: the parser in `openai.cli_args`, V1's `EagleProposer`
  answering for the aux states; a DFlash draft is parity's limit (V2 refuses dflash in 0.22, which
  the per-runner columns do not express yet);
- platform `PlatformSetByHand`: the CPU platform is not detected for the official (CUDA) wheel;
- kernels `VllmOwnCpuExperts`: no modular CPU experts; vLLM's own pure-torch experts run, and the
  CPU platform's missing MLA backend is answered with the GPU's, built only;
- runner `RunnerByUseV2Property`: which runner a GPU gets is decided per config by
  `VllmConfig.use_v2_model_runner`;
- the bases of the other concerns, as 0.33 (config, target, capture, dump, draft).
The built draft (BuiltDraft and its config keys, docs/built-draft.md), found by running 0.22.0's
code, and checked on 0.23.0 and 0.27.0 (the bundled Llama-3.1-8B draft the same in all 16 fields;
its `vocab_size` 151936 a DRIFT on draft.vocab_size): as the 0.33 family reads it, with the same
graph (`norm_before_fc`, `eagle_config`'s first; `fc_norm`; `norm_output`; `norm_before_residual`),
its own head never tied, and transformers 5 (`rope_parameters`, `dtype`).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.capture import Capture
from ..concerns.config import Config
from ..concerns.draft import Draft
from ..concerns.dump import Dump
from ..concerns.kernels import VllmOwnCpuExperts
from ..concerns.launch import ProposerAnswerWithoutDflash
from ..concerns.platform import PlatformSetByHand
from ..concerns.runner import RunnerByUseV2Property
from ..concerns.target import Target

RELEASES = SpecifierSet(">=0.22,<0.28")
VERIFIED = ("0.22.0",)

CODE_PATHS = {
    "config": "vllm.config.VllmConfig / ModelConfig / SpeculativeConfig",
    "load": "vllm.model_executor.model_loader.get_model (load_weights + process_weights_after_loading)",
    "v1": "vllm.v1.worker.gpu_model_runner.GPUModelRunner._setup_eagle3_aux_hidden_state_outputs",
    "v2": "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils.set_eagle3_aux_hidden_state_layers",
    "capture": "<model>.set_aux_hidden_state_layers + forward (aux hidden states)",
}
DUMP_METHOD = "extract_hidden_states"
RUNNERS = ("v1", "v2")
GPU_DEFAULT_RUNNER = "v2"  # for a dense model's eagle3 (gpu_default_runner decides per config)

IMPORTS = (
    "vllm.config", "vllm.config.compilation", "vllm.config.vllm", "vllm.distributed", "vllm.forward_context",
    "vllm.model_executor.model_loader", "vllm.model_executor.model_loader.utils",
    "vllm.model_executor.layers.attention.attention", "vllm.model_executor.layers.attention.mla_attention",
    "vllm.model_executor.layers.fused_moe.cpu_fused_moe", "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils", "vllm.v1.spec_decode.eagle",
)
# The names the kernel stand-ins replace, and the code the family runs instead of a third one
# (vLLM's own CPU experts) and to pick the GPU's runner.
REQUIRES = (
    "vllm.model_executor.layers.attention.attention.Attention.forward",
    "vllm.model_executor.layers.attention.mla_attention.MLAAttention.forward",
    "vllm.model_executor.layers.fused_moe.cpu_fused_moe.CPUFusedMOE.forward_torch",
    "vllm.model_executor.layers.fused_moe.cpu_fused_moe.cpu_fused_moe_torch",
    "vllm.config.vllm.VllmConfig.use_v2_model_runner",
    "vllm.v1.worker.gpu_model_runner.GPUModelRunner._setup_eagle3_aux_hidden_state_outputs",
)


class Adapter(ProposerAnswerWithoutDflash, PlatformSetByHand, VllmOwnCpuExperts, Config, RunnerByUseV2Property,
              Target, Capture, Dump, Draft):
    """vLLM 0.22-0.27's calls: the platform set by hand, vLLM's own CPU experts, the runner per config."""
