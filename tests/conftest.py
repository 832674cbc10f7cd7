"""The test session runs in one parity workspace: what library calls leave in the temp dir
(the forward cases' served copies, say) is removed when the session ends."""

from __future__ import annotations

import pytest

from parity.workspace import workspace


@pytest.fixture(scope="session", autouse=True)
def _parity_workspace(tmp_path_factory):
    tmp_path_factory.getbasetemp()  # pytest's own temp root stays where pytest keeps it
    with workspace(prefix="parity-tests-"):
        yield
