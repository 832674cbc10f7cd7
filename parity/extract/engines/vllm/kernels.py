"""Stand-ins for the three vLLM kernel bodies the official (CUDA) wheel cannot run on a CPU.

The wheel ships no CPU attention, MLA or fused-MoE kernels (`vllm._C` is absent). Without a
stand-in nothing raises: the CPU attention path returns uninitialised memory (values around
1e18, or NaN) and the forward "works". So parity replaces exactly these bodies, and nothing
else (every projection, norm, rotary embedding, residual add, the MoE router, weight loading
and the capture stay vLLM's own):

- `Attention.forward`: causal scaled-dot-product attention over the one prefill sequence (a
  layer's sliding window and attention sinks honoured, gpt-oss);
- `MLAAttention.forward`: the latent decompression vLLM's MLA prefill does (`kv_b_proj`, rope
  part shared across heads), then the same causal attention;
- `CPUUnquantizedExperts.apply` (+ its weight prepacking): each routed expert's gated MLP
  (SiLU, or gpt-oss's SwiGLU-OAI by vLLM's own native implementation; expert biases added),
  weighted by the router's own top-k weights and ids.

Each stand-in covers only the case parity runs (one sequence, no KV cache, no expert
parallelism, SiLU or SwiGLU-OAI experts) and raises `KernelStandInError` for anything else, so
a path that relies on more than it computes fails loudly instead of reading a wrong value.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


class KernelStandInError(RuntimeError):
    """A replaced kernel was asked for something its stand-in does not compute."""


def _one_sequence(what: str) -> None:
    """The stand-ins compute one prefill sequence with no KV cache: a scheduled batch (the
    forward context carries attention metadata) would need the real kernel."""
    from vllm import forward_context as fc

    available = getattr(fc, "is_forward_context_available", None)  # vLLM 0.11 has no such check
    context = fc.get_forward_context() if (available() if available else fc._forward_context is not None) else None
    if context is not None and context.attn_metadata is not None:
        raise KernelStandInError(f"{what}: parity's stand-in computes one prefill sequence without a "
                                 "KV cache, but the forward context carries attention metadata (a "
                                 "scheduled batch): the real kernel is needed here")


def _per_query_head(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """k, v with each kv head repeated for the query heads that share it (grouped-query)."""
    groups = q.shape[1] // k.shape[1]
    return k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)


def _causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """[T, heads, d] each (k, v may have fewer heads: grouped-query) -> [T, heads * d_v]."""
    tokens, heads = q.shape[0], q.shape[1]
    k, v = _per_query_head(q, k, v)
    out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                         is_causal=True, scale=scale)
    return out.transpose(0, 1).reshape(tokens, heads * v.shape[-1])


def _windowed_with_sinks(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                         window: int | None, sinks: torch.Tensor | None) -> torch.Tensor:
    """Causal attention where a query sees only the last `window` keys (itself included) and,
    with `sinks` (one logit per head, gpt-oss), each query's softmax has one more term that
    carries no value. [T, heads, d] each -> [T, heads * d_v]."""
    tokens, heads = q.shape[0], q.shape[1]
    k, v = _per_query_head(q, k, v)
    scores = torch.einsum("thd,shd->hts", q.float(), k.float()) * scale  # [heads, T, T]
    i, j = torch.arange(tokens)[:, None], torch.arange(tokens)[None, :]
    seen = j <= i
    if window is not None:
        seen = seen & (i - j < window)
    scores = scores.masked_fill(~seen, float("-inf"))
    if sinks is not None:
        sink = sinks.float().view(heads, 1, 1).expand(heads, tokens, 1)
        probs = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
    else:
        probs = torch.softmax(scores, dim=-1)
    out = torch.einsum("hts,shd->thd", probs, v.float())
    return out.reshape(tokens, heads * v.shape[-1]).to(q.dtype)


def attention_forward(self, query, key, value, output_shape=None, output_dtype=None):
    """`Attention.forward` for one causal prefill sequence (a layer's sliding window and
    attention sinks honoured)."""
    _one_sequence("Attention.forward")
    if getattr(self.impl, "logits_soft_cap", None):
        raise KernelStandInError("Attention.forward: parity's stand-in has no logits soft cap")
    tokens = query.shape[0]
    q = query.view(tokens, self.num_heads, self.head_size)
    k = key.view(tokens, self.num_kv_heads, self.head_size)
    v = value.view(tokens, self.num_kv_heads, getattr(self, "head_size_v", self.head_size))  # 0.11: one size
    window, sinks = getattr(self, "sliding_window", None), getattr(self.impl, "sinks", None)
    if window is None and sinks is None:
        out = _causal(q, k, v, self.impl.scale)
    else:
        out = _windowed_with_sinks(q, k, v, self.impl.scale, window, sinks)
    return out.to(output_dtype or query.dtype)


def mla_forward(self, q, kv_c_normed, k_pe, output_shape=None, q_dcp_replicated=None, mqa_q_prepared=None):
    """`MLAAttention.forward`: decompress the latent with the layer's own `kv_b_proj`, then
    attend (the query already carries its nope and rope parts). `mqa_q_prepared` (0.34: a
    query already absorbed for the MQA kernel, passed by models with a sparse-attention
    indexer) is refused."""
    _one_sequence("MLAAttention.forward")
    if q_dcp_replicated is not None:
        raise KernelStandInError("MLAAttention.forward: parity's stand-in has no decode context parallelism")
    if mqa_q_prepared is not None:
        raise KernelStandInError("MLAAttention.forward: parity's stand-in takes no pre-absorbed MQA query "
                                 "(mqa_q_prepared)")
    tokens, heads = q.shape[0], self.num_heads
    kv = self.kv_b_proj(kv_c_normed)[0].view(tokens, heads, self.qk_nope_head_dim + self.v_head_dim)
    k_nope, v = kv.split([self.qk_nope_head_dim, self.v_head_dim], dim=-1)
    k = torch.cat([k_nope, k_pe.view(tokens, 1, -1).expand(tokens, heads, -1)], dim=-1)
    return _causal(q.view(tokens, heads, -1), k, v, self.scale)


def experts_prepare(self, layer) -> None:
    """The expert weights stay as loaded (the real step prepacks them for the absent kernel)."""
    self._use_zentorch = False


def experts_apply(self, output, hidden_states, w1, w2, topk_weights, topk_ids, activation,
                  global_num_experts, expert_map, a1q_scale, a2_scale, workspace13, workspace2,
                  expert_tokens_meta, apply_router_weight_on_input) -> None:
    """Each routed expert's SiLU-gated MLP on the tokens the router sent it, weighted by the
    router's weights (already applied to the input when `apply_router_weight_on_input`)."""
    if expert_map is not None:
        raise KernelStandInError("fused MoE: parity's stand-in has no expert parallelism (expert_map)")
    if a1q_scale is not None or a2_scale is not None:
        raise KernelStandInError("fused MoE: parity's stand-in has no quantised activations")
    output.copy_(routed_experts(hidden_states, w1, w2, getattr(self, "w1_bias", None), getattr(self, "w2_bias", None),
                                topk_weights, topk_ids, activation, apply_router_weight_on_input).to(output.dtype))


