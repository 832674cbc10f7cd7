"""CPU stand-ins for the kernel bodies of SGLang's gated-delta-net (GDN) linear attention, the
hybrid layers of Qwen3-Next targets (`Qwen3NextForCausalLM`, `sglang/srt/models/qwen3_next.py`).

Off CUDA (parity runs with `SGLANG_USE_CPU_ENGINE` unset, so `is_cpu()` is False and SGLang takes
its GPU branches) a Qwen3-Next prefill reaches four Triton kernels, which cannot run on a CPU:
- `fused_qkvzba_split_reshape_cat` (`kernels/ops/attention/triton_gdn_fused_proj.py`), called by
  `Qwen3GatedDeltaNet.forward` on the two input projections: `split_qkvzba` computes the same
  split of the per-key-head-group interleaved layout `[q, k, v..., z...]` / `[b..., a...]` into
  `mixed_qkv` (all q, all k, all v), `z` [T, Hv, Dv], `b` and `a` [T, Hv];
- the gated RMSNorm on the core output (`FusedRMSNormGated` in `fla/fused_norm_gate.py`, or
  `RMSNorm` in `fla/layernorm_gated.py` under piecewise prefill graphs): `gated_rms_norm`,
  `rms(x) * weight * act(z)` in float32;
- in the linear-attention backend's prefill (`GDNAttnBackend.forward_extend`): the causal
  depthwise conv1d over each sequence of `mixed_qkv` (`causal_conv1d`), the gates
  (`fused_gdn_gating`: `g = -exp(A_log) * softplus(a + dt_bias)`, `beta = sigmoid(b)`: `gdn_gates`)
  and the chunked gated delta rule with q, k L2-normalised in the kernel and scale `Dk ** -0.5`
  (`gated_delta_rule`, computed here in its recurrent form, token by token in float32).

Where the GDN backend's prefill would run, parity's prefill backend (sdpa_backend.py: no KV or
mamba pool, as for full attention) calls `linear_attention_extend`, which wires the stand-ins as
`forward_extend` does for a fresh EXTEND batch: conv, split into q/k/v by the layer's widths,
gates, delta rule, output [1, T, Hv, Dv]. Every projection, the output gate's input `z`, the
out-projection, the full-attention layers and the MoE stay SGLang's own. The stand-ins are written
independently of transformers' torch fallbacks (`torch_chunk_gated_delta_rule`, `causal_conv1d_fn`,
`Qwen3NextRMSNormGated`), against which tests/test_gdn_standin.py checks each numerically, and
every captured state is identified against transformers' own Qwen3-Next.

Scope: a prefill from an empty state, unquantized, bf16/fp32. Anything else raises `StandInUsed`:
a decode or target-verify batch, a request with cached prefix state (`extend_prefix_lens > 0`:
the conv and recurrent states would be read), a conv bias or an activation other than SiLU, a
lower-bounded gate (KDA's `lower_bound`), a tuple `mixed_qkv` (Qwen3.5's split projections), a
norm asked for a residual, `prenorm`, a group size or gating before the norm.
"""

from __future__ import annotations

import importlib

import torch
import torch.nn.functional as F

from ...standins import StandInUsed

MODEL_MODULE = "sglang.srt.models.qwen3_next"
SPLIT_NAME = "fused_qkvzba_split_reshape_cat"  # the Triton split Qwen3GatedDeltaNet.forward calls by this name
NORMS = (("sglang.kernels.ops.attention.fla.fused_norm_gate", "FusedRMSNormGated"),
         ("sglang.kernels.ops.attention.fla.layernorm_gated", "RMSNorm"))
ACTIVATIONS = {"silu": F.silu, "swish": F.silu, "sigmoid": torch.sigmoid}
L2_EPS = 1e-6  # the delta-rule kernel's q/k L2 normalisation


def _refuse(what: str) -> StandInUsed:
    return StandInUsed(f"gated delta net: {what}, but parity's CPU stand-in for SGLang's GDN kernels does not "
                       "compute it; the real kernel is needed here")


