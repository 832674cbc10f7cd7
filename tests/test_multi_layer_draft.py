"""Multi-layer EAGLE-3 drafts (issue 37 item 3): a draft with more than one decoder layer, built
by each side's own code. Its capture and fc are an EAGLE-3 draft's; what differs is how each layer
after the first is fed (docs/built-draft.md, "Multi-layer drafts"): SGLang 0.5.23 normalises that
layer's input with the layer's `hidden_norm`, vLLM 0.34 and speculators with its `input_layernorm`,
so a draft trained by speculators and served by SGLang runs layer 1 with a norm training never set.
Found on one forward of each side's built draft, by value; an edit of each engine's installed
wiring, in a copy of its environment, is followed."""

from __future__ import annotations

import json
import os
import sys

import pytest

from .helpers import LLAMA, ROOT, edit_in_shadow, run_parity as parity, shadow_env, shadow_release
from .test_built_draft_cases import LAYOUT, SITE

pytestmark = pytest.mark.slow

TWO_LAYER = ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3-2layer"
ONE_LAYER = ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3"
VLLM = ("--engine", "vllm", "--vllm", "0.34.0")

# SGLang 0.5.23's layers after the first fuse the residual add into hidden_norm; vLLM 0.34's into input_layernorm.
SGLANG_EAGLE3 = f"{SITE}/sglang/srt/models/llama_eagle3.py"
SGLANG_WIRING = "hidden_states, residual = self.hidden_norm(hidden_states, residual)"
VLLM_EAGLE3 = f"{SITE}/vllm/model_executor/models/llama_eagle3.py"
VLLM_WIRING = "hidden_states, residual = self.input_layernorm(hidden_states, residual)"


def _check(draft, *args, python: str = sys.executable, env: dict | None = None):
    layout = () if "specforge" in args else LAYOUT  # SpecForge captures the states itself
    proc = parity("check", "--target-config", str(LLAMA), "--draft", str(draft), *layout, "--json", "--no-verify",
                  *args, python=python, env=env)
    return proc, (json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else None)


def _wiring(result: dict, side: str) -> tuple:
    d = result[side]["draft"]
    return d["num_hidden_layers"], d.get("layers_built"), tuple(d.get("later_layer_input_norms") or ())


@pytest.mark.parametrize("trainer", [(), ("--speculators", "0.8.1")], ids=["speculators-0.9.0", "speculators-0.8.1"])
def test_sglang_feeds_a_second_layer_through_another_norm_than_training(trainer):
    proc, result = _check(TWO_LAYER, *trainer)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert _wiring(result, "training") == (2, 2, ("input_layernorm",))
    assert _wiring(result, "serving") == (2, 2, ("hidden_norm",))
    assert [d["field"] for d in result["diff"]["fields"]] == ["draft.later_layer_input_norms"]
    assert result.get("draft_fix") is None  # no config key changes the draft class's wiring
    assert [s["verdict"] for s in result["diff"]["slots"]] == ["match"] * 3  # the same capture and fc
    text = parity("check", "--target-config", str(LLAMA), "--draft", str(TWO_LAYER), *LAYOUT, "--no-verify",
                  *trainer).stdout
    assert "DRIFT: sglang 0.5.23 builds the draft otherwise than training did." in text
    row = next(line for line in text.splitlines() if line.strip().startswith("later_layer_input_norms"))
    assert '["input_layernorm"]' in row and '["hidden_norm"]' in row and "MISMATCH" in row, text


def test_a_one_layer_draft_has_no_later_layer_on_either_engine():
    for engine in ((), VLLM):
        proc, result = _check(ONE_LAYER, *engine)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        assert _wiring(result, "training") == _wiring(result, "serving") == (1, 1, ())
        assert not result["diff"]["fields"]


def test_vllm_feeds_a_second_layer_as_training_does():
    proc, result = _check(TWO_LAYER, *VLLM)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert _wiring(result, "training") == _wiring(result, "serving") == (2, 2, ("input_layernorm",))
    assert result["serving"]["draft"]["built_by"] == "vllm 0.34.0 Eagle3LlamaForCausalLM"


