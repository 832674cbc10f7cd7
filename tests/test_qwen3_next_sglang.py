"""A Qwen3-Next target (hybrid gated-delta-net linear attention and full attention,
`Qwen3NextForCausalLM`) on SGLang 0.5.23: a real verdict on parity's CPU run, through the stand-ins
for the GDN kernels' bodies (gdn_standin.py) and the shared-expert gate (shared_gate_standin.py),
every captured state identified against transformers' own Qwen3-Next; an injected fault in a
stand-in is caught by that identification; without the stand-ins it is a limit of parity's CPU
run (exit 2), never a verdict.

The target is the bundled published config (fixtures/targets/qwen3-next-80b-a3b) at depth 8 (its
layer pattern: three GDN layers, then full attention), the draft the bundled EAGLE-3 draft for it
with ids [1, 3, 5] (h2, h4, h6; loss target h8)."""

from __future__ import annotations

import json

import pytest

from .helpers import TARGETS, ROOT, drift_overrides, run_parity

pytestmark = pytest.mark.slow

FIXTURE = TARGETS / "qwen3-next-80b-a3b" / "config.json"
DRAFT = ROOT / "fixtures" / "drafts" / "qwen3-next-80b-a3b-eagle3" / "config.json"


@pytest.fixture()
def case(tmp_path):
    target = json.loads(FIXTURE.read_text())
    target["num_hidden_layers"] = 8
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "config.json").write_text(json.dumps(target))
    draft = json.loads(DRAFT.read_text())
    draft["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [1, 3, 5]
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "config.json").write_text(json.dumps(draft))
    return str(tmp_path / "t" / "config.json"), str(tmp_path / "d")


def _check(case, layout, overrides=None):
    target, draft = case
    return run_parity("check", "--target-config", target, "--draft", draft, "--dump-layout", layout, "--json",
                      overrides=overrides)


def test_the_right_layout_is_parity_and_a_wrong_one_drift(case):
    ok = _check(case, "h2,h4,h6,h8")
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-3000:]
    assert json.loads(ok.stdout)["verdict"] == "parity"
    wrong = _check(case, "h0,h2,h4,h6")
    assert wrong.returncode == 1, wrong.stdout[-3000:] + wrong.stderr[-3000:]
    assert json.loads(wrong.stdout)["verdict"] == "drift"


def _serving_errors(case, drift):
    target, draft = case
    proc = run_parity("contract", "serving", "--target-config", target, "--draft", draft, "--json",
                      overrides=drift_overrides(drift))
    return proc, proc.stdout and [f["kind"] for f in json.loads(proc.stdout)["findings"] if f["severity"] == "error"]


@pytest.mark.parametrize("drift", ["tests.drift.serving_gdn_wrong_decay", "tests.drift.serving_gdn_ungated_norm"])
def test_a_fault_in_a_stand_in_leaves_the_captured_states_unidentified(case, drift):
    proc, kinds = _serving_errors(case, drift)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "unidentified_state" in kinds, kinds


def test_without_the_stand_ins_the_triton_kernels_are_a_limit_of_the_cpu_run(case):
    target, draft = case
    proc = run_parity("check", "--target-config", target, "--draft", draft, "--dump-layout", "h2,h4,h6,h8",
                      overrides=drift_overrides("tests.drift.serving_no_gdn_standin"))
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "fused_qkvzba_split_reshape_cat" in proc.stderr and "limit of parity's CPU run" in proc.stderr, proc.stderr
