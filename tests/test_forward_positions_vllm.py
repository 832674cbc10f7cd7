"""`parity forward --engine vllm` past the draft's declared positions (parity.forward.positions).

vLLM's forward side builds its config with the target's own context (no --max-model-len), so
its config classes treat the draft's `max_position_embeddings` as a deployment's do: 0.33 on,
`SpeculativeConfig` raises it to the target's max_model_len for a rope type that only sizes the
rope table (llama3 included), or `VllmConfig` lowers the served context to the draft's; before
0.33 neither, and the draft's table ends at its declared positions. The matched pairs under
0.34 (every position group within tolerance) are in tests/test_forward.py; here: an edit of
vLLM's installed llama3 rope in a copy of the environment (within tolerance near 0, a drift
past the declared positions), an older release's table (UNSERVABLE there), and the served
context's check on its own (fast).
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest
import torch

from parity.extract.engines.vllm.forward_side import past_what_vllm_serves
from parity.forward.positions import WITHIN
from parity.forward.tolerances import FP32

from .helpers import built, edit_in_shadow, run_parity, shadow_release

SITE = "lib/python3.11/site-packages"
LLAMA3_ROPE = f"{SITE}/vllm/model_executor/layers/rotary_embedding/llama3_rope.py"
# llama3 scaling divides the frequencies whose wavelength exceeds original_max / low_freq_factor by the
# factor; the edit divides them by twice the factor: they barely turn over the first 16 positions
EDIT = ("inv_freqs / self.scaling_factor,", "inv_freqs / (2 * self.scaling_factor),  # the edit")


def _draft(rows: int):
    rotary = SimpleNamespace(cos_sin_cache=torch.zeros(rows, 16))
    return SimpleNamespace(model=SimpleNamespace(layers=[SimpleNamespace(self_attn=SimpleNamespace(rotary_emb=rotary))]))


def _config(context: int):
    return SimpleNamespace(model_config=SimpleNamespace(max_model_len=context))


def test_a_row_past_the_served_context_or_the_rope_table_is_refused_with_why():
    """Objects holding only what the check reads (a built draft's rope table, a resolved config's
    max_model_len): within both, nothing to say; past the context vLLM serves (it lowered it to
    the draft's), or past the table (a release that never raised the draft's positions), why."""
    sv = SimpleNamespace(version="0.34.0")
    assert past_what_vllm_serves(sv, _config(131072), _draft(131072), 8195, "n") is None
    capped = past_what_vllm_serves(sv, _config(4096), _draft(4096), 8195, "n")
    assert capped == ("vllm 0.34.0 serves a context of 4096 positions with this draft (n), below the target's; "
                      "position 8195 is never served")
    table = past_what_vllm_serves(sv, _config(131072), _draft(2048), 2051, "n")
    assert table.startswith("vllm 0.34.0 serves the target's context with the draft as built (n): position 2051 "
                            "is past the draft's rope table"), table
    assert past_what_vllm_serves(sv, _config(131072), _draft(2052), 2051, "n") is None


@pytest.mark.slow
def test_an_edit_of_vllms_llama3_rope_shows_only_past_the_declared_positions(tmp_path):
    """vLLM 0.34's installed llama3 rope edited in a copy of its environment: the draft with
    Llama-3.1's rope (2048 positions, scaled from 8192) agrees within tolerance at the first rows
    and drifts past both bounds; the draft with the default rope (the edit does not reach it) stays
    at parity. The target is Qwen3 (no rope scaling), so the edit reaches the draft only."""
    shadow, original, env = shadow_release(tmp_path, "vllm", "0.34.0", {LLAMA3_ROPE: (EDIT[0], EDIT[0])})
    edit_in_shadow(shadow, LLAMA3_ROPE, *EDIT)
    out = run_parity("forward", "--engine", "vllm", "--vllm", "0.34.0", "--fixture", "qwen3-8l", "--rope",
                     "--steps", "1", "--json", python=sys.executable, env=env)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    results = {r["name"]: r for r in json.loads(out.stdout)["results"]}
    assert results["matched"]["verdict"] == "parity", results["matched"]["first_divergence"]
    r = results["matched-llama3-rope"]
    assert r["verdict"] == "drift" and r["first_divergence"]["stage"] == "layer_output", r["first_divergence"]
    assert r["serving"]["positions"] == [*range(6), *range(2047, 2052), *range(8191, 8196)]
    assert "raised by vllm 0.34.0's config classes from the declared 2048" in r["serving"]["draft_positions"]
    logits = next(s for s in r["stages"] if s["stage"] == "logits")
    groups = {g["group"]: g for g in logits["groups"]}
    assert groups[WITHIN]["ok"] and groups[WITHIN]["max_abs"] <= FP32.logits_atol, groups[WITHIN]
    past = [g for name, g in groups.items() if name.startswith("past")]
    assert len(past) == 2 and all(not g["ok"] and g["max_abs"] > 10 * FP32.logits_atol for g in past), past
    assert EDIT[1] not in (original / LLAMA3_ROPE).read_text()  # the installed release untouched


@pytest.mark.slow
def test_before_0_33_the_draft_rope_table_ends_at_its_declared_positions():
    """vLLM 0.22's config classes serve the target's context and never raise the draft's
    max_position_embeddings (0.33's SpeculativeConfig does): the draft's rope table holds its 512
    declared positions, and a row past them has no entry. UNSERVABLE there, and the report says
    why; --short-positions compares the rest of it (PARITY)."""
    if not built("vllm", "0.22.0"):
        pytest.skip("vllm 0.22.0's environment is not built (./dev setup vllm-0.22.0)")
    args = ("forward", "--engine", "vllm", "--vllm", "0.22.0", "--fixture", "llama-8l", "--steps", "1", "--json")
    out = run_parity(*args)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    (r,) = json.loads(out.stdout)["results"]
    assert r["verdict"] == "unservable", r
    assert "max_position_embeddings 512 (as declared), rope table 512 rows" in r["error"], r["error"]
    assert "position 515 is past the draft's rope table" in r["error"], r["error"]
    short = run_parity(*args, "--short-positions")
    assert short.returncode == 0, short.stdout[-3000:] + short.stderr[-2000:]
    assert json.loads(short.stdout)["results"][0]["verdict"] == "parity"


@pytest.mark.slow
def test_a_yarn_draft_shorter_than_the_targets_context_caps_what_vllm_serves(tmp_path):
    """A draft with yarn rope (4096 positions, scaled from 2048) on a 131072-position target: yarn is
    not a rope type vLLM 0.34 raises (its table is sized from the original positions), so its
    VllmConfig lowers the served context to the draft's 4096 instead: the rows past 4096 are never
    served, UNSERVABLE naming the context."""
    from parity.fixtures import DraftRecipe, speculators_draft
    from parity.forward.cases import fixture_target

    layer = {"max_position_embeddings": 4096, "rope_parameters": {
        "rope_type": "yarn", "rope_theta": 10000.0, "factor": 2.0, "original_max_position_embeddings": 2048}}
    draft = speculators_draft(DraftRecipe(ids=(2, 4, 5), hidden_size=64, target_vocab=256, draft_vocab=64,
                                          layer=layer))
    target = tmp_path / "config.json"
    target.write_text(json.dumps(fixture_target("llama-8l")))
    out = run_parity("forward", "--engine", "vllm", "--vllm", "0.34.0", "--target-config", str(target),
                     "--draft", str(draft), "--steps", "1", "--json")
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    (r,) = json.loads(out.stdout)["results"]
    assert r["verdict"] == "unservable", r
    assert r["error"].startswith("serving: vllm 0.34.0 serves a context of 4096 positions with this draft"), r["error"]
    assert "position 4099 is never served" in r["error"], r["error"]
