"""The test session runs in one parity workspace: what library calls leave in the temp dir
(the forward cases' served copies, say) is removed when the session ends.

`inject_drift("tests.drift.MODULE", ...)` runs each drift module in place of the probe it
wraps for the rest of the test (through PARITY_PROBE_OVERRIDES, see parity.envs): every
extraction in this process and in the CLI's children then runs the drifted engine or trainer."""

from __future__ import annotations

import pytest

from parity.envs import PROBE_OVERRIDES
from parity.workspace import workspace

from .helpers import drift_overrides


@pytest.fixture(scope="session", autouse=True)
def _parity_workspace(tmp_path_factory):
    tmp_path_factory.getbasetemp()  # pytest's own temp root stays where pytest keeps it
    with workspace(prefix="parity-tests-"):
        yield


@pytest.fixture
def inject_drift(monkeypatch):
    def inject(*drifts: str) -> None:
        monkeypatch.setenv(PROBE_OVERRIDES, drift_overrides(*drifts))

    return inject
