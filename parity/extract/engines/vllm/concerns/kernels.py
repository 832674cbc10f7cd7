"""The kernels concern: parity's stand-ins for the kernel bodies the CUDA wheel lacks on a CPU
(parity.extract.engines.vllm.kernels), each release's at the names it keeps them under.

- `Kernels` (0.30 on): the attention and MLA bodies (`layers.attention.Attention.forward`,
  `MLAAttention.forward`) and the modular CPU experts (`fused_moe.experts.cpu_moe.
  CPUUnquantizedExperts`: `process_weights_after_loading` and `apply`), the router real; the GDN
  guard (gdn_guard). 0.34's `MLAAttention.forward` takes a `mqa_q_prepared` (a pre-absorbed query,
  passed by models with a sparse-attention indexer, none of the targets parity runs; the stand-in
  raises if given one).
- `ExpertsThatRouteThemselves` (0.28-0.29): `CPUUnquantizedExperts` is a monolithic experts class
  (`FusedMoEExpertsMonolithic`; modular from 0.30): its `apply` takes the router logits, routes
  with its own `_select_experts` (top-k or grouped top-k, scoring function, correction bias,
  scaling) and returns the output, and its `process_weights_after_loading` copies the router's
  settings (`use_grouped_topk`, `renormalize`, `scoring_func`, `custom_routing_function`) from
  the layer before prepacking the weights for the absent kernel. `Kernels`' stand-in
  (kernels.experts_apply, the modular signature) stopped gpt-oss and DeepSeek-V3 there
  (TypeError: experts_apply() got an unexpected keyword argument 'router_logits'); this variant's
  (kernels.experts_prepare_routing, kernels.experts_apply_routing) copies those settings, runs the
  release's own router and the same per-expert MLP. 0.28's MLA prefill selector has no CPU
  backend (`MLAPrefillBackendEnum.CPU` from 0.29): on a device without a compute capability it
  picks FlashAttention's, whose module imports names `fa_utils` defines only for CUDA, XPU and
  ROCm (ImportError: compile_flash_attn_varlen_func_from_specs, the DeepSeek-V3 cells): answered
  by parity.extract.engines.vllm.cpu_attention (a prefill backend whose kernels raise if called).
  Its CPU MLA backend (`CPU_MLA`) is the release's own choice, as from 0.30.
- `VllmOwnCpuExperts` (0.16-0.27): no `fused_moe.experts.cpu_moe.CPUUnquantizedExperts`
  (`experts/cpu_moe.py`, where present, holds only the quantised CPU experts): the unquantised
  method's CPU backend is `fused_moe.cpu_fused_moe.CPUFusedMOE`, which, when the wheel's
  `torch.ops._C` has no `prepack_moe_weight` (it never has, on a CPU), runs vLLM's own pure-torch
  experts (`cpu_fused_moe_torch`: SiLU or SwiGLU-OAI, biases added) after its own router
  (`select_experts` / `grouped_topk`). Nothing absent is called, so no MoE kernel is stood in:
  only the attention and MLA bodies are replaced. No CPU MLA backend: the CPU platform raises "MLA
  is not supported on CPU" when an MLA layer (DeepSeek-V3) asks for one, and the layer's
  FlashAttention prefill pieces are CUDA-only. The platform's MLA choice is answered with the
  GPU's TRITON_MLA, built only, its kernels and the prefill pieces raising if called
  (cpu_attention); parity's MLA body runs, as over `Kernels`' CPU MLA backend.
- `LayerAttentionAndTorchExperts` (0.11; under `SiluAndV0HeadSizes` also 0.8.5-0.10): the
  attention body stood in at its old name (`vllm.attention.layer.Attention.forward`); DeepSeek-V3
  is not an EAGLE-3 target there (`supports_eagle3` is False), so no MLA stand-in is installed; on
  an x86 CPU (0.10-0.11.x) Intel's fused-MoE experts are replaced by the GPU's route and experts in
  torch (moe_cpu: gpt-oss on 0.11.1-0.11.2). Attention sinks (gpt-oss): 0.11.0's CPU platform
  answers every dense layer with `TorchSDPABackend`, whose impl takes no `sinks` (TypeError
  building the layer); a GPU of compute capability 8.x gets `TRITON_ATTN` for a layer with sinks,
  so parity answers that choice with it, built only (cpu_attention.install_sinks: its kernels
  raise if called; parity's attention body honours the sinks). Its impl's constructor checks the
  head size its Triton kernel takes (32 on: a property of that kernel; real gpt-oss has 64,
  supported), which the tiny target's 16 (shrink.TINY) fails: here that check also takes 16 (the
  kernel never runs) and refuses every other size as the release does. 0.11.1's own CPU backend
  (CPU_ATTN) takes sinks.
- `SiluAndV0HeadSizes` (0.8.5-0.10): `SiluAndMul.__init__` fetches `torch.ops._C.silu_and_mul`
  on the CPU too (its `forward_native` runs): registered, where absent, as an op that raises if
  called (kernels.absent_custom_ops); then `LayerAttentionAndTorchExperts`' stand-ins; then
  (0.8.5-0.9.0.x, whose CPU attention backend is still V0's `TorchSDPABackend`) the head sizes
  that backend's constructor accepts: it refuses a head size its PagedAttention kernels lack
  (32-256), and the tiny target's is 16: added to the list it reads. Those kernels are never
  called (the attention body is parity's stand-in, and the CUDA wheel has no CPU paged kernel).
"""

from __future__ import annotations

import importlib.util