def split_qkvzba(mixed_qkvz: torch.Tensor, mixed_ba: torch.Tensor, num_heads_qk: int, num_heads_v: int,
                 head_qk: int, head_v: int):
    """What `fused_qkvzba_split_reshape_cat` computes: per key-head group g the projections hold
    `[q_g (Dk), k_g (Dk), v_g (r*Dv), z_g (r*Dv)]` and `[b_g (r), a_g (r)]` (r = Hv / Hk). Returns
    `mixed_qkv` [T, 2*Hk*Dk + Hv*Dv] (all q, all k, all v), `z` [T, Hv, Dv], `b`, `a` [T, Hv]."""
    if num_heads_v % num_heads_qk:
        raise _refuse(f"{num_heads_v} value heads over {num_heads_qk} key heads")
    t, r = mixed_qkvz.shape[0], num_heads_v // num_heads_qk
    qkvz = mixed_qkvz.view(t, num_heads_qk, 2 * head_qk + 2 * r * head_v)
    q, k, v, z = qkvz.split([head_qk, head_qk, r * head_v, r * head_v], dim=-1)
    ba = mixed_ba.view(t, num_heads_qk, 2 * r)
    b, a = ba.split([r, r], dim=-1)
    mixed_qkv = torch.cat([q.reshape(t, -1), k.reshape(t, -1), v.reshape(t, -1)], dim=-1)
    return (mixed_qkv, z.reshape(t, num_heads_v, head_v).contiguous(), b.reshape(t, num_heads_v).contiguous(),
            a.reshape(t, num_heads_v).contiguous())


def causal_conv1d(x: torch.Tensor, weight: torch.Tensor, seq_lens: list[int], bias=None,
                  activation: str | None = "silu") -> torch.Tensor:
    """The causal depthwise conv over each sequence of `x` [T, C] (weight [C, K]), from a zero
    state, then the activation: out[t] = act(sum_j w[:, j] * x[t - K + 1 + j])."""
    if bias is not None:
        raise _refuse("a conv1d bias")
    if activation not in (None, "silu", "swish"):
        raise _refuse(f"conv activation {activation!r}")
    width = weight.shape[-1]
    w = weight.reshape(weight.shape[0], width).float()
    out, start = [], 0
    for n in seq_lens:
        xs = F.pad(x[start:start + n].float(), (0, 0, width - 1, 0))  # [n + K - 1, C]
        acc = sum(xs[j:j + n] * w[:, j] for j in range(width))
        out.append(F.silu(acc) if activation else acc)
        start += n
    return torch.cat(out, 0).to(x.dtype)


def gdn_gates(A_log: torch.Tensor, a: torch.Tensor, b: torch.Tensor, dt_bias: torch.Tensor):
    """`fused_gdn_gating`: the log-decay `g = -exp(A_log) * softplus(a + dt_bias)` and the write
    strength `beta = sigmoid(b)`, float32, shaped [1, T, Hv] as the kernel returns them."""
    g = -A_log.float().exp() * F.softplus(a.float() + dt_bias.float())
    return g.unsqueeze(0), b.float().sigmoid().unsqueeze(0)


