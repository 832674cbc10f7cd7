"""The tiny copy of a config (parity.extract.shrink) for a DeepSeek (MLA) model."""

from __future__ import annotations

import json

from parity.extract.shrink import TINY, shrink_config

from .helpers import ROOT

DEEPSEEK = ROOT / "fixtures" / "targets" / "deepseek-v3-61l" / "config.json"


def test_mla_keeps_one_kv_head_per_attention_head():
    tiny = shrink_config(json.loads(DEEPSEEK.read_text()))
    assert tiny["num_key_value_heads"] == tiny["num_attention_heads"] == TINY["num_attention_heads"]


def test_a_deepseek_summary_without_heads_is_shrunk_without_inventing_them():
    # what a trainer's converter reads of its target (parity.extract.trainers.speculators
    # target_config_for_build): width, depth and vocabulary, no heads. It raised KeyError in
    # parity's own code, which stopped speculators 0.3.0's probe on every DeepSeek target.
    summary = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
               "vocab_size": 129280, "hidden_size": 7168, "num_hidden_layers": 61}
    tiny = shrink_config(summary)
    assert "num_attention_heads" not in tiny and "num_key_value_heads" not in tiny
    assert tiny["hidden_size"] == TINY["hidden_size"]
