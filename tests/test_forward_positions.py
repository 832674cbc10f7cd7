"""`parity forward` past the draft's declared positions (parity.forward.positions).

The plan and the per-group comparison run without engines; the edit of SGLang's installed
llama3 rope, in a copy of the environment, runs both sides (slow). The matched pairs and the
injected rope drifts on the real engines are in tests/test_forward.py (one run for all).
"""

from __future__ import annotations

import json

import pytest
import torch

from parity.forward.compare import compare
from parity.forward.positions import WITHIN, plan, spans
from parity.forward.tolerances import FP32

from .helpers import ROOT, edit_in_shadow, run_parity, shadow_env, shadow_run_env

FIXTURE_DRAFT = {"max_position_embeddings": 512, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}
LLAMA31_DRAFT = {"max_position_embeddings": 2048,
                 "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}}


def test_rows_go_past_each_declared_bound_within_the_context():
    p = plan(16, 3, FIXTURE_DRAFT, {"max_position_embeddings": 512}, 131072)
    assert p.positions == [*range(11), 511, 512, 513, 514, 515] and not p.notes
    assert [b.sides for b in p.bounds] == [["trained", "served"]]
    assert [p.group(x) for x in (0, 10, 511, 512, 515)] == [
        WITHIN, WITHIN, "within, just below max_position_embeddings 512", "past max_position_embeddings 512",
        "past max_position_embeddings 512"]
    both = plan(16, 3, LLAMA31_DRAFT, LLAMA31_DRAFT, 131072)
    assert both.positions == [*range(6), *range(2047, 2052), *range(8191, 8196)]
    assert [b.key for b in both.bounds] == ["max_position_embeddings",
                                            "rope_scaling.original_max_position_embeddings"]
    # step 2 moves every row two on: the first run's row 2047 is then past 2048
    assert both.rows_by_group(13, 2) == {WITHIN: [0, 1, 2, 3, 4, 5], "past max_position_embeddings 2048":
                                         [6, 7, 8, 9, 10], "past rope_scaling.original_max_position_embeddings 8192":
                                         [11, 12]}
    assert spans(both.positions) == "0..5, 2047..2051, 8191..8195"


def test_a_bound_only_one_side_declares_is_fed_too():
    p = plan(16, 1, FIXTURE_DRAFT, {"max_position_embeddings": 4096}, 131072)
    assert [(b.position, b.sides) for b in p.bounds] == [(512, ["trained"]), (4096, ["served"])]


def test_bounds_not_fed_say_why():
    at_context = plan(16, 3, {"max_position_embeddings": 131072}, {}, 131072)
    assert at_context.positions == list(range(16))
    assert at_context.notes == ["max_position_embeddings 131072 (trained) not fed past: the served context ends at 131072"]
    short = plan(8, 1, LLAMA31_DRAFT, {}, 131072)
    assert [b.position for b in short.bounds] == [] and "leaves no room" in short.notes[0]
    tiny = plan(16, 1, {"max_position_embeddings": 8}, {}, None)
    assert tiny.positions == list(range(16)) and "among the rows before it" in tiny.notes[0]


def test_the_comparison_splits_each_stage_by_position_group():
    p = plan(16, 1, FIXTURE_DRAFT, {}, 131072)
    gen = torch.Generator().manual_seed(0)
    train = {"0/layer_output": torch.randn(15, 8, generator=gen), "0/logits": torch.randn(15, 5, generator=gen),
             "vocab_map": torch.arange(5)}
    serve = {k: v.clone() for k, v in train.items()}
    serve["0/layer_output"][12:] += 0.5  # rows 12.. (positions 512..514) computed otherwise
    serve["0/logits"][12:] += torch.tensor([0.3, 0.0, 0.0, 0.0, 0.0])
    stages, first = compare("x", train, serve, 1, FP32, p)
    layer = next(s for s in stages if s.stage == "layer_output")
    groups = {g.group: g for g in layer.groups}
    assert groups[WITHIN].max_abs == 0 and groups[WITHIN].ok and groups[WITHIN].rows == 11
    assert groups["within, just below max_position_embeddings 512"].positions == [511]
    past = groups["past max_position_embeddings 512"]
    assert past.positions == [512, 513, 514] and not past.ok and past.max_abs == pytest.approx(0.5)
    assert past.max_rel == pytest.approx(0.5 / float(train["0/layer_output"][12:].abs().max()))
    assert first.stage == "layer_output" and "past max_position_embeddings 512: 0.5" in first.message
    assert not compare("x", train, serve, 1, FP32)[0][0].groups  # no plan: no groups


SITE = "lib/python3.11/site-packages"
LLAMA3_ROPE = f"{SITE}/sglang/srt/layers/rotary_embedding/rope_variant.py"
# llama3 scaling divides the frequencies whose wavelength exceeds original_max / low_freq_factor by the
# factor; the edit divides them by twice the factor: frequencies that turn a few thousandths of a turn
# over 16 positions
EDIT = ("inv_freqs / self.scaling_factor,", "inv_freqs / (2 * self.scaling_factor),  # the edit")


@pytest.mark.slow
def test_an_edit_of_sglangs_llama3_rope_shows_only_past_the_declared_positions(tmp_path):
    """SGLang's installed llama3 rope edited in a copy of the environment: the draft with Llama-3.1's
    rope drifts past its declared positions, and agrees within tolerance at the first rows. The
    target is Qwen3 (no rope scaling), so the edit reaches the draft only."""
    shadow = shadow_env(ROOT / ".venv", tmp_path / "shadow", {LLAMA3_ROPE: (EDIT[0], EDIT[0])})
    edit_in_shadow(shadow, LLAMA3_ROPE, *EDIT)
    out = run_parity("forward", "--fixture", "qwen3-8l", "--rope", "--steps", "2", "--json",
                     python=str(shadow / "bin" / "python"), env=shadow_run_env(shadow, tmp_path / "home"))
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    results = {r["name"]: r for r in json.loads(out.stdout)["results"]}
    assert results["matched"]["verdict"] == "parity"  # the default rope: not edited
    r = results["matched-llama3-rope"]
    assert r["verdict"] == "drift" and r["first_divergence"]["stage"] == "layer_output", r["first_divergence"]
    for s in r["stages"]:
        if s["stage"] == "logits":
            groups = {g["group"]: g for g in s["groups"]}
            assert groups[WITHIN]["ok"] and groups[WITHIN]["max_abs"] <= FP32.logits_atol, groups[WITHIN]
            past = [g for name, g in groups.items() if name.startswith("past")]
            assert len(past) == 2 and all(not g["ok"] and g["max_abs"] > 10 * FP32.logits_atol for g in past), past