def gated_delta_rule(q, k, v, g, beta, seq_lens: list[int]) -> torch.Tensor:
    """The gated delta rule from a zero state, per sequence, q and k L2-normalised, scale Dk**-0.5:
    S <- exp(g_t) S;  S <- S + beta_t k_t (v_t - S^T k_t)^T;  o_t = S^T (scale q_t).
    q, k [1, T, Hk, Dk]; v [1, T, Hv, Dv]; g, beta [1, T, Hv]. Returns [1, T, Hv, Dv] in v's dtype."""
    hv, hk = v.shape[2], q.shape[2]
    if hv % hk:
        raise _refuse(f"{hv} value heads over {hk} key heads")
    q, k = (x[0].float() * torch.rsqrt((x[0].float() ** 2).sum(-1, keepdim=True) + L2_EPS) for x in (q, k))
    q, k = q.repeat_interleave(hv // hk, 1), k.repeat_interleave(hv // hk, 1)  # [T, Hv, Dk]
    q = q * q.shape[-1] ** -0.5
    v, g, beta = v[0].float(), g[0].float(), beta[0].float()
    out = torch.empty_like(v)
    start = 0
    for n in seq_lens:
        state = v.new_zeros(hv, q.shape[-1], v.shape[-1])  # [Hv, Dk, Dv]
        for t in range(start, start + n):
            state = state * g[t].exp()[:, None, None]
            kt = k[t]  # [Hv, Dk]
            delta = (v[t] - torch.einsum("hkv,hk->hv", state, kt)) * beta[t][:, None]
            state = state + kt[:, :, None] * delta[:, None, :]
            out[t] = torch.einsum("hkv,hk->hv", state, q[t])
        start += n
    return out.unsqueeze(0)


def gated_rms_norm(x: torch.Tensor, z: torch.Tensor, weight: torch.Tensor, eps: float,
                   activation: str = "swish") -> torch.Tensor:
    """`rms(x) * weight * act(z)` over the last dim, in float32 (norm before gate), in x's dtype."""
    act = ACTIVATIONS.get(activation)
    if act is None:
        raise _refuse(f"gated norm activation {activation!r}")
    xf = x.float()
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (normed * weight.float() * act(z.float())).to(x.dtype)


def linear_attention_extend(layer, forward_batch, mixed_qkv, a, b) -> torch.Tensor:
    """What `GDNAttnBackend.forward_extend` computes for a fresh EXTEND batch, from the stand-ins:
    conv over each sequence, split into q, k, v by the layer's widths, gates, delta rule."""
    mode = forward_batch.forward_mode
    if not mode.is_extend() or mode.is_target_verify():
        raise _refuse(f"a {mode.name} batch (the cached conv and recurrent states)")
    if not isinstance(mixed_qkv, torch.Tensor):
        raise _refuse("split q/k/v projections (a tuple mixed_qkv)")
    prefix = getattr(forward_batch, "extend_prefix_lens_cpu", None) or []
    if any(int(p) for p in prefix):
        raise _refuse("a request with a cached prefix (its conv and recurrent states)")
    if getattr(layer, "lower_bound", None) is not None:
        raise _refuse("a lower-bounded gate")
    seq_lens = [int(n) for n in forward_batch.extend_seq_lens_cpu]
    weights = layer.conv_weights if not isinstance(layer.conv_weights, tuple) else None
    if weights is None:
        raise _refuse("split conv weights")
    mixed_qkv = causal_conv1d(mixed_qkv, weights, seq_lens, bias=layer.bias, activation=layer.activation)
    t = mixed_qkv.shape[0]
    query, key, value = mixed_qkv.split([layer.q_dim, layer.k_dim, layer.v_dim], dim=-1)
    query = query.reshape(1, t, layer.num_q_heads, layer.head_q_dim)
    key = key.reshape(1, t, layer.num_k_heads, layer.head_k_dim)
    value = value.reshape(1, t, layer.num_v_heads, layer.head_v_dim)
    g, beta = gdn_gates(layer.A_log, a, b, layer.dt_bias)
    return gated_delta_rule(query, key, value, g, beta, seq_lens).to(value.dtype)


def install() -> list[str]:
    """Put the split and gated-norm stand-ins where a Qwen3-Next model calls the Triton ones (run
    before the model is built). Returns what was replaced; a release without them is left as it is."""
    done = []
    try:
        model = importlib.import_module(MODEL_MODULE)
    except ModuleNotFoundError:
        return done
    original = getattr(model, SPLIT_NAME, None)
    if original is not None and not getattr(original, "__parity_standin__", False):
        setattr(model, SPLIT_NAME, _marked(split_qkvzba, original))
        done.append(f"qwen3_next.{SPLIT_NAME}")
    for module_name, cls_name in NORMS:
        try:
            cls = getattr(importlib.import_module(module_name), cls_name)
        except (ModuleNotFoundError, AttributeError):
            continue
        if getattr(cls.forward, "__parity_standin__", False):
            continue
        cls.forward = _marked(_norm_forward, cls.forward)
        done.append(f"{cls_name}.forward")
    return done


def _norm_forward(self, x, g=None, residual=None, prenorm=False, residual_in_fp32=False):
    """Either gated norm's forward: `FusedRMSNormGated(x, g, ...)` or `RMSNorm(x, z)`."""
    if g is None:
        raise _refuse("a gated norm without its gate")
    if residual is not None or prenorm:
        raise _refuse("a gated norm with a residual or prenorm")
    if getattr(self, "group_size", None) is not None or not getattr(self, "norm_before_gate", True):
        raise _refuse("a grouped gated norm or gating before the norm")
    if getattr(self, "bias", None) is not None or self.weight is None:
        raise _refuse("a gated norm with a bias or without a weight")
    return gated_rms_norm(x, g, self.weight, self.eps, self.activation)


def _marked(fn, original):
    def standin(*args, **kwargs):
        return fn(*args, **kwargs)

    standin.__parity_standin__ = True
    standin.__wrapped__ = original
    standin.__name__ = getattr(original, "__name__", fn.__name__)
    standin.__doc__ = f"parity's CPU stand-in for {getattr(original, '__qualname__', fn.__name__)}: {fn.__doc__}"
    return standin
