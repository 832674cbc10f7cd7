"""Replay: a draft trained by speculators on CPU, scored on held-out dumps under each wiring.

The committed fixture (fixtures/replay, built by `python -m parity.replay.fixture`) is the
born-from case in miniature: dump [h0, h2, h5, h7] of an 8-layer target, speculators trains
the fc on [h0, h2, h5], the draft config says ids [1, 4, 6], and SGLang serving those ids
as written feeds [h2, h5, h7]. Every run here is the real speculators and SGLang code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

from parity import cli
from parity.contract import parse_taps
from parity.replay import wiring
from parity.report.replay import render_replay
from parity.replay.result import WiringScore
from parity.replay.run import replay

from .helpers import ROOT

# one worker runs the module (./dev test: --dist loadgroup): `as_written`'s replay once per run
# (the README's replay command asks the same, a reply cache hit)
pytestmark = pytest.mark.xdist_group("test_replay")

FIXTURE = ROOT / "fixtures" / "replay"
DRAFT, DATA, TARGET = FIXTURE / "draft", FIXTURE / "data", FIXTURE / "target"
LAYOUT = parse_taps("h0,h2,h5,h7")
TRAINED = ("h0", "h2", "h5")
SERVED_AS_WRITTEN = ("h2", "h5", "h7")


@pytest.fixture(scope="session")  # one worker runs this file: made once (a module fixture is made
def as_written():                  # again each time the worker comes back to the file after another)
    """Search + the draft served as written (its own ids in SGLang's config)."""
    return replay(DRAFT, DATA, dump_layout=LAYOUT)


# -- the measurement ---------------------------------------------------------------------------


@pytest.mark.slow
def test_search_recovers_the_training_wiring(as_written):
    r = as_written
    assert r.search == "exhaustive" and len(r.scores) == 24  # 4 * 3 * 2 ordered choices
    assert r.training == TRAINED
    assert r.best.taps == TRAINED and "training" in r.best.roles
    runner_up = r.scores[1]
    assert (r.best.step0 - runner_up.step0) * 100 > 5, (r.best, runner_up)
    assert r.best.step0 > 0.75  # the trained draft is good on its own wiring
    assert r.best.positions == 32 * 63  # every sample, shift_batch drops one position each


@pytest.mark.slow
def test_served_as_written_loses_over_30_points(as_written):
    r = as_written
    assert r.served == SERVED_AS_WRITTEN and r.sglang_version == "0.5.23"
    served = r.score_of(r.served)
    assert served is not None and served.roles == ("served",)
    loss = (r.trained.step0 - served.step0) * 100
    assert loss > 30, f"served wiring loses only {loss:.1f} points"
    assert served.accept_length < r.trained.accept_length - 1
    assert r.verdict == "drift"


@pytest.mark.slow
def test_report_names_the_wiring_and_the_cost(as_written):
    text = render_replay(as_written)
    assert "most likely [h0, h2, h5]" in text
    assert "The served wiring [h2, h5, h7]" in text and "points below the trained wiring" in text
    assert "Accept length = 1 + sum over steps of full_acc_k" in text
    assert text.rstrip().splitlines()[-1].startswith("verdict: drift")
    as_json = json.loads(json.dumps(as_written.to_json_dict()))
    assert as_json["scores"][0]["accept_length"] == pytest.approx(1 + sum(as_json["scores"][0]["full_acc"]))


@pytest.mark.slow
def test_correct_serving_loses_nothing(tmp_path, capsys):
    """The gate's export (ids solved on SGLang) served: the same wiring, the same numbers."""
    served = tmp_path / "served"
    rc = cli.main(["export", str(DRAFT), str(served), "--target-config", str(TARGET / "config.json"),
                   "--dump-layout", "h0,h2,h5,h7"])
    assert rc == 0, capsys.readouterr()
    capsys.readouterr()
    rc = cli.main(["replay", "--draft", str(DRAFT), "--data", str(DATA), "--dump-layout", "h0,h2,h5,h7",
                   "--served", str(served), "--no-search", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["verdict"] == "parity"
    assert tuple(out["served"]) == TRAINED
    [only] = out["scores"]
    assert set(only["roles"]) == {"training", "served"}


@pytest.mark.slow
def test_a_served_wiring_the_engine_cannot_capture_is_drift_not_a_pass(tmp_path):
    """Ids [1, 4, 7] on an 8-layer target: SGLang never reaches capture index 8, so it feeds
    two states to a three-state fc. Replay cannot score that, and says drift."""
    from parity.extract.engines.sglang import served_config

    served = tmp_path / "served"
    served.mkdir()
    spec = json.loads((DRAFT / "config.json").read_text())
    (served / "config.json").write_text(json.dumps(served_config(spec, [1, 4, 7])))
    r = replay(DRAFT, DATA, dump_layout=LAYOUT, served=served, search=False)
    assert r.served == ("h2", "h5", None) and r.verdict == "drift"
    assert "captures no state for fc slot(s) [2]" in r.served_unscored
    assert "cannot be scored" in render_replay(r)


@pytest.mark.slow
def test_a_training_contract_the_weights_disagree_with_is_suspect(inject_drift):
    """Injected drift in the training data path (fc from slot 1 on): the contract now says the
    draft trains on [h2, h5, h7]; the draft's own weights say [h0, h2, h5]."""
    inject_drift("tests.drift.training_slice_from_one")
    r = replay(DRAFT, DATA, dump_layout=LAYOUT, serving=False)
    assert r.training == SERVED_AS_WRITTEN
    assert r.best.taps == TRAINED
    assert r.verdict == "suspect"
    assert "not what the weights say" in render_replay(r)


@pytest.mark.slow
def test_large_dumps_search_subsets_then_every_order_of_the_best(monkeypatch):
    monkeypatch.setattr(wiring, "SEARCH_LIMIT", 10)  # 24 ordered choices > 10: two-stage search
    r = replay(DRAFT, DATA, dump_layout=LAYOUT, serving=False, samples=8)
    assert r.search == "subsets+reorder"
    assert r.best.taps == TRAINED and r.verdict == "parity"
    assert len(r.scores) < 24 and r.samples == 8


# -- bad input: one line, exit 2 ---------------------------------------------------------------


def _no_dumps(tmp):
    shutil.copytree(DATA, tmp / "data", ignore=shutil.ignore_patterns("hidden_states"))
    return ["--data", str(tmp / "data")]


def _narrow_dumps(tmp):
    """The same samples dumped with 3 states per token: the data path feeds the fc 2."""
    shutil.copytree(DATA, tmp / "data")
    for f in (tmp / "data" / "hidden_states").glob("hs_*.safetensors"):
        t = load_file(f)
        save_file({"hidden_states": t["hidden_states"][:, 1:].contiguous(), "token_ids": t["token_ids"]}, f)
    return ["--data", str(tmp / "data"), "--dump-layout", "h2,h5,h7"]


def _unknown_verifier(tmp):
    shutil.copytree(DRAFT, tmp / "draft")  # its verifier "target" is no longer next to it
    return ["--draft", str(tmp / "draft")]


BAD = {
    "not a speculators draft": (lambda tmp: ["--draft", str(ROOT / "fixtures/drafts/kimi-k2.5-eagle3")],
                                "not a speculators draft"),
    "missing draft": (lambda tmp: ["--draft", str(tmp / "nowhere")], "not a directory"),
    "missing dumps": (_no_dumps, "the hidden-state dumps are missing"),
    "dump width": (_narrow_dumps, "the draft's fc takes 3"),
    "layout length": (lambda tmp: ["--dump-layout", "h0,h2,h5"], "the dumps hold 4 states per token"),
    "wiring not dumped": (lambda tmp: ["--wiring", "h1,h2,h5"], "the dump holds only"),
    "unknown verifier": (_unknown_verifier, "pass --verifier DIR"),
    "bad tap": (lambda tmp: ["--wiring", "h0,layer2,h5"], "--wiring"),
    "zero steps": (lambda tmp: ["--steps", "0"], "must be 1..16"),
}


AFTER_A_PROBE = ("dump width", "wiring not dumped")  # refused after the speculators probe ran


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in AFTER_A_PROBE else c
                                  for c in sorted(BAD)])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, case):
    make, expected = BAD[case]
    base = {"--draft": str(DRAFT), "--data": str(DATA), "--dump-layout": "h0,h2,h5,h7"}
    extra = make(tmp_path)
    for key, value in zip(extra[::2], extra[1::2]):
        base[key] = value
    argv = ["replay", "--no-serving"] + [x for kv in base.items() for x in kv]
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("parity: ") and expected in lines[0], err
    assert "Traceback" not in out + err


