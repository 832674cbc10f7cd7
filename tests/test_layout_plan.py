"""The parallel layout, without an engine: which ranks parity runs for a resolved layout
(parity.extract.layout.plan: tensor parallel over 2 ranks, every pipeline stage, at most 4
processes; what it does not run is its limit, never a pass), and how the report says it (the
layout line, each stage's layers and capture, and 'Not checked'). The engines' own resolution
and the multi-process capture are in tests/test_parallel_layout.py (slow)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from parity.contract import LaunchContract, ParallelLayout
from parity.extract import layout
from parity.report.check import layout_lines

NAMES = {"tp": "tp_size", "pp": "pp_size", "dp": "dp_size", "attention_dp": "attn_dp_size", "ep": "ep_size"}


@pytest.mark.parametrize("degrees, ranks, stands_for, not_run", [
    ({"tp": 2}, (2, 1), (), ()),
    ({"pp": 2}, (1, 2), (), ()),
    ({"pp": 4}, (1, 4), (), ()),
    ({"tp": 8, "pp": 2}, (2, 2), ("tp_size 8 run as 2 ranks",), ("tp_size 8 itself",)),
    ({"tp": 4}, (2, 1), ("tp_size 4 run as 2 ranks",), ("tp_size 4 itself",)),
    ({"dp": 2}, (1, 1), (), ("dp_size 2: 2 data-parallel replicas",)),
])
def test_the_ranks_run_for_a_layout(degrees, ranks, stands_for, not_run):
    plan = layout.plan(degrees, NAMES)
    assert (plan.tp, plan.pp) == ranks
    assert len(plan.stands_for) == len(stands_for) and all(
        said.startswith(start) for said, start in zip(plan.stands_for, stands_for))
    assert len(plan.not_run) == len(not_run) and all(
        said.startswith(start) for said, start in zip(plan.not_run, not_run))


def test_one_rank_runs_in_the_probes_own_process():
    assert layout.plan({"tp": 1, "pp": 1, "dp": 1, "attention_dp": 1, "ep": 1}, NAMES) is None


@pytest.mark.parametrize("degrees, unrun, words", [
    ({"tp": 2, "attention_dp": 2}, None, "does not run data-parallel attention (attn_dp_size 2)"),
    ({"tp": 2, "ep": 2}, None, "does not run expert parallelism (ep_size 2)"),
    ({"tp": 2}, {"attn_cp_size": 2}, "does not run attn_cp_size 2"),
    ({"tp": 3}, None, "runs tp_size 3 over 2 ranks only for an even degree"),
    ({"tp": 2, "pp": 4}, None, "runs at most 4 processes, and pp_size 4 with tp_size 2 (run as 2) needs 8"),
    ({"pp": 8}, None, "runs at most 4 processes, and pp_size 8 with tp_size 1 (run as 1) needs 8"),
])
def test_a_layout_parity_does_not_run_is_its_limit(degrees, unrun, words):
    with pytest.raises(layout.NotRunnable) as refused:
        layout.plan(degrees, NAMES, unrun)
    assert words in str(refused.value)


def _serving(said: ParallelLayout) -> SimpleNamespace:
    launch = LaunchContract(argv=("--pp-size", "2"), requested={}, effective={}, layout=said)
    return SimpleNamespace(engine="sglang", provenance=SimpleNamespace(version="0.5.23"), launch=launch)


def test_the_report_says_the_layout_and_each_stage():
    said = ParallelLayout(fields={"tp_size": 1, "pp_size": 2, "enable_dp_attention": False}, pp=2, run={
        "ranks": 2, "tp": 1, "pp": 2, "stages": [{"stage": 0, "layers": (0, 16), "capture": ()},
                                                  {"stage": 1, "layers": (16, 32), "capture": (2, 16, 29)}]})
    assert layout_lines(_serving(said)) == [
        "", "  parallel layout, as sglang 0.5.23 resolves it: pp 2 (pp_size 2); the capture ran under it on 2 CPU "
            "processes, one per rank (tp 1 x pp 2, torch.distributed over gloo)",
        "", "    stage  layers  captures at (after the start-up set it)",
        "    0      0-15    nothing",
        "    1      16-31   2, 16, 29"]


def test_the_report_says_a_one_rank_layout_ran_in_one_process():
    said = ParallelLayout(fields={"tp_size": 1, "pp_size": 1}, not_run=("dp_size 2: replicas",))
    [_, line] = layout_lines(_serving(said))
    assert line == ("  parallel layout, as sglang 0.5.23 resolves it: one rank: the capture ran in one process, the "
                    "layout's one rank (a replica of it: see Not checked)")


# -- one forked process per rank (layout.run_ranks): no engine, plain functions --------------------

def test_each_rank_runs_its_job_and_hands_back_its_result():
    assert layout.run_ranks(3, lambda rank: rank * 10) == [{"result": 0}, {"result": 10}, {"result": 20}]


def test_a_rank_gone_without_a_result_stops_its_peers_and_nothing_is_left(tmp_path, monkeypatch):
    import os
    import tempfile
    import time

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def job(rank):
        layout.keep({"rank": rank, "kept": True})
        if rank == 1:
            os._exit(5)  # dies with no result: the others would wait on it forever
        time.sleep(300)

    started = time.monotonic()
    out = layout.run_ranks(3, job)
    assert time.monotonic() - started < 60
    assert out[1] == {"lost": "rank 1 ended without a result (exit status 5)", "partial": {"rank": 1, "kept": True}}
    assert out[0]["lost"] == "rank 0 was stopped: rank 1 ended without a result (exit status 5)"
    assert out[2]["partial"] == {"rank": 2, "kept": True}
    assert list(tmp_path.iterdir()) == []  # the results' directory is removed


def test_a_result_its_peers_cannot_go_on_from_stops_them_and_the_time_limit_holds():
    import time

    def stops_early(rank):
        if rank == 0:
            return {"stopped": True}
        time.sleep(300)

    out = layout.run_ranks(2, stops_early, stops=lambda record: bool(record and record.get("stopped")))
    assert out == [{"result": {"stopped": True}},
                   {"lost": "rank 1 was stopped: rank 0 stopped (its own record says why)"}]
    assert layout.run_ranks(2, lambda rank: time.sleep(300), timeout=1) == [
        {"lost": "rank 0 was stopped: no result after 1 s"}, {"lost": "rank 1 was stopped: no result after 1 s"}]


def test_a_ranks_runs_go_on_past_an_engine_error_until_its_peers_would_wait_forever():
    """lockstep: an error setting a capture is recorded and the forward still runs (every rank runs
    every forward); a forward error on a stage before the last ends the rank (`stopped`), one on the
    last does not; with start_refuses, an error at the start-up's own capture ends it (`refused`);
    one building the rank's part is `fatal`."""
    def configure(built, n):
        if n == 1:
            raise ValueError("ids refused")

    def forward_on(last):
        def forward(built):
            if built["n"] == 2:
                raise RuntimeError("stage raised")
            built["n"] += 1
            return "aux" if last else None
        return forward

    on_last = layout.lockstep(4, lambda: {"n": 0}, configure, lambda built: {"is_last": True}, forward_on(True))
    assert [sorted(run) for run in on_last["runs"]] == [["aux", "stage"], ["aux", "configure_error", "stage"],
                                                       ["forward_error", "stage"], ["forward_error", "stage"]]
    assert on_last["runs"][1]["configure_error"]["line"] == "ValueError: ids refused"
    earlier = layout.lockstep(4, lambda: {"n": 0}, configure, lambda built: {"is_last": False}, forward_on(False))
    assert len(earlier["runs"]) == 3 and earlier["stopped"] is True and layout.stops(earlier)

    def refusing(built, n):
        raise ValueError("does not support eagle3 with pipeline parallelism")

    refused = layout.lockstep(3, lambda: None, refusing, lambda built: {"is_last": True}, lambda built: None,
                              start_refuses=True)
    assert len(refused["runs"]) == 1 and refused["refused"] is True and layout.stops(refused)
    fatal = layout.lockstep(3, lambda: 1 / 0, configure, lambda built: {}, lambda built: None)
    assert fatal["fatal"]["type"] == "ZeroDivisionError" and fatal["runs"] == [] and layout.stops(fatal)


def test_not_checked_names_each_part_of_the_layout_not_run_and_the_layout_without_serve_args():
    from parity.report.check import unchecked_lines

    def result(launch):
        serving = SimpleNamespace(engine="sglang", provenance=SimpleNamespace(version="0.5.23"), launch=launch,
                                  draft_kind="eagle3", target_model=SimpleNamespace(quantization=None))
        return SimpleNamespace(serving=serving, training=SimpleNamespace(target_model=SimpleNamespace(quantization=None)))

    said = ParallelLayout(fields={"tp_size": 8, "pp_size": 2}, tp=8, pp=2,
                          not_run=("tp_size 8 itself: the capture ran tensor parallel over 2 ranks, not 8",))
    launch = LaunchContract(argv=("--tp-size", "8"), requested={}, effective={}, layout=said)
    assert unchecked_lines(result(launch)) == [
        "", "  Not checked:", "  - the parallel layout: tp_size 8 itself: the capture ran tensor parallel over 2 ranks, "
                              "not 8"]
    assert unchecked_lines(result(None))[2] == ("  - the launch: no --serve-args, so sglang 0.5.23's steps, draft "
                                                "tokens and parallel layout are unchecked")
