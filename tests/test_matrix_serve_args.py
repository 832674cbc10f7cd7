"""`--serve-args` on `parity matrix` and `parity can-i-deploy`, without running an engine: the
option is read (and refused) before any extraction, a lock's stored arguments are the ones the
cells resolve unless the option replaces them, and each cell's launch result reads in one line.
The engines' own resolution of them is tested in tests/test_launch_matrix.py."""

from __future__ import annotations

import json
import os

import pytest

from parity import cli
from parity.contract import LaunchContract
from parity.contract.models import LaunchFix, LaunchOverride
from parity.extract.engines import engine
from parity.extract.trainers import trainer
from parity.matrix import Matrix, ServingRow
from parity.matrix.build import _inputs
from parity.matrix.changes import mark_changes
from parity.matrix.rows import LaunchCell, PairVerdict
from parity.report.matrix import render_markdown, render_text

from .helpers import ROOT

LOCK = ROOT / "contracts" / "kimi-k2.5-eagle3.json"
GIVEN = ["--target-config", str(ROOT / "fixtures" / "targets" / "kimi-k2.5" / "config.json"),
         "--draft", str(ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3-fixed"), "--dump-layout", "h0,h3,h31,h59"]


@pytest.mark.parametrize("command", [["matrix"], ["can-i-deploy", "--sglang", "0.5.23", "--speculators", "0.9.0"]])
@pytest.mark.parametrize("value, says", [("", "--serve-args: no arguments"),
                                         ("@/nonexistent/serve.args", "--serve-args file /nonexistent/serve.args: "
                                                                      "file not found"),
                                         ("'--speculative-num-steps", "--serve-args: No closing quotation")])
def test_bad_serve_args_are_refused_before_any_extraction(capsys, command, value, says):
    assert cli.main([*command, *GIVEN, "--serve-args", value]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"parity: {says}") and err.count("\n") == 1, err


def _lock_with(tmp_path, serve_args):
    lock = json.loads(LOCK.read_text())
    for key in ("target_config", "draft"):
        lock[key] = os.path.relpath((LOCK.parent / lock[key]).resolve(), tmp_path)
    if serve_args is not None:
        lock["serve_args"] = serve_args
    path = tmp_path / "lock.json"
    path.write_text(json.dumps(lock))
    return path


def test_a_lock_gives_its_serve_args_unless_the_option_replaces_them(tmp_path):
    stored = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3"]
    lock = _lock_with(tmp_path, stored)
    bound = lambda serve_args: _inputs(None, None, None, lock, trainer(), None, engine(), serve_args)  # noqa: E731
    assert bound(None).serve_args == tuple(stored)
    assert bound(("--speculative-num-steps", "5")).serve_args == ("--speculative-num-steps", "5")
    assert bound(("--speculative-num-steps", "5")).locked_launch is None  # other arguments: not the lock's resolution
    plain = _inputs(None, None, None, _lock_with(tmp_path, None), trainer(), None, engine(), None)
    assert plain.serve_args is None and plain.locked_launch is None


SEED = ("--speculative-num-steps", "1", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "16")
FIXED = ("--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "16", "--speculative-num-steps", "15")


def _drift() -> LaunchCell:
    return LaunchCell(resolved=LaunchContract(
        argv=SEED, requested={"speculative_num_draft_tokens": 16}, effective={"speculative_num_draft_tokens": 2},
        overrides=(LaunchOverride(field="speculative_num_draft_tokens", requested=16, effective=2,
                                  by="_handle_eagle_family"),),
        fixes=(LaunchFix(argv=FIXED, effective={"speculative_num_draft_tokens": 16}),), algorithm_is_eagle3=True))


def test_a_launch_cell_has_one_outcome():
    with pytest.raises(ValueError, match="exactly one"):
        LaunchCell(refused="no", unresolved="no")
    with pytest.raises(ValueError, match="exactly one"):
        LaunchCell()
    with pytest.raises(ValueError, match="only resolved"):
        LaunchCell(refused="no", lock_moved=["launch x: the lock resolved 1, ..."])


def test_each_cell_reads_in_one_launch_line_with_the_fix_under_a_drift():
    refused = "--serve-args: sglang 0.5.21's argument parser refused them: unrecognized arguments: --enable-watermark"
    m = Matrix(target="KimiK25ForConditionalGeneration", num_layers=61, draft="d", dump_layout=["h0", "h3"],
               contract=None, serve_args=list(SEED), training=[],
               serving=[ServingRow(version="0.5.21", launch=LaunchCell(refused=refused)),
                        ServingRow(version="0.5.22", fc_input=["h0"], requested_ids=[0], launch=_drift(),
                                   verdicts=[PairVerdict(against="lock", verdict="drift", differences=["launch ..."])])])
    text = render_text(m)
    assert f"  0.5.21           launch REFUSED: {refused}" in text
    assert ("      launch: DRIFT: speculative_num_draft_tokens 16 -> 2 (by _handle_eagle_family)\n"
            "          fix: serve with --speculative-eagle-topk 1 --speculative-num-draft-tokens 16 "
            "--speculative-num-steps 15 (verified on this release)") in text
    assert "serve command: --speculative-num-steps 1 " in text and "see launch" in text
    assert not m.ok and not m.serve_args_refused
    md = render_markdown(m)
    assert "| fix | launch | changed |" in md and "❌ REFUSED: --serve-args" in md
    mark_changes([], m.serving)  # refused, then resolved: only the launch cell changed
    assert m.serving[1].changed == ["launch refused -> DRIFT: speculative_num_draft_tokens 16 -> 2 "
                                    "(by _handle_eagle_family)"]
    alone = m.model_copy(update={"serving": m.serving[:1]})
    assert alone.serve_args_refused  # no release resolved them: the CLI's exit 2
    assert LaunchCell(unresolved="no resolver").text() == "NOT RESOLVED: no resolver"