# -- the pieces --------------------------------------------------------------------------------


def test_accept_length_is_one_plus_the_chain_accuracies():
    s = WiringScore(taps=("h0",), slots=(0,), roles=("training",), full_acc=(0.8, 0.6, 0.5),
                    cond_acc=(0.8, 0.75, 0.83), positions=10)
    assert s.accept_length == pytest.approx(2.9)
    with pytest.raises(ValueError):
        WiringScore(taps=("h0", "h2"), slots=(0,), roles=("search",), full_acc=(0.5,), cond_acc=(0.5,),
                    positions=1)


def test_search_space_and_reorderings():
    assert len(wiring.search_space(4, 3)) == 24
    big = wiring.search_space(9, 3)  # 504 ordered > SEARCH_LIMIT: ascending subsets only
    assert len(big) == 84 and all(list(c) == sorted(c) for c in big)
    assert wiring.search_space(2, 3) == []
    again = wiring.reorderings([(0, 1, 2), (0, 1, 3)])
    assert len(again) == 12 and (2, 1, 0) in again
    assert wiring.slots_of(parse_taps("h5,h0"), LAYOUT) == (2, 0)
    assert wiring.slots_of(parse_taps("h1"), LAYOUT) is None
    assert wiring.slots_of([None], LAYOUT) is None


