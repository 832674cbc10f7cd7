"""vLLM 0.28-0.29: the family adapter (CPU experts that route themselves).

What differs from the 0.33 family (v0_33.py), found by running 0.28.0's and 0.29.0's code:
- `fused_moe.experts.cpu_moe.CPUUnquantizedExperts` is a monolithic experts class
  (`FusedMoEExpertsMonolithic`; modular from 0.30): its `apply` takes the router logits, routes
  with its own `_select_experts` (top-k or grouped top-k, scoring function, correction bias,
  scaling) and returns the output, and its `process_weights_after_loading` copies the router's
  settings (`use_grouped_topk`, `renormalize`, `scoring_func`, `custom_routing_function`) from
  the layer before prepacking the weights for the absent kernel. The 0.33 family's stand-in
  (kernels.experts_apply, the modular signature) stopped gpt-oss and DeepSeek-V3 there
  (TypeError: experts_apply() got an unexpected keyword argument 'router_logits'); this family's
  (kernels.experts_prepare_routing, kernels.experts_apply_routing) copies those settings, runs the
  release's own router and the same per-expert MLP;
- 0.28's MLA prefill selector has no CPU backend (`MLAPrefillBackendEnum.CPU` from 0.29): on a
  device without a compute capability it picks FlashAttention's, whose module imports names
  `fa_utils` defines only for CUDA, XPU and ROCm (ImportError:
  compile_flash_attn_varlen_func_from_specs, the DeepSeek-V3 cells): answered by
  parity.extract.engines.vllm.cpu_attention (a prefill backend whose kernels raise if called).
  Its CPU MLA backend (`CPU_MLA`) is the release's own choice, as in 0.33;
- the launch contract is the 0.33 family's as it reads the release: `vllm serve`'s parser from
  where its entrypoints/cli/serve.py imports it (0.28.0: `vllm.entrypoints.openai.cli_args`),
  and, its V2 `eagle3_utils` having no `requires_aux_hidden_states` (the runner decides inline,
  for the methods eagle3, dflash and dspark), V1's `EagleProposer` answering whether the aux
  states are captured (the typed 0.33 parser and answer had stopped the seed launch here:
  ModuleNotFoundError vllm.entrypoints.common).
Checked on both releases: gpt-oss serving (h1, h11, h20 by V1, h2, h12, h21 by V2) and the
DeepSeek-V3 dump (h2, h30, h58, h61 by both runners) name every slot (tests/test_vllm_0_28.py).

Composed of: its own `Kernels`, ahead of the 0.33 adapter (never through another family's adapter).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from . import v0_33

RELEASES = SpecifierSet(">=0.28,<0.30")
VERIFIED = ("0.28.0",)

CODE_PATHS = v0_33.CODE_PATHS
DFLASH_CODE_PATHS = v0_33.DFLASH_CODE_PATHS
DUMP_METHOD = v0_33.DUMP_METHOD
RUNNERS = v0_33.RUNNERS
GPU_DEFAULT_RUNNER = v0_33.GPU_DEFAULT_RUNNER

IMPORTS = (*v0_33.IMPORTS, "vllm.v1.attention.backends.mla.prefill.registry")
# The names the kernel stand-ins replace, and the router the experts' stand-in runs.
REQUIRES = (
    *v0_33.REQUIRES,
    "vllm.model_executor.layers.fused_moe.experts.cpu_moe.CPUUnquantizedExperts._select_experts",
    "vllm.model_executor.layers.fused_moe.modular_kernel.FusedMoEExpertsMonolithic",
)


class Kernels:
    """The 0.33 family's stand-ins, the experts' for a class that routes itself, and the MLA
    prefill backend 0.28's CPU lacks."""

    def replace_kernels(self) -> list[str]:
        from vllm.model_executor.layers.fused_moe.experts import cpu_moe

        from .. import cpu_attention, kernels  # deferred: heavy, imports torch (a family module imports without it)

        lines = [line for line in super().replace_kernels() if "CPUUnquantizedExperts" not in line]
        cpu_moe.CPUUnquantizedExperts.process_weights_after_loading = kernels.experts_prepare_routing
        cpu_moe.CPUUnquantizedExperts.apply = kernels.experts_apply_routing
        return [*lines, "vllm.model_executor.layers.fused_moe.experts.cpu_moe.CPUUnquantizedExperts.apply -> "
                "the release's _select_experts, then per-expert SiLU or SwiGLU-OAI MLP, biases added (router real)",
                *cpu_attention.install()]


class Adapter(Kernels, v0_33.Adapter):
    """vLLM 0.28-0.29's calls: the 0.33 adapter's, but where these releases differ."""
