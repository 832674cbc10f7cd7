"""The shared built-draft readers added for vLLM and SpecForge (parity.extract.built): a rotary
module's precomputed cos/sin tables (SpecForge's), and the largest target id a d2t table maps to."""

from __future__ import annotations

import pytest
import torch

from parity.extract.built import max_token_id, rope


def _tables(freqs: torch.Tensor, t_scale: float = 1.0, mscale: float = 1.0) -> torch.nn.Module:
    """A module holding SpecForge's tables: [1, 1, positions, dim], each cat(freqs, freqs)."""
    module = torch.nn.Module()
    module.inv_freq = freqs  # what the tables were computed from, before positions or magnitudes scale
    angles = (torch.arange(4).float() / t_scale)[:, None] * freqs
    emb = torch.cat([angles, angles], dim=-1)
    module.cos_cached = (emb.cos() * mscale)[None, None]
    module.sin_cached = (emb.sin() * mscale)[None, None]
    return module


def test_the_tables_a_rotary_module_applies_are_read_before_its_inv_freq():
    freqs = torch.tensor([10000.0 ** (-2 * i / 16) for i in range(8)])
    plain = rope(torch.nn.Sequential(_tables(freqs)))
    assert plain["rope_frequencies"] == pytest.approx(sorted(freqs.tolist(), reverse=True), rel=1e-5)
    assert plain["rope_scale"] == pytest.approx(1.0)
    # linear scaling divides positions in the tables only, YaRN scales their magnitude only
    linear = rope(torch.nn.Sequential(_tables(freqs, t_scale=4.0, mscale=1.2)))
    assert linear["rope_frequencies"] == pytest.approx([f / 4 for f in plain["rope_frequencies"]], rel=1e-5)
    assert linear["rope_scale"] == pytest.approx(1.2, rel=1e-5)


def test_the_largest_target_id_follows_the_side_s_mapping():
    d2t = torch.tensor([0, 5, 5, 10])
    assert max_token_id(d2t, "offsets", 4) == 13  # target id = d + d2t[d]
    assert max_token_id(d2t, "absolute", 4) == 10
    assert max_token_id(d2t, "unknown", 4) is None
    assert max_token_id(None, None, 32000) == 31999  # no table: the lm_head's rows are target ids
