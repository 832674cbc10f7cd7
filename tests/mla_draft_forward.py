"""SGLang's MLA EAGLE-3 draft (`Eagle3DeepseekV2ForCausalLM`) run on the CPU against a reference.

    python -m tests.mla_draft_forward DRAFT_DIR   (prints one JSON line)

The draft is built at tiny widths by the installed SGLang's own config reader and class (the
family adapter's `build_draft`, as every extraction builds it), its weights seeded, and one
prefill run by the adapter (parity's prefill SDPA backend: MLA's MHA prefill path, as the
target's MLA layers run), with every row's logits kept. The reference is the same EAGLE-3 layer
written with transformers' DeepSeek-V3 modules (`DeepseekV3Attention` over the 2H-wide
[input_layernorm(embeds), hidden_norm(fc)] input, its rotary embedding with the config's YaRN,
`DeepseekV3RMSNorm`), on the same weights: fc, the layer output (hidden + residual) and the
logits are compared. Two controls show the comparison is not vacuous: the reference with plain
rope (no YaRN), and with the residual taken after hidden_norm.
"""

from __future__ import annotations

import json
import sys
from importlib import metadata

import torch


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def main(draft_dir: str) -> dict:
    from parity.extract import standins

    standins.install()
    from transformers.models.deepseek_v3.configuration_deepseek_v3 import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import (DeepseekV3Attention, DeepseekV3RMSNorm,
                                                                      DeepseekV3RotaryEmbedding)

    from parity.extract.engines.sglang.runtime import adapter_for, setup_on_a_free_port
    from parity.extract.shrink import shrunk_draft_dir

    adapter = adapter_for(metadata.version("sglang"))[0]
    tiny_dir, _ = shrunk_draft_dir(draft_dir)
    setup_on_a_free_port(adapter, str(tiny_dir))
    draft = adapter.build_draft(str(tiny_dir))
    cfg = draft.config
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for _, p in draft.named_parameters():
            p.copy_(0.1 * torch.randn(p.shape, generator=gen))
        for name, p in draft.named_parameters():  # norms near one, as trained ones are
            if "norm" in name:
                p.add_(1.0)
    draft.post_load_weights()
    adapter.keep_all_rows(draft)

    t, h = 7, cfg.hidden_size
    n_aux = draft.model.num_aux_hidden_states
    ids = torch.randint(0, cfg.vocab_size, (t,), generator=gen)
    aux = torch.randn(t, n_aux * cfg.target_hidden_size, generator=gen)
    seen = {}
    layer = adapter.draft_layers(draft)[0]
    hook = layer.register_forward_hook(
        lambda m, a, out: seen.update(layer=(out[0] + out[1]).detach().clone()))
    served = adapter.forward(draft, ids, spec_hidden=aux)
    hook.remove()
    logits = served.next_token_logits.float()

    # -- the reference: transformers' DeepSeek-V3 modules on the same weights ---------------
    sd = {k: v.detach().clone() for k, v in draft.state_dict().items()}
    pre = "model.midlayer."
    attn_sd = {k.removeprefix(pre + "self_attn."): v for k, v in sd.items() if k.startswith(pre + "self_attn.")}

    def reference(rope_scaling, normed_residual: bool = False) -> dict[str, torch.Tensor]:
        ref_cfg = DeepseekV3Config(
            hidden_size=2 * h, num_attention_heads=cfg.num_attention_heads,
            num_key_value_heads=cfg.num_attention_heads, q_lora_rank=cfg.q_lora_rank,
            kv_lora_rank=cfg.kv_lora_rank, qk_nope_head_dim=cfg.qk_nope_head_dim,
            qk_rope_head_dim=cfg.qk_rope_head_dim, v_head_dim=cfg.v_head_dim, rms_norm_eps=cfg.rms_norm_eps,
            max_position_embeddings=cfg.max_position_embeddings, attention_bias=False,
            rope_parameters={"rope_theta": 50000.0, **(rope_scaling or {"rope_type": "default"})})
        ref_cfg._attn_implementation = "eager"  # noqa: SLF001
        attn = DeepseekV3Attention(ref_cfg, 0).eval()
        attn.o_proj = torch.nn.Linear(cfg.num_attention_heads * cfg.v_head_dim, h, bias=False)
        fused = attn_sd["fused_qkv_a_proj_with_mqa.weight"]
        with torch.no_grad():
            attn.q_a_proj.weight.copy_(fused[:cfg.q_lora_rank])
            attn.kv_a_proj_with_mqa.weight.copy_(fused[cfg.q_lora_rank:])
            for name in ("q_a_layernorm", "q_b_proj", "kv_a_layernorm", "kv_b_proj", "o_proj"):
                getattr(attn, name).weight.copy_(attn_sd[f"{name}.weight"])
        rotary = DeepseekV3RotaryEmbedding(ref_cfg)

        def norm(x, name):
            module = DeepseekV3RMSNorm(x.shape[-1], eps=cfg.rms_norm_eps)
            module.weight.data.copy_(sd[name])
            return module(x)

        with torch.no_grad():
            fc = aux @ sd["model.fc.weight"].T
            embeds = norm(sd["model.embed_tokens.weight"][ids], pre + "input_layernorm.weight")
            hidden = norm(fc, pre + "hidden_norm.weight")
            x = torch.cat([embeds, hidden], -1)[None]
            positions = torch.arange(t)[None]
            mask = torch.full((t, t), float("-inf")).triu(1)[None, None]
            out = attn(x, rotary(x, positions), mask)[0][0]
            residual = out + (hidden if normed_residual else fc)
            normed = norm(residual, pre + "post_attention_layernorm.weight")
            gate, up = (normed @ sd[pre + "mlp.gate_up_proj.weight"].T).chunk(2, -1)
            layer_out = (torch.nn.functional.silu(gate) * up) @ sd[pre + "mlp.down_proj.weight"].T + residual
            final = norm(layer_out, "model.norm.weight")
            ref_logits = final @ sd["lm_head.weight"][:cfg.draft_vocab_size].T
        return {"layer": layer_out, "logits": ref_logits}

    yarn = dict(cfg.rope_scaling or getattr(cfg, "rope_parameters", {}) or {})
    yarn = {k: v for k, v in yarn.items() if k not in ("type", "rope_theta")} | {"rope_type": "yarn"}
    ref = reference(yarn)
    plain = reference(None)
    normed = reference(yarn, normed_residual=True)
    return {
        "draft_class": type(draft).__name__,
        "rope_scaling": yarn,
        "logits_shape": list(logits.shape),
        "rel_err": {"layer_output": rel(seen["layer"], ref["layer"]), "logits": rel(logits, ref["logits"])},
        "control_plain_rope": {"layer_output": rel(seen["layer"], plain["layer"]),
                               "logits": rel(logits, plain["logits"])},
        "control_normed_residual": {"layer_output": rel(seen["layer"], normed["layer"]),
                                    "logits": rel(logits, normed["logits"])},
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