@pytest.mark.slow
def test_the_fixture_rebuilds_from_its_seeds(tmp_path):
    """`python -m parity.replay.fixture` from seeds reproduces the committed fixture.

    On one machine the rebuild is byte-identical. Across CPUs the float kernels round
    differently in the last bits, and 150 target steps and 6 draft epochs amplify that (a
    clean rebuild on another x86 machine: target weights 2e-4, bf16 dumps 5e-3 relative,
    draft validation accuracy within 1.3 points). So: every non-tensor file (the arrow data,
    configs, token frequencies) byte for byte; every integer tensor exactly; the target
    and the dumps within 2e-2 of their largest value; the draft's metrics within 3 points."""
    proc = subprocess.run([sys.executable, "-m", "parity.replay.fixture", str(tmp_path / "rebuilt")],
                          capture_output=True, text=True, cwd=ROOT, timeout=900,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    committed = json.loads((FIXTURE / "BUILD.json").read_text())
    rebuilt = json.loads((tmp_path / "rebuilt" / "BUILD.json").read_text())
    from parity.replay.fixture import file_hashes

    assert file_hashes(FIXTURE) == committed["files"], "the committed fixture differs from its BUILD.json"
    assert rebuilt["files"].keys() == committed["files"].keys()
    differ = sorted(k for k in committed["files"] if committed["files"][k] != rebuilt["files"][k])
    assert all(k.endswith(".safetensors") for k in differ), f"non-tensor files differ: {differ}"
    for rel in differ:
        old, new = load_file(str(FIXTURE / rel)), load_file(str(tmp_path / "rebuilt" / rel))
        assert old.keys() == new.keys(), rel
        for name, x in old.items():
            y = new[name]
            assert x.shape == y.shape and x.dtype == y.dtype, (rel, name)
            if not x.is_floating_point():
                assert torch.equal(x, y), (rel, name)
            elif not rel.startswith("draft/"):
                rel_err = ((x.float() - y.float()).abs().max() / x.float().abs().max().clamp_min(1e-12)).item()
                assert rel_err < 2e-2, f"{rel} {name}: relative difference {rel_err:.2e}"
    old_metrics, new_metrics = (b["draft_training"]["val_metrics"] for b in (committed, rebuilt))
    assert old_metrics.keys() == new_metrics.keys()  # the same epochs
    for epoch, metrics in old_metrics.items():
        for key, value in metrics.items():
            if "acc" in key:
                assert abs(new_metrics[epoch][key] - value) < 0.03, (epoch, key, value, new_metrics[epoch][key])
