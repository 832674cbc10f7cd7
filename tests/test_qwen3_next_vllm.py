"""A Qwen3-Next target (gated-delta-net linear attention) on vLLM 0.34: its GDN core has no CPU body
in the official wheel and parity has no stand-in for it there yet, so the run stops as a limit of
parity's CPU harness (exit 2) naming the layer (gdn_guard.py), never a verdict; without the guard
the same run computes states that match no state of the model (unidentified, exit 1: a false drift)."""

from __future__ import annotations

import json

import pytest

from .helpers import built, drift_overrides, run_parity
from .test_qwen3_next_sglang import case  # noqa: F401  (the fixture: the bundled config at depth 8)

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _need():
    if not built("vllm", "0.34.0"):
        pytest.skip("vllm 0.34.0's environment is not built (./dev setup vllm-0.34.0)")


def _check(case, overrides=None):  # noqa: F811
    target, draft = case
    return run_parity("check", "--engine", "vllm", "--vllm", "0.34.0", "--target-config", target, "--draft", draft,
                      "--dump-layout", "h2,h4,h6,h8", "--json", overrides=overrides)


def test_the_gdn_layers_are_a_limit_of_the_cpu_run(case):  # noqa: F811
    proc = _check(case)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "QwenGatedDeltaNetAttention" in proc.stdout + proc.stderr


def test_without_the_guard_the_states_are_no_state_of_the_model(case):  # noqa: F811
    proc = _check(case, drift_overrides("tests.drift.vllm_no_gdn_guard"))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert json.loads(proc.stdout)["verdict"] == "drift" and '"unidentified_state"' in proc.stdout
