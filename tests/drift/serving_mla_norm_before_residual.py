"""Injected drift: SGLang's MLA draft layer (kimi_k25_eagle3.Eagle3MLADecoderLayer) keeps the
normed fc output as its residual instead of the raw one (norm_before_residual), a graph change
parity must read off a real forward of the draft on the CPU.

Run as `python -m tests.drift.serving_mla_norm_before_residual` in place of the serving probe."""

import torch

from parity.extract import standins

standins.install()

from sglang.srt.models.kimi_k25_eagle3 import Eagle3MLADecoderLayer  # noqa: E402

from parity.extract.engines.sglang import probe  # noqa: E402


def _normed_residual(self, positions, embeds, hidden_states, forward_batch, zero_allocator):
    """The class's own forward (0.5.23), but for the residual: the normed state, not the raw."""
    from sglang.srt.layers.layer_boundary import AttentionInputs, get_attn_tp_context

    embeds = self.input_layernorm(embeds)
    hidden_states = self.hidden_norm(hidden_states)
    residual = hidden_states  # the drift
    attn_input = torch.cat([embeds, hidden_states], dim=-1)
    get_attn_tp_context().set_attn_inputs(AttentionInputs(attn_input, forward_batch, self.self_attn.prepare_qkv_latent))
    attn_out = self.self_attn(positions=positions, hidden_states=attn_input, forward_batch=forward_batch,
                              zero_allocator=zero_allocator)
    if isinstance(attn_out, tuple):
        attn_out = attn_out[0]
    hidden_states, residual = self.post_attention_layernorm(attn_out, residual)
    return self.mlp(hidden_states), residual


Eagle3MLADecoderLayer.forward = _normed_residual

if __name__ == "__main__":
    raise SystemExit(probe.main())
