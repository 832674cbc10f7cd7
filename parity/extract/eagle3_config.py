"""The EAGLE-3 draft config format, written from a speculators draft config.

The form EAGLE-3 drafts are published in (`LlamaForCausalLMEagle3`, `model_type` "llama", the
decoder layer's keys at the top level, the aux ids in `eagle_config`): what SGLang serves, and
what vLLM serves from releases whose code has no speculators-format loader (0.8.5; parity's vLLM
engine decides it from the release's installed files). The keys below are those SGLang's draft
class reads (docs/draft-graph.md, 'What SGLang 0.5.23's draft class reads'); everything else in
a speculators config is speculators' own. Tensor names are not the config's concern.
"""

from __future__ import annotations

# transformer_layer_config keys an EAGLE-3 draft class reads; everything else is speculators-only.
LAYER_KEYS = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
              "head_dim", "hidden_act", "rms_norm_eps", "max_position_embeddings", "rope_theta",
              "rope_scaling", "rope_parameters", "vocab_size", "attention_bias", "mlp_bias",
              "num_hidden_layers", "bos_token_id", "eos_token_id")


def eagle3_config(spec: dict, ids: list[int]) -> dict:
    """The EAGLE-3 config.json for the speculators draft config `spec`, with aux ids `ids`."""
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


__all__ = ["LAYER_KEYS", "eagle3_config"]
