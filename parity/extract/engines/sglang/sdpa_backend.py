"""A minimal prefill attention backend: causal SDPA over the tokens of one EXTEND batch.

SGLang's attention layers call `get_attn_backend().forward(q, k, v, layer, batch)`;
which backend answers is a deployment choice, not part of what parity checks (the
capture lives in the decoder layers and the model loop, which run unchanged). This
backend needs no KV pool, so the same code serves every release and architecture,
including DeepSeek MLA's prefill path, and keeps the extraction's memory tiny.
Correctness is not assumed: every captured state is matched against transformers.
A hybrid target's linear-attention (GDN) layers reach the same backend (`forward` with
`mixed_qkv`, `a`, `b`); their prefill is gdn_standin.linear_attention_extend.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import gdn_standin


def _attend_with_sinks(q, k, v, mask, scale, sinks):
    """Softmax over [scores, one learned sink logit per head] (gpt-oss): q [H, n, D] -> [H, n, Dv]."""
    if k.shape[0] != q.shape[0]:  # GQA: repeat KV heads
        k = k.repeat_interleave(q.shape[0] // k.shape[0], 0)
        v = v.repeat_interleave(q.shape[0] // v.shape[0], 0)
    scores = (q @ k.transpose(-1, -2)) * scale  # [H, n, n]
    scores = scores.masked_fill(~mask, float("-inf"))
    sink = sinks.float().view(-1, 1, 1).expand(-1, scores.shape[1], 1)  # [H, n, 1]
    probs = torch.cat([scores, sink], -1).softmax(-1)[..., :-1]
    return probs @ v


def causal_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer, seq_lens: list[int],
                sinks: torch.Tensor | None = None) -> torch.Tensor:
    """q [T, Hq*Dqk] or [T, Hq, Dqk]; k [T, Hk, Dqk]; v [T, Hv, Dv] -> [T, Hq*Dv]."""
    if getattr(layer, "logit_cap", 0) and layer.logit_cap > 0:
        raise NotImplementedError("parity's prefill backend does not implement logit capping")
    if not q.dtype == k.dtype == v.dtype:
        # E.g. SGLang 0.5.23's Llama-4 attention, off CUDA, casts q and k to bfloat16 (its fused
        # CUDA qk-norm keeps them in the model's dtype): states computed so cannot be matched
        # against the float32 reference, and mixing them here would only hide that.
        raise NotImplementedError(
            f"the model's attention handed q {q.dtype}, k {k.dtype}, v {v.dtype} to parity's prefill "
            "backend: its non-CUDA code path computes attention in another precision than the model's")
    window = getattr(layer, "sliding_window_size", None)
    t = q.shape[0]
    hq, dv = layer.tp_q_head_num, layer.v_head_dim
    q = q.reshape(t, hq, -1)
    k = k.reshape(t, layer.tp_k_head_num, -1)
    v = v.reshape(t, layer.tp_v_head_num, -1)
    out, start = [], 0
    for n in seq_lens:  # one request at a time: [H, n, D]
        qs, ks, vs = (x[start:start + n].transpose(0, 1) for x in (q, k, v))
        mask = torch.ones(n, n, dtype=torch.bool).tril()
        if window is not None and window > 0:
            mask &= ~torch.ones(n, n, dtype=torch.bool).tril(-window)
        if sinks is not None:
            o = _attend_with_sinks(qs, ks, vs, mask, layer.scaling, sinks)
        else:
            o = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, scale=layer.scaling,
                                               enable_gqa=hq != ks.shape[0])
        out.append(o.transpose(0, 1).reshape(n, hq * dv))
        start += n
    return torch.cat(out, 0)


class WriteOnlyKVPool:
    """What the model's prefill path writes its KV/latent cache into. Prefill attention
    here is computed from the batch's own k and v, so writes are accepted and dropped;
    any read (a decode or prefix-cache path) raises instead of returning stale data."""

    def __getattr__(self, name: str):
        if name.startswith("set_"):
            return lambda *args, **kwargs: None
        raise NotImplementedError(f"KV pool read {name!r}: parity extracts from prefill batches only")


def make_backend_class(base: type) -> type:
    """Subclass the installed release's AttentionBackend so isinstance checks hold."""

    class PrefillSDPABackend(base):  # type: ignore[misc, valid-type]
        def __init__(self):  # no real pools, no device buffers
            self.token_to_kv_pool = WriteOnlyKVPool()

        def init_forward_metadata(self, forward_batch):
            pass

        def forward(self, q=None, k=None, v=None, layer=None, forward_batch=None, save_kv_cache=True, **kwargs):
            if kwargs.get("mixed_qkv") is not None:  # a linear-attention (GDN) layer of a hybrid target
                return gdn_standin.linear_attention_extend(layer, forward_batch, kwargs["mixed_qkv"], kwargs["a"],
                                                           kwargs["b"])
            return super().forward(q, k, v, layer, forward_batch, save_kv_cache, **kwargs)

        def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kwargs):
            if k is None or v is None:
                raise NotImplementedError(
                    "the absorbed-MLA path (attention over the latent KV pool) reached parity's "
                    "prefill backend; it only serves the MHA prefill path")
            return causal_sdpa(q, k, v, layer, list(forward_batch.extend_seq_lens_cpu),
                               sinks=kwargs.get("sinks"))

        def forward_decode(self, *args, **kwargs):
            raise NotImplementedError("parity extracts with EXTEND (prefill) batches only")

    return PrefillSDPABackend
