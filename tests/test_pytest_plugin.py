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


def test_ad_hoc_check_on_another_engine(tmp_path):
    """`--parity-engine vllm`: the ad-hoc check is served by vLLM (its report names it), and the
    bundled Llama-3.1-8B draft's ids feed what training took; an unknown engine is a usage error."""
    args = ("--parity-target", str(ROOT / "fixtures/targets/llama-3.1-8b/config.json"),
            "--parity-draft", str(ROOT / "fixtures/drafts/llama-3.1-8b-eagle3"),
            "--parity-dump-layout", "h2,h16,h29,h32")
    proc = run_pytest(tmp_path, *args, "--parity-engine", "vllm", "--parity-engine-release", "0.34.0",
                      "--parity-dump-layout", "h0,h16,h29,h32", "-rA")
    assert proc.returncode == 1, proc.stdout[-3000:]  # the embedding where vLLM feeds h2: a drift, served by vLLM
    assert "serving   vllm " in proc.stdout and "1 failed" in proc.stdout, proc.stdout[-3000:]
    proc = run_pytest(tmp_path, *args, "--parity-engine", "vllm", "--parity-engine-release", "0.34.0")
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout[-3000:]
    proc = run_pytest(tmp_path, *args, "--parity-engine", "vllm")  # none installed here, none named
    assert proc.returncode == 1 and "parity could not check this pair: --engine vllm: vllm is not installed in " \
        in proc.stdout, proc.stdout[-3000:]
    proc = run_pytest(tmp_path, *args, "--parity-engine", "trtllm")
    assert proc.returncode == 4 and "unknown engine 'trtllm'" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.parametrize("given", ["missing_dir", "a_file.json"])
def test_missing_contracts_dir_is_a_usage_error(tmp_path, given):
    """`--parity-contracts DIR` that is not a directory: pytest's usage error (exit 4) naming it,
    not a silent "no tests ran" (exit 5)."""
    (tmp_path / "a_file.json").write_text("{}")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-m", "parity", "-p", "no:cacheprovider",
                           "--parity-contracts", given, "--rootdir", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 4, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and f"--parity-contracts {given}: " in lines[0], proc.stderr
    assert str(tmp_path / given) in lines[0]
    assert ("does not exist" if given == "missing_dir" else "is not a directory") in lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr
