"""The draft config in SGLang's served format, written from a speculators draft config.

SGLang's draft class reads `model_type`, `eagle_config`, `norm_before_fc`, `fc_norm`,
`norm_output`, `target_hidden_size`, `draft_vocab_size` and the Llama layer keys below
(docs/draft-graph.md, 'What SGLang 0.5.23's draft class reads'). Tensor names are not the
config's concern: SGLang's `load_weights` maps speculators' names itself from 0.5.11; for older
releases the serving extraction finds the renames it needs (parity/checkpoint.py).
"""

from __future__ import annotations

# transformer_layer_config keys SGLang's Llama draft reads; everything else is speculators-only.
LAYER_KEYS = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
              "head_dim", "hidden_act", "rms_norm_eps", "max_position_embeddings", "rope_theta",
              "rope_scaling", "rope_parameters", "vocab_size", "attention_bias", "mlp_bias",
              "num_hidden_layers", "bos_token_id", "eos_token_id")


def served_config(spec: dict, ids: list[int]) -> dict:
    """SGLang's config.json for the speculators draft config `spec`, serving aux ids `ids`."""
    layer = spec.get("transformer_layer_config") or {}
    cfg = {k: layer[k] for k in LAYER_KEYS if k in layer}
    cfg.update({
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "num_hidden_layers": layer.get("num_hidden_layers", 1),
        "draft_vocab_size": spec.get("draft_vocab_size"),
        "target_hidden_size": spec.get("target_hidden_size") or layer.get("hidden_size"),
        "norm_before_fc": bool(spec.get("norm_before_fc", False)),
        "fc_norm": bool(spec.get("fc_norm", False)),
        "norm_output": bool(spec.get("norm_output", False)),
        "tie_word_embeddings": False,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(ids), "use_aux_hidden_state": True},
    })
    return cfg
