"""A CPU stand-in for the fused-MoE kernel SGLang runs on a GPU, where its own non-CUDA MoE
method computes something else (gpt-oss on 0.5.0rc0-0.5.10.post1).

On those releases `UnquantizedFusedMoEMethod.forward_cpu(layer, dispatch_output)` (0.5.2 on;
0.5.1.post3 `forward_cpu(layer, x, topk_output, moe_runner_config)`; 0.5.0rc0 the settings as
keywords, without the `activation_alpha` and `swiglu_limit` its CUDA method takes) runs a plain
SiLU-and-multiply MLP per expert (`moe_forward_native`): it never reads the experts' biases
(`w13_weight_bias`, `w2_weight_bias`) nor the clamped, alpha-scaled SwiGLU a gpt-oss layer asks
for (`moe_runner_config.gemm1_alpha`, `gemm1_clamp_limit`), which its CUDA method hands the
Triton kernel. What it computes is then no state of the model (cpu_path.unread_parameters finds
the biases unread). A GPU runs `forward_cuda`, whose body (Triton kernels) cannot run on a CPU.

`experts_forward` computes what that CUDA route computes, for the layers whose non-CUDA method
would not (a layer with biases, an alpha or a clamp limit; any other layer runs the release's
own non-CUDA method, untouched): per routed expert, `x @ w13.T + b13`, the release's OWN gated
activation (the function its Triton runner calls: `swiglu_with_alpha_and_limit` up to 0.5.9,
`_swiglu_gpt_oss_sigmoid_alpha` / `_swiglu_silu_clamp_mul` in 0.5.10, taken from under their
`torch.compile`), `@ w2.T + b2`, weighted by the router's own top-k weights (or on the input
when `apply_router_weight_on_input`), summed, times `routed_scaling_factor` when one is set.
The router (TopK), weight loading, every projection and norm stay SGLang's own.

It covers what parity runs (no expert parallelism, unquantized gated experts in SGLang's
standard layout, combined output) and raises `StandInUsed` for anything else (a quantized
layer, `no_combine`, Triton-kernels' transposed weights, an expert id outside the layer, an
activation its runner does not compute), so a path that relies on more fails loudly.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import types

import torch

from ...standins import StandInUsed
from ...run_until import CodePathMoved

DISPATCH_SIGNATURE = ["self", "layer", "dispatch_output"]  # forward_cpu's parameters on 0.5.2-0.5.10
TENSOR_SIGNATURE = ["self", "layer", "x", "topk_output", "moe_runner_config"]  # on 0.5.1.post3 (returns a tensor)
KEYWORD_SIGNATURE = ["self", "layer", "x", "topk_output", "activation", "apply_router_weight_on_input", "inplace",
                     "no_combine", "routed_scaling_factor"]  # 0.5.0rc0: no activation_alpha, swiglu_limit (CUDA's has)
ACTIVATIONS = ("swiglu_with_alpha_and_limit", "_swiglu_gpt_oss_sigmoid_alpha", "_swiglu_silu_clamp_mul")
METHOD_MODULES = ("sglang.srt.layers.quantization.unquant",  # where UnquantizedFusedMoEMethod lives: 0.4.10 on
                  "sglang.srt.layers.moe.fused_moe_triton.layer")  # 0.4.9 and older (no gpt-oss: nothing to wrap)
_ORIGINAL = "_parity_non_cuda_forward"  # where the release's own non-CUDA method is kept


def _refuse(what: str) -> StandInUsed:
    return StandInUsed(f"fused MoE: {what}, but parity's CPU stand-in for SGLang's CUDA fused-MoE kernel does "
                       "not compute it; the real kernel is needed here")


def install() -> list[str]:
    """Put `experts_forward` in front of the non-CUDA method(s) of SGLang's
    UnquantizedFusedMoEMethod whose parameters are `(self, layer, dispatch_output)` or `(self,
    layer, x, topk_output, moe_runner_config)` (the releases whose non-CUDA MoE ignores biases and
    the clamped SwiGLU); a release with any other signature is left as it is. Run before the model is built (the op binds its method then).
    Returns the methods replaced."""
    cls, done = method_class(), []
    for name in ("forward_cpu", "forward_native"):
        method = getattr(cls, name, None)
        if method is None or getattr(method, "__parity_standin__", False):
            continue
        params = list(inspect.signature(method).parameters)
        wrap = {tuple(DISPATCH_SIGNATURE): _in_front_of, tuple(TENSOR_SIGNATURE): _in_front_of_tensor,
                tuple(KEYWORD_SIGNATURE): _in_front_of_keywords}.get(tuple(params))
        if wrap is None:
            continue
        setattr(cls, name, wrap(method))
        done.append(f"UnquantizedFusedMoEMethod.{name}")
    return done


def method_class() -> type:
    """SGLang's UnquantizedFusedMoEMethod, from the first of METHOD_MODULES the release has."""
    for name in METHOD_MODULES:
        if importlib.util.find_spec(name) is not None:
            cls = getattr(importlib.import_module(name), "UnquantizedFusedMoEMethod", None)
            if cls is not None:
                return cls
    raise CodePathMoved(f"UnquantizedFusedMoEMethod is in none of {', '.join(METHOD_MODULES)}")