from ....shrink import TINY

_SILU = "torch.ops._C.{} -> raises if called (looked up, never called, on this path)"
_ATTENTION = "vllm.model_executor.layers.attention.Attention.forward -> causal SDPA, one prefill sequence"
_MLA = "vllm.model_executor.layers.attention.MLAAttention.forward -> kv_b_proj decompression + causal SDPA"


class Kernels:
    """The attention and MLA bodies and the modular CPU experts stood in, the router real."""

    def replace_kernels(self) -> list[str]:
        from vllm.model_executor.layers.attention import attention, mla_attention
        from vllm.model_executor.layers.fused_moe.experts import cpu_moe

        from .. import gdn_guard, kernels  # deferred: heavy, imports torch (a family module imports without it)

        attention.Attention.forward = kernels.attention_forward
        mla_attention.MLAAttention.forward = kernels.mla_forward
        cpu_moe.CPUUnquantizedExperts.process_weights_after_loading = kernels.experts_prepare
        cpu_moe.CPUUnquantizedExperts.apply = kernels.experts_apply
        looked_up = [_SILU.format(name) for name in kernels.absent_custom_ops("silu_and_mul")]
        return [*looked_up, *gdn_guard.install(), _ATTENTION, _MLA,
                "vllm.model_executor.layers.fused_moe.experts.cpu_moe.CPUUnquantizedExperts.apply -> "
                "per-expert SiLU or SwiGLU-OAI MLP, biases added (router real)"]


class ExpertsThatRouteThemselves(Kernels):
    """`Kernels`' stand-ins, the experts' for a class that routes itself, and the MLA prefill
    backend 0.28's CPU lacks."""

    def replace_kernels(self) -> list[str]:
        from vllm.model_executor.layers.fused_moe.experts import cpu_moe

        from .. import cpu_attention, kernels  # deferred: heavy, imports torch (a family module imports without it)

        lines = [line for line in super().replace_kernels() if "CPUUnquantizedExperts" not in line]
        cpu_moe.CPUUnquantizedExperts.process_weights_after_loading = kernels.experts_prepare_routing
        cpu_moe.CPUUnquantizedExperts.apply = kernels.experts_apply_routing
        return [*lines, "vllm.model_executor.layers.fused_moe.experts.cpu_moe.CPUUnquantizedExperts.apply -> "
                "the release's _select_experts, then per-expert SiLU or SwiGLU-OAI MLP, biases added (router real)",
                *cpu_attention.install()]


class VllmOwnCpuExperts(Kernels):
    """The attention and MLA bodies stood in, vLLM's own CPU experts run."""

    def replace_kernels(self) -> list[str]:
        from vllm.model_executor.layers.attention import attention, mla_attention

        from .. import cpu_attention, kernels  # deferred: heavy, imports torch (a family module imports without it)

        attention.Attention.forward = kernels.attention_forward
        mla_attention.MLAAttention.forward = kernels.mla_forward
        looked_up = [_SILU.format(name) for name in kernels.absent_custom_ops("silu_and_mul")]
        return [*looked_up, _ATTENTION, _MLA,
                *cpu_attention.install()]  # the CPU platform's missing MLA backend (built only)


class LayerAttentionAndTorchExperts(Kernels):
    """The attention body stood in at its old name, and Intel's fused-MoE experts by the GPU's."""

    def replace_kernels(self) -> list[str]:
        from vllm.attention import layer

        from .. import cpu_attention, kernels, moe_cpu  # deferred: heavy, import torch (a family imports without)

        layer.Attention.forward = kernels.attention_forward
        return ["vllm.attention.layer.Attention.forward -> causal SDPA, one prefill sequence",
                *moe_cpu.install(),  # 0.10-0.11.x: Intel's experts -> the GPU's, in torch (moe_cpu)
                # 0.11.0: the CPU backend takes no sinks -> the GPU's TRITON_ATTN, built only, its
                # head-size check (its Triton kernel's, 32 on) also taking the tiny target's 16
                *cpu_attention.install_sinks((TINY["head_dim"],))]


class SiluAndV0HeadSizes(LayerAttentionAndTorchExperts):
    """`silu_and_mul` registered where absent, then `LayerAttentionAndTorchExperts`' stand-ins,
    then the V0 attention backend's head sizes."""

    def replace_kernels(self) -> list[str]:
        """`silu_and_mul` registered where absent, the attention stand-in, and (0.8.5-0.9.0.x) the
        tiny target's head size among those the CPU platform's V0 attention backend accepts."""
        from .. import kernels  # deferred: heavy, imports torch (a family module imports without it)

        replaced = [*(_SILU.format(name) for name in kernels.absent_custom_ops("silu_and_mul")),
                    *super().replace_kernels()]
        if importlib.util.find_spec("vllm.attention.backends.torch_sdpa") is None:
            return replaced
        from vllm.attention.backends import torch_sdpa

        if TINY["head_dim"] in torch_sdpa.PagedAttention.get_supported_head_sizes():
            return replaced
        listed = list(torch_sdpa.PagedAttention.get_supported_head_sizes())
        torch_sdpa.PagedAttention = type("PagedAttention", (torch_sdpa.PagedAttention,), {
            "get_supported_head_sizes": staticmethod(lambda: [*listed, TINY["head_dim"]])})
        return [*replaced, f"vllm.attention.backends.torch_sdpa.PagedAttention.get_supported_head_sizes -> also "
                           f"{TINY['head_dim']}, the tiny target's (its paged kernels are never called)"]