ROUTER_SETTINGS = ("use_grouped_topk", "renormalize", "scoring_func", "custom_routing_function")


def experts_prepare_routing(self, layer) -> None:
    """0.28-0.29's weight preparation of experts that route themselves: the router's settings
    the real step takes from the layer (ROUTER_SETTINGS, which their `_select_experts` reads);
    the expert weights stay as loaded (the real step prepacks them for the absent kernel)."""
    for name in ROUTER_SETTINGS:
        setattr(self, name, getattr(layer, name))
    experts_prepare(self, layer)


def experts_apply_routing(self, hidden_states, w1, w2, router_logits, activation, global_num_experts, expert_map,
                          a1q_scale, apply_router_weight_on_input, num_expert_group=None,
                          e_score_correction_bias=None, routed_scaling_factor=None, topk_group=None):
    """0.28-0.29's `CPUUnquantizedExperts.apply`, whose experts route themselves (a monolithic
    experts class: router logits in, output returned): the release's own router
    (`self._select_experts`, grouped top-k and correction bias as the layer passes them), then
    each routed expert's gated MLP as `experts_apply`."""
    if expert_map is not None:
        raise KernelStandInError("fused MoE: parity's stand-in has no expert parallelism (expert_map)")
    if a1q_scale is not None:
        raise KernelStandInError("fused MoE: parity's stand-in has no quantised activations")
    if apply_router_weight_on_input:
        raise KernelStandInError("fused MoE: parity's stand-in does not weight the input by the router")
    topk_weights, topk_ids = self._select_experts(hidden_states, router_logits, num_expert_group, topk_group,
                                                  e_score_correction_bias, routed_scaling_factor)
    return routed_experts(hidden_states, w1, w2, getattr(self, "w1_bias", None), getattr(self, "w2_bias", None),
                          topk_weights, topk_ids, activation).to(hidden_states.dtype)


