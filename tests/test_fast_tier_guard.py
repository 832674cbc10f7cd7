"""The fast tier's guard (tests/conftest.py `_the_fast_tier_runs_no_engine`) sees an engine that
a `parity` command started by a fast test ran: every such command inherits the test's run log."""

from __future__ import annotations

import os

from parity import runlog

from .conftest import engines_run


def test_a_fast_test_s_commands_write_to_a_run_log_the_guard_reads():
    assert os.environ.get(runlog.ENV), "the fast tier's guard set no run log for this test"


def test_the_guard_counts_an_engine_answered_and_not_one_stopped_before_it_answered(tmp_path, monkeypatch):
    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv(runlog.ENV, str(log))
    runlog.record({"module": "parity.extract.engines.sglang.probe", "status": "raised"})  # a Ctrl-C test's
    runlog.record({"module": "tests.reply_echo", "status": "uncached"})  # a test double
    assert engines_run(log) == []
    runlog.record({"module": "parity.extract.engines.vllm.probe", "status": "hit"})  # from the cache: counted
    assert engines_run(log) == ["parity.extract.engines.vllm.probe"]
