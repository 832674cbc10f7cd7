"""vLLM 0.22-0.27: the family adapter (the CPU fused-MoE experts still in `cpu_fused_moe`).

What differs from the 0.33 family (v0_33.py), found by running 0.22.0's and 0.27.1's code:
- the CPU platform is not detected for the official (CUDA) wheel (`cpu_platform_plugin` looks
  for a CPU build or macOS only), so it is set by hand, as for 0.11;
- no `fused_moe.experts.cpu_moe.CPUUnquantizedExperts` (`experts/cpu_moe.py`, where present,
  holds only the quantised CPU experts): the unquantised method's CPU backend is
  `fused_moe.cpu_fused_moe.CPUFusedMOE`, which, when the wheel's `torch.ops._C` has no
  `prepack_moe_weight` (it never has, on a CPU), runs vLLM's own pure-torch experts
  (`cpu_fused_moe_torch`: SiLU or SwiGLU-OAI, biases added) after its own router
  (`select_experts` / `grouped_topk`). Nothing absent is called, so no MoE kernel is stood in:
  only the attention and MLA bodies are replaced;
- no CPU MLA backend: the CPU platform raises "MLA is not supported on CPU" when an MLA layer
  (DeepSeek-V3) asks for one (also 0.16-0.21's), and the layer's FlashAttention prefill pieces
  are CUDA-only. The platform's MLA choice is answered with the GPU's TRITON_MLA, built only,
  its kernels and the prefill pieces raising if called (parity.extract.engines.vllm.cpu_attention);
  parity's MLA body runs, as in the 0.33 family over its CPU MLA backend;
- which runner a GPU gets is decided per config by `VllmConfig.use_v2_model_runner`: V2 for
  a model whose architecture is not MoE (or is on its list), V1 for the others (DeepSeek-V3,
  gpt-oss) and for a speculative method V2 does not support (`extract_hidden_states`: the
  dump is V1's). parity evaluates that property as a GPU with Triton would (its `HAS_TRITON`
  True while it runs; the CPU environment has no Triton);
- the launch contract: `vllm serve`'s parser is `vllm.entrypoints.openai.cli_args.make_arg_parser`
  (0.16-0.27); whether the aux states are captured is V1's `EagleProposer`'s answer
  (`_get_eagle3_use_aux_hidden_state_from_config`, for a `use_eagle()` method): V2, where a
  GPU runs it, captures them for the method eagle3 inline in its runner, the same answer for a
  draft whose eagle_config does not turn `use_aux_hidden_state` off (V1's alone reads it).
DFlash: the method dflash is there (0.21.0 has it), but in 0.22 V2 refuses it (`init_speculator`: "dflash
is not supported yet"), which the per-runner columns do not express yet: a DFlash draft is refused
as parity's limit (`Launch.RUNS_DFLASH`).
The built draft (BuiltDraft and its config keys, docs/built-draft.md), found by running 0.22.0's
code, and checked on 0.23.0 and 0.27.0 (the bundled Llama-3.1-8B draft the same in all 16 fields;
its `vocab_size` 151936 a DRIFT on draft.vocab_size): as the 0.33 family reads it. Both runners build the registry's `Eagle3LlamaForCausalLM` from
the draft's ModelConfig (V1's `SpecDecodeBaseProposer._get_model`, V2's `load_eagle_model`: each
`get_model`, which `initialize_model`s it; one build is read for both), at the target's dtype
(`SpeculativeConfig` passes `dtype=target_model_config.dtype`), with the same graph
(`norm_before_fc`, `eagle_config`'s first; `fc_norm`; `norm_output`; `norm_before_residual`), its own
head never tied, and transformers 5 (`rope_parameters`, `dtype`). It always builds the d2t buffer
(0.33: only for a draft vocabulary other than the target's); the mapping is read by running its
`compute_logits` either way.

Composed of: its own `Launch`, `Kernels` (also the 0.16 and 0.17 families') and `Runner`, and the
0.11 family's `Platform` (the CPU platform set by hand), ahead of the 0.33 adapter (never through
another family's adapter).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from . import v0_11, v0_33
from .. import launch

RELEASES = SpecifierSet(">=0.22,<0.28")
VERIFIED = ("0.22.0",)

CODE_PATHS = v0_33.CODE_PATHS
DUMP_METHOD = v0_33.DUMP_METHOD
RUNNERS = v0_33.RUNNERS
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


class Launch:
    """The launch contract: the parser where these releases keep it, V1's EagleProposer's answer
    (also the 0.16 and 0.17 families')."""

    # The launch contract (parity.extract.engines.vllm.launch), also for 0.16 and 0.17 (their
    # adapters inherit it): the parser where these releases keep it, V1's EagleProposer's answer.
    LAUNCH = launch.Launch(aux=launch.eagle_proposer_answer, parser=launch.OPENAI_PARSER)
    # 0.21 and 0.22-0.27 have the method dflash, but V2 refuses it in 0.22 (its `init_speculator`:
    # "dflash is not supported yet"; `use_v2_model_runner` then picks V1), which parity's per-runner
    # columns do not yet express (V2's would read the EAGLE-3 default): a DFlash draft is refused
    # here as parity's limit, never the release's (probe.dflash_refusal). 0.17.0 has no dflash.
    RUNS_DFLASH = False


class Kernels:
    """The attention and MLA bodies stood in, vLLM's own CPU experts run (also the 0.16 and 0.17
    families')."""

    def replace_kernels(self) -> list[str]:
        from vllm.model_executor.layers.attention import attention, mla_attention

        from .. import cpu_attention, kernels  # deferred: heavy, imports torch (a family module imports without it)

        attention.Attention.forward = kernels.attention_forward
        mla_attention.MLAAttention.forward = kernels.mla_forward
        looked_up = [f"torch.ops._C.{name} -> raises if called (looked up, never called, on this path)"
                     for name in kernels.absent_custom_ops("silu_and_mul")]
        return [*looked_up, "vllm.model_executor.layers.attention.Attention.forward -> causal SDPA, one prefill sequence",
                "vllm.model_executor.layers.attention.MLAAttention.forward -> kv_b_proj decompression + causal SDPA",
                *cpu_attention.install()]  # the CPU platform's missing MLA backend (built only)


class Runner:
    """The GPU's default runner as `VllmConfig.use_v2_model_runner` evaluates it with Triton."""

    def gpu_default_runner(self, vllm_config) -> str:
        """`VllmConfig.use_v2_model_runner` as a GPU with Triton evaluates it (the environment
        variable VLLM_USE_V2_MODEL_RUNNER, when set, decides there as here)."""
        import vllm.config.vllm as config_module

        had = config_module.HAS_TRITON
        config_module.HAS_TRITON = True
        try:
            return "v2" if vllm_config.use_v2_model_runner else "v1"
        finally:
            config_module.HAS_TRITON = had


class Adapter(Launch, Kernels, Runner, v0_11.Platform, v0_33.Adapter):
    """vLLM 0.22-0.27's calls: the 0.33 adapter's, but where these releases differ."""