def routed_experts(hidden_states, w1, w2, b1, b2, topk_weights, topk_ids, activation,
                   weights_on_input: bool = False) -> torch.Tensor:
    """Each routed expert's gated MLP (`_expert_activation`; biases `b1`, `b2` added when given) on
    the tokens the router sent it, weighted by the router's weights (unless already applied to
    the input: `weights_on_input`), summed per token in float32. w1 [E, 2I, H], w2 [E, H, I]."""
    act = _expert_activation(activation)
    total = torch.zeros(hidden_states.shape, dtype=torch.float32)
    for expert in range(w1.shape[0]):
        token, slot = (topk_ids == expert).nonzero(as_tuple=True)
        if token.numel() == 0:
            continue
        gate_up = hidden_states[token] @ w1[expert].t()  # [n, 2 * intermediate]
        if b1 is not None:
            gate_up = gate_up + b1[expert]
        y = act(gate_up) @ w2[expert].t()
        if b2 is not None:
            y = y + b2[expert]
        if not weights_on_input:
            y = y * topk_weights[token, slot, None]
        total.index_add_(0, token, y.float())
    return total


def _expert_activation(activation):
    """The experts' gated activation on [n, 2 * intermediate]: SiLU on the halves
    (gate | up), or vLLM's own native SwiGLU-OAI (gpt-oss: interleaved gate/up, clamped)."""
    name = str(getattr(activation, "value", activation)).lower()
    if name == "silu":
        def silu_and_mul(x):
            gate, up = x.chunk(2, dim=-1)
            return F.silu(gate) * up
        return silu_and_mul
    if name == "swigluoai":
        from vllm.model_executor.layers.activation import SwigluOAIAndMul

        return SwigluOAIAndMul().forward_native  # vLLM's reference implementation of its kernel
    raise KernelStandInError(f"fused MoE: parity's stand-in computes SiLU and SwiGLU-OAI experts, not {activation}")


_ABSENT_OPS: list = []  # the torch.library fragments below, kept alive


def absent_custom_ops(*names: str) -> list[str]:
    """Register each `torch.ops._C.NAME` the wheel's (unloadable) `_C` extension would define
    and that vLLM looks up when it builds a layer but, on this CPU path, never calls (vLLM
    0.28-0.30's `SiluAndMul.__init__` fetches `silu_and_mul`, then `forward_cpu` runs the native
    version). Calling one raises KernelStandInError. Returns the names registered."""
    done = []
    for name in names:
        if hasattr(torch.ops._C, name):
            continue
        if not _ABSENT_OPS:
            _ABSENT_OPS.append(torch.library.Library("_C", "FRAGMENT"))
        lib = _ABSENT_OPS[0]
        lib.define(f"{name}(Tensor(a!) out, Tensor input) -> ()")

        def absent(out, x, _name=name):
            raise KernelStandInError(f"torch.ops._C.{_name} was called: the wheel's kernel is absent on a "
                                     "CPU, and parity registered it only because vLLM looks it up")
        lib.impl(name, absent, "CompositeExplicitAutograd")
        done.append(name)
    return done
