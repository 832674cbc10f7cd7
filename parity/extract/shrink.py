"""Shrink a real target config to a tiny one of the same architecture and depth.

Which hidden state an engine captures depends on the architecture's model code and
the number of layers, never on the widths. So we keep `architectures`, `model_type`,
`num_hidden_layers` and every structural switch (dense/MoE layer pattern, MLA, norms,
rope type), and shrink only widths, head counts, expert counts and the vocabulary.
Memory and time then depend on the layer count alone, not on the real model's size.

A published multimodal wrapper (`*ForConditionalGeneration` with a nested `text_config`,
e.g. Kimi-K2.5, Llama-4) keeps its own shape: the text model inside is shrunk by the same
rules, and the vision tower, which the engine's wrapper class builds but no text hidden
state passes through, keeps its widths and gets a single block (`VISION_DEPTH_KEYS`).
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

# Width-like keys and their tiny values. Only keys already present are overridden.
TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "intermediate_size_mlp": 128,  # Llama-4's dense layers
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 256,
    # MoE
    "n_routed_experts": 4,
    "num_experts": 4,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,  # at most: top-1 routers (Llama-4) stay top-1
    "n_group": 1,
    "topk_group": 1,
    # gated delta net (Qwen3-Next's linear attention); value heads a multiple of key heads, as published
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    # DeepSeek MLA
    "q_lora_rank": 48,
    "kv_lora_rank": 32,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
}

# Keys dropped: a tiny random checkpoint is never quantised, and remote code is never run.
DROPPED = ("quantization_config", "auto_map", "compression_config")

# A wrapper's vision tower: one block, under the names engines' config classes read
# (SGLang's Kimi-K2.5 vision config reads `num_hidden_layers`, the published file says
# `vt_num_hidden_layers`; both are set, whichever the engine reads).
VISION_DEPTH_KEYS = ("num_hidden_layers", "vt_num_hidden_layers")


def shrink_config(config: dict[str, Any]) -> dict[str, Any]:
    """Return a tiny copy of an HF config dict with the same structure.

    A wrapper config (nested `text_config`) keeps its shape; its text part is shrunk."""
    tiny = _shrink_text(config)
    text = tiny.get("text_config")
    if isinstance(text, dict):
        tiny["text_config"] = _shrink_text(text)
        vision = tiny.get("vision_config")
        if isinstance(vision, dict):
            vision = dict(vision)
            for key in VISION_DEPTH_KEYS:
                vision[key] = 1
            if "text_hidden_size" in vision:  # the projector's output width is the text width
                vision["text_hidden_size"] = tiny["text_config"].get("hidden_size")
            for key in DROPPED:
                vision.pop(key, None)
            tiny["vision_config"] = vision
        if isinstance(tiny["text_config"].get("vocab_size"), int):
            _special_ids_inside(tiny, tiny["text_config"]["vocab_size"])
    return tiny


# Token ids the shrink keeps inside the tiny vocabulary (their role, not their value, is the config's).
TOKEN_ID_KEYS = ("pad_token_id", "bos_token_id", "eos_token_id")


def _special_ids_inside(tiny: dict[str, Any], vocab: int) -> None:
    """Keep the special token ids inside the shrunk vocabulary."""
    for key in TOKEN_ID_KEYS:
        value = tiny.get(key)
        if isinstance(value, int) and value >= vocab:
            tiny[key] = vocab - 1 - ("pad" in key)
        elif isinstance(value, list):
            tiny[key] = [v for v in value if v < vocab] or [vocab - 1]


def _shrink_text(config: dict[str, Any]) -> dict[str, Any]:
    tiny = copy.deepcopy(config)
    for key in DROPPED:
        tiny.pop(key, None)
    for key, value in TINY.items():
        if key in tiny and tiny[key] is not None:
            tiny[key] = min(value, tiny[key]) if key == "num_experts_per_tok" else value
    if tiny.get("model_type", "").startswith("deepseek") and "num_attention_heads" in tiny:
        # MLA keeps one KV head per attention head (a config that names no heads, such as the
        # width-and-depth summary a trainer's converter reads of its target, gains none).
        tiny["num_key_value_heads"] = tiny["num_attention_heads"]
    if "vocab_size" in tiny:
        _special_ids_inside(tiny, tiny["vocab_size"])
    tiny["torch_dtype"] = "float32"
    tiny["dtype"] = "float32"
    tiny["tie_word_embeddings"] = bool(config.get("tie_word_embeddings", False))
    return tiny


def shrink_draft_config(config: dict[str, Any]) -> dict[str, Any]:
    """A draft config with tiny widths (same flags, keys and layer layout), for building the
    engine's draft class at any draft size: the top level and a speculators-format
    `transformer_layer_config` are shrunk like a target; a target width that differs from the
    draft's stays different (96), and the draft vocabulary at most 32, or the tiny vocabulary
    where it is the draft's full one (whether the class has a d2t to read depends on it). Only
    the run reads these widths: a contract's sizes are the real config's (parity.contract.sources)."""
    tiny = shrink_config(config)
    layer = tiny.get("transformer_layer_config")
    if isinstance(layer, dict):
        tiny["transformer_layer_config"] = shrink_config(layer)
    width = config.get("hidden_size") or (config.get("transformer_layer_config") or {}).get("hidden_size")
    real_target_h = config.get("target_hidden_size")
    if real_target_h is not None:  # keep "target width differs from draft width" as it is
        tiny["target_hidden_size"] = TINY["hidden_size"] if real_target_h == width else 96
    real_draft_vocab = config.get("draft_vocab_size")
    if real_draft_vocab is not None:  # keep "the draft vocabulary is the full one" as it is
        real_vocab = config.get("vocab_size") or (config.get("transformer_layer_config") or {}).get("vocab_size")
        tiny["draft_vocab_size"] = TINY["vocab_size"] if real_draft_vocab == real_vocab else min(real_draft_vocab, 32)
    return tiny


def shrunk_draft_dir(draft_dir) -> tuple[Path, dict]:
    """A new temporary directory holding the shrunk copy of the draft's config.json (no weights),
    and the real config."""
    config = json.loads((Path(draft_dir) / "config.json").read_text())
    out = Path(tempfile.mkdtemp(prefix="parity-draft-"))
    (out / "config.json").write_text(json.dumps(shrink_draft_config(config)))
    return out, config


def shrunk_target_dir(config: dict[str, Any], prefix: str) -> tuple[Path, Path]:
    """(work, work/target): a new private work directory (under the child's own TMPDIR) holding the
    target's config shrunk (shrink_config), where the engine and the reference are built from."""

    work = Path(tempfile.mkdtemp(prefix=prefix))
    target_dir = work / "target"
    target_dir.mkdir()
    (target_dir / "config.json").write_text(json.dumps(shrink_config(config)))
    return work, target_dir