def _in_front_of(original):
    def forward(self, layer, dispatch_output):
        if not needs_cuda_route(layer, self.moe_runner_config):
            return original(self, layer, dispatch_output)
        from sglang.srt.layers.moe.token_dispatcher import StandardCombineInput

        if getattr(dispatch_output, "hidden_states_scale", None) is not None:
            raise _refuse("quantized activations")
        out = experts_forward(self, layer, dispatch_output.hidden_states, dispatch_output.topk_output,
                              self.moe_runner_config)
        return StandardCombineInput(hidden_states=out)

    return _marked(forward, original)


def _in_front_of_tensor(original):
    def forward(self, layer, x, topk_output, moe_runner_config):
        if not needs_cuda_route(layer, moe_runner_config):
            return original(self, layer, x, topk_output, moe_runner_config)
        return experts_forward(self, layer, x, topk_output, moe_runner_config)

    return _marked(forward, original)


def _in_front_of_keywords(original):
    """0.5.0rc0: the runner settings come as keywords, and the SwiGLU's alpha and limit only to the
    CUDA method (`activation_alpha`, `swiglu_limit`), which the model passes whichever method runs."""
    def forward(self, layer, x, topk_output, *, activation="silu", apply_router_weight_on_input=False, inplace=True,
                no_combine=False, routed_scaling_factor=None, activation_alpha=None, swiglu_limit=None):
        config = types.SimpleNamespace(activation=activation, apply_router_weight_on_input=apply_router_weight_on_input,
                                       no_combine=no_combine, routed_scaling_factor=routed_scaling_factor,
                                       gemm1_alpha=activation_alpha, gemm1_clamp_limit=swiglu_limit)
        if not needs_cuda_route(layer, config):
            return original(self, layer, x, topk_output, activation=activation, inplace=inplace, no_combine=no_combine,
                            apply_router_weight_on_input=apply_router_weight_on_input,
                            routed_scaling_factor=routed_scaling_factor)
        return experts_forward(self, layer, x, topk_output, config)

    return _marked(forward, original)


def _marked(forward, original):
    forward.__parity_standin__ = True
    forward.__wrapped__ = original
    forward.__doc__ = f"parity's CPU stand-in for the CUDA fused MoE, in front of {original.__qualname__}"
    return forward


def needs_cuda_route(layer, config) -> bool:
    """Whether the layer carries what the release's non-CUDA method ignores: expert biases, a
    SwiGLU alpha or a clamp limit."""
    return (getattr(layer, "w13_weight_bias", None) is not None or getattr(layer, "w2_weight_bias", None) is not None
            or getattr(config, "gemm1_alpha", None) is not None or getattr(config, "gemm1_clamp_limit", None) is not None)


