"""Shrink a real target config to a tiny one of the same architecture and depth.

Which hidden state an engine captures depends on the architecture's model code and
the number of layers, never on the widths. So we keep `architectures`, `model_type`,
`num_hidden_layers` and every structural switch (dense/MoE layer pattern, MLA, norms,
rope type), and shrink only widths, head counts, expert counts and the vocabulary.
Memory and time then depend on the layer count alone, not on the real model's size.
"""

from __future__ import annotations

import copy
from typing import Any

# Width-like keys and their tiny values. Only keys already present are overridden.
TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 256,
    # MoE
    "n_routed_experts": 4,
    "num_experts": 4,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "n_group": 1,
    "topk_group": 1,
    # DeepSeek MLA
    "q_lora_rank": 48,
    "kv_lora_rank": 32,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
}

# Keys dropped: a tiny random checkpoint is never quantised, and remote code is never run.
DROPPED = ("quantization_config", "auto_map", "compression_config")


def shrink_config(config: dict[str, Any]) -> dict[str, Any]:
    """Return a tiny copy of an HF config dict (text part) with the same structure."""
    tiny = copy.deepcopy(config)
    for key in DROPPED:
        tiny.pop(key, None)
    for key, value in TINY.items():
        if key in tiny and tiny[key] is not None:
            tiny[key] = value
    if tiny.get("model_type", "").startswith("deepseek"):
        # MLA keeps one KV head per attention head.
        tiny["num_key_value_heads"] = tiny["num_attention_heads"]
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):  # keep special ids inside the vocab
        value = tiny.get(key)
        if isinstance(value, int) and value >= tiny.get("vocab_size", value + 1):
            tiny[key] = tiny["vocab_size"] - 1 - ("pad" in key)
        elif isinstance(value, list):
            tiny[key] = [v for v in value if v < tiny.get("vocab_size", 0)] or [tiny["vocab_size"] - 1]
    tiny["torch_dtype"] = "float32"
    tiny["dtype"] = "float32"
    tiny["tie_word_embeddings"] = bool(config.get("tie_word_embeddings", False))
    return tiny