def test_an_edit_of_sglang_s_multi_layer_wiring_is_followed(tmp_path):
    """SGLang's installed llama_eagle3.py edited so its later layers use input_layernorm (vLLM's
    wiring): its contract follows, and the drift above is gone."""
    original = ROOT / ".venv"  # SGLang 0.5.23 is the main environment's: parity runs under the copy's interpreter
    shadow = shadow_env(original, tmp_path / "shadow", {SGLANG_EAGLE3: (SGLANG_WIRING, SGLANG_WIRING)})
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PARITY_HOME=str(tmp_path / "home"), PYTHONPYCACHEPREFIX=str(shadow / ".pycache"))
    edit_in_shadow(shadow, SGLANG_EAGLE3, SGLANG_WIRING,
                   "hidden_states, residual = self.input_layernorm(hidden_states, residual)  # the edit")
    proc, result = _check(TWO_LAYER, python=str(shadow / "bin" / "python"), env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert _wiring(result, "serving") == (2, 2, ("input_layernorm",))
    assert "# the edit" not in (original / SGLANG_EAGLE3).read_text()  # untouched


def test_an_edit_of_vllm_s_multi_layer_wiring_is_a_drift_naming_the_release(tmp_path):
    """vLLM 0.34's installed llama_eagle3.py edited so its later layers use hidden_norm (SGLang's
    wiring): DRIFT, exit 1, naming the field and the release."""
    shadow, original, env = shadow_release(tmp_path, "vllm", "0.34.0", {VLLM_EAGLE3: (VLLM_WIRING, VLLM_WIRING)})
    edit_in_shadow(shadow, VLLM_EAGLE3, VLLM_WIRING,
                   "hidden_states, residual = self.hidden_norm(hidden_states, residual)  # the edit")
    proc, result = _check(TWO_LAYER, *VLLM, env=env)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert _wiring(result, "serving") == (2, 2, ("hidden_norm",))
    assert [d["field"] for d in result["diff"]["fields"]] == ["draft.later_layer_input_norms"]
    text = parity("check", "--target-config", str(LLAMA), "--draft", str(TWO_LAYER), *LAYOUT, "--no-verify", *VLLM,
                  env=env).stdout
    assert "DRIFT: vllm 0.34.0 builds the draft otherwise than training did." in text, text
    assert "# the edit" not in (original / VLLM_EAGLE3).read_text()  # untouched


@pytest.mark.parametrize("engine", [(), VLLM], ids=["sglang-0.5.23", "vllm-0.34.0"])
def test_the_forward_shows_the_second_layer_s_norm_in_the_logits(engine):
    """`parity forward` on a seeded two-layer speculators draft (its layer 1's input_layernorm
    trained, off ones): both engines feed the draft the same fc output and embeddings; SGLang's
    layer 1, normalising with its hidden_norm (unfilled: ones), moves the layer output and the
    logits far past the tolerances (measured: 0.227 and 0.046); vLLM's matches training."""
    from parity.fixtures import DraftRecipe, speculators_draft

    draft = speculators_draft(DraftRecipe(ids=(2, 4, 6), layer={"num_hidden_layers": 2}))
    proc = parity("forward", "--target-config", str(LLAMA), "--draft", str(draft), "--dump-layout", "h2,h4,h6,h32",
                  "--short-positions", "--steps", "1", "--json", *engine)
    result = json.loads(proc.stdout)["results"][0]
    stages = {s["stage"]: s for s in result["stages"] if s["step"] == 0}
    assert stages["fc_output"]["ok"] and stages["embeddings"]["ok"], stages
    if engine:  # vLLM: the same math
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        assert stages["layer_output"]["max_abs"] < 1e-4 and stages["logits"]["max_abs"] < 1e-4, stages
    else:
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
        assert (result["first_divergence"]["step"], result["first_divergence"]["stage"]) == (0, "layer_output")
        assert stages["layer_output"]["max_abs"] > 0.1 and stages["logits"]["max_abs"] > 0.01, stages


def test_specforge_trains_one_layer_of_a_two_layer_draft():
    """SpecForge 0.2.0's Llama EAGLE-3 draft class builds one decoder layer (`midlayer`) whatever
    the config's num_hidden_layers (its config reader holds 2): served by SGLang with two, a DRIFT
    on the layers built, which the config's num_hidden_layers alone never showed."""
    proc, result = _check(TWO_LAYER, "--trainer", "specforge", "--specforge", "0.2.0")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert _wiring(result, "training") == (2, 1, ())
    assert _wiring(result, "serving") == (2, 2, ("hidden_norm",))
    assert [d["field"] for d in result["diff"]["fields"]] == ["draft.layers_built", "draft.later_layer_input_norms"]