def experts_forward(method, layer, x, topk_output, config) -> torch.Tensor:
    """What the CUDA route of `UnquantizedFusedMoEMethod` computes for hidden states `x` [T, H]
    routed by `topk_output` (the router's own weights and ids) under the layer's runner `config`."""
    if getattr(method, "use_triton_kernels", False):
        raise _refuse("the layer holds Triton-kernels' transposed weights")
    if getattr(layer, "moe_ep_size", 1) != 1:
        raise _refuse(f"expert parallelism (moe_ep_size {layer.moe_ep_size})")
    if config.no_combine:
        raise _refuse("no_combine (one output per routed expert)")
    if not getattr(config, "is_gated", True):
        raise _refuse("a non-gated MoE")
    topk_weights, topk_ids = topk_output[0], topk_output[1]
    return fused_experts(x, layer.w13_weight, layer.w2_weight, getattr(layer, "w13_weight_bias", None),
                         getattr(layer, "w2_weight_bias", None), topk_weights, topk_ids, activation(config),
                         config.apply_router_weight_on_input, config.routed_scaling_factor)


def activation(config):
    """The gated activation the release's Triton runner applies for `config`, as a function of
    [n, 2 * intermediate]: its own SwiGLU with alpha and limit (interleaved gate/up), its own
    clamped SiLU, or SiLU on the halves (gate | up, the kernel `silu_and_mul`)."""
    from sglang.srt.layers.moe.fused_moe_triton import fused_moe

    own = {name: _uncompiled(getattr(fused_moe, name)) for name in ACTIVATIONS if hasattr(fused_moe, name)}
    alpha, limit = config.gemm1_alpha, config.gemm1_clamp_limit
    if config.activation != "silu":
        raise _refuse(f"activation {config.activation!r}")
    if alpha is not None:
        if limit is None:
            raise _refuse("gemm1_alpha without gemm1_clamp_limit (the runner asserts both)")
        func = own.get("_swiglu_gpt_oss_sigmoid_alpha") or own.get("swiglu_with_alpha_and_limit")
        if func is None:
            raise _refuse("gemm1_alpha in a release without its SwiGLU-with-alpha function")
        return lambda h: func(h, alpha, limit)
    if limit is not None:
        if "_swiglu_silu_clamp_mul" not in own:
            raise _refuse("gemm1_clamp_limit without gemm1_alpha in a release that computes no such activation")
        return lambda h: own["_swiglu_silu_clamp_mul"](h, limit)

    def silu_and_mul(h):
        gate, up = h.chunk(2, dim=-1)
        return torch.nn.functional.silu(gate) * up
    return silu_and_mul


def _uncompiled(func):
    """The Python function under a `@torch.compile` (the release's own body, run eagerly)."""
    return getattr(func, "_torchdynamo_orig_callable", None) or getattr(func, "__wrapped__", None) or func


def fused_experts(x, w13, w2, b13, b2, topk_weights, topk_ids, act, weight_on_input: bool,
                  routed_scaling_factor) -> torch.Tensor:
    """sum over each token's routed experts e of w_e * (act(x @ w13[e].T + b13[e]) @ w2[e].T + b2[e]),
    accumulated in float32 as the kernel accumulates; with `weight_on_input` the router weight
    scales the input instead (one expert per token, as the runner requires). x [T, H],
    w13 [E, 2I, H], w2 [E, H, I], topk [T, k] -> [T, H] in x's dtype."""
    experts = w13.shape[0]
    if topk_ids.numel() and (int(topk_ids.min()) < 0 or int(topk_ids.max()) >= experts):
        raise _refuse(f"expert ids outside the layer's {experts} experts (a masked or remote expert)")
    if weight_on_input and topk_ids.shape[1] != 1:
        raise _refuse("apply_router_weight_on_input with more than one expert per token")
    total = torch.zeros(x.shape, dtype=torch.float32)
    for expert in range(experts):
        token, slot = (topk_ids == expert).nonzero(as_tuple=True)
        if token.numel() == 0:
            continue
        weight = topk_weights[token, slot, None].float()
        h = x[token].float() * weight if weight_on_input else x[token].float()
        gate_up = h @ w13[expert].float().t()
        if b13 is not None:
            gate_up = gate_up + b13[expert].float()
        y = act(gate_up.to(x.dtype)).float() @ w2[expert].float().t()
        if b2 is not None:
            y = y + b2[expert].float()
        if not weight_on_input:
            y = y * weight
        total.index_add_(0, token, y)
    if routed_scaling_factor is not None:
        total = total * routed_scaling_factor
    return total.to(x.dtype)
