"""`pytest -m parity` through the plugin: one item per locked contract, the slot table on failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .helpers import ROOT

pytestmark = pytest.mark.slow


def lock_pointing_at(tmp_path, draft: str) -> None:
    """A copy of the bundled Kimi-K2.5 lock, served from another draft directory."""
    lock = json.loads((ROOT / "contracts" / "kimi-k2.5-eagle3.json").read_text())
    lock["target_config"] = os.path.relpath(ROOT / "fixtures/targets/kimi-k2.5/config.json", tmp_path)
    lock["draft"] = os.path.relpath(ROOT / "fixtures/drafts" / draft, tmp_path)
    (tmp_path / f"{draft}.json").write_text(json.dumps(lock))


def run_pytest(tmp_path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-m", "parity", "-p", "no:cacheprovider",
                           "--parity-contracts", str(tmp_path), "--parity-no-verify",
                           "--rootdir", str(tmp_path), str(tmp_path), *args],
                          capture_output=True, text=True, cwd=tmp_path)


def test_a_drifting_lock_fails_with_the_slot_table_and_a_fixed_one_passes(tmp_path):
    lock_pointing_at(tmp_path, "kimi-k2.5-eagle3")  # served ids [2, 30, 58]: drift
    lock_pointing_at(tmp_path, "kimi-k2.5-eagle3-fixed")  # served ids [0, 3, 31]: parity
    proc = run_pytest(tmp_path, "-n", "2")
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:]
    assert "1 failed, 1 passed" in out
    assert "MISMATCH: embedding output vs decoder-layer output" in out
    assert "FIX: write" in out
    assert "Traceback" not in out


def test_ad_hoc_options_run_one_check(tmp_path):
    proc = run_pytest(tmp_path, "--parity-target", str(ROOT / "fixtures/targets/deepseek-v3-61l/config.json"),
                      "--parity-draft", str(ROOT / "fixtures/drafts/kimi-k2.5-eagle3-fixed"),
                      "--parity-dump-layout", "h0,h3,h31,h59")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "1 passed" in proc.stdout
