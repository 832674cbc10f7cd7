"""Fused MoE on vLLM 0.10-0.11.x's CPU platform, whose x86 path needs Intel's extension.

`UnquantizedFusedMoEMethod.process_weights_after_loading` (0.10-0.11.x) gives an x86 CPU
`cpu_fused_moe.IPEXFusedMOE`, which builds Intel's `ipex.llm.modules.GatedMLPMOE` (the CPU
environment does not install intel_extension_for_pytorch), and any other CPU the release's own
`cpu_fused_moe.CPUFusedMOE`. A GPU runs neither: its `forward_cuda` routes with `fused_topk`
(softmax over the experts, the top-k, renormalised when asked) and runs Triton's `fused_experts`
with the layer's activation as its CUDA op computes it (`SwigluOAIAndMul`: gate and up
INTERLEAVED in w13, clamped, `(up + 1) * gate * sigmoid(1.702 * gate)`) and the expert biases.
The release's own CPU experts are not that: 0.11.1-0.11.2's `CPUFusedMOE` splits gpt-oss's
w13 into halves (`cpu_fused_moe.swigluoai_and_mul`), so the states it feeds match no state of
transformers' gpt-oss (measured: nearest h18 at relative error 0.97), and 0.10-0.11.0's computes
SiLU only.

`ipex_as_gpu_experts` makes the x86 branch build a stand-in for Intel's class that computes
what the GPU computes: the route by the release's own `cpu_fused_moe.select_experts` (its
torch router: grouped top-k, scoring function, correction bias and scaling as the layer passes
them; for a plain softmax router the same weights as `fused_topk`), the experts by
kernels.routed_experts (SiLU on the halves, or the release's own `SwigluOAIAndMul.forward_native`,
its reference of the CUDA op; `w13_bias` and `w2_bias` added). Expert parallelism (an
expert map) and router weights applied to the input raise KernelStandInError. Checked against
transformers' gpt-oss MoE block by tests/test_vllm_cpu_moe.py; the states it feeds are
identified numerically by the extraction, as every captured state is. From 0.12 the x86 branch
builds `CPUFusedMOE` itself and nothing is replaced.
"""

from __future__ import annotations

from .kernels import KernelStandInError, routed_experts


def ipex_as_gpu_experts(cpu_fused_moe) -> str:
    """Replace the installed `cpu_fused_moe` module's `IPEXFusedMOE` (kept under its name, marked
    as parity's stand-in). Returns the family's line for it."""
    if not getattr(cpu_fused_moe.IPEXFusedMOE, "__parity_standin__", False):
        select_experts = cpu_fused_moe.select_experts

        class IPEXFusedMOE:
            """parity's stand-in for Intel's experts: the GPU's route and experts, in torch."""

            __parity_standin__ = True

            def __init__(self, layer) -> None:
                pass  # the weights stay as loaded (Intel's class prepacks them)

            def __call__(self, layer, x, use_grouped_topk, top_k, router_logits, renormalize, topk_group=None,
                         num_expert_group=None, global_num_experts=-1, expert_map=None, custom_routing_function=None,
                         scoring_func="softmax", routed_scaling_factor=1.0, e_score_correction_bias=None,
                         apply_router_weight_on_input=False, activation="silu"):
                if expert_map is not None:
                    raise KernelStandInError("fused MoE: parity's stand-in has no expert parallelism (expert_map)")
                if apply_router_weight_on_input:
                    raise KernelStandInError("fused MoE: parity's stand-in does not weight the input by the router")
                weights, ids = select_experts(
                    hidden_states=x, router_logits=router_logits, top_k=top_k, use_grouped_topk=use_grouped_topk,
                    renormalize=renormalize, topk_group=topk_group, num_expert_group=num_expert_group,
                    custom_routing_function=custom_routing_function, scoring_func=scoring_func,
                    routed_scaling_factor=routed_scaling_factor, e_score_correction_bias=e_score_correction_bias)
                return routed_experts(x, layer.w13_weight, layer.w2_weight, getattr(layer, "w13_bias", None),
                                      getattr(layer, "w2_bias", None), weights, ids, activation).to(x.dtype)

        cpu_fused_moe.IPEXFusedMOE = IPEXFusedMOE
    return (f"{cpu_fused_moe.__name__}.IPEXFusedMOE (Intel's extension) -> the GPU's route (the release's "
            "select_experts) and experts (SiLU or its SwigluOAIAndMul.forward_native, biases added) in torch")


def install() -> list[str]:
    """ipex_as_gpu_experts where the installed `cpu_fused_moe` has an IPEX class (0.10-0.11.x).
    Returns the family's lines for what it replaced."""
    import importlib.util

    if importlib.util.find_spec("vllm.model_executor.layers.fused_moe.cpu_fused_moe") is None:
        return []
    from vllm.model_executor.layers.fused_moe import cpu_fused_moe

    if not (hasattr(cpu_fused_moe, "IPEXFusedMOE") and hasattr(cpu_fused_moe, "select_experts")):
        return []
    return [ipex_as_gpu_experts(cpu_fused_moe)]
