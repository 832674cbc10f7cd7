"""`./dev test` runs `--dist loadgroup`: the tests of one `xdist_group` run on one worker, so a
session fixture they share is built once (tests/conftest.py, _join_xdist_group). pytest-xdist
3.8 alone no longer groups under pytest 9: shown here on two small files, with and without it."""

from __future__ import annotations

import re
import subprocess
import sys

from .helpers import ROOT

GROUPED = """
import pytest
pytestmark = pytest.mark.xdist_group("shared")
def test_1(): pass
def test_2(): pass
def test_3(): pass
def test_4(): pass
"""
ALONE = "def test_5(): pass\ndef test_6(): pass\n"
CONFTEST = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from tests.conftest import _join_xdist_group

def pytest_collection_modifyitems(config, items):
    if getattr(config.option, "loadgroup", False):
        for item in items:
            _join_xdist_group(item)
"""


def _workers(tmp_path, conftest: bool) -> dict[str, str]:
    """test id -> the worker that ran it, for the two files under `-n 2 --dist loadgroup`."""
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_alone.py").write_text(ALONE)
    if conftest:
        (tmp_path / "conftest.py").write_text(CONFTEST)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                           "-v", "-p", "no:parity", "test_grouped.py", "test_alone.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return {m[2]: m[1] for m in re.finditer(r"^\[(gw\d)\] .*PASSED (\S+)", proc.stdout, re.M)}


def test_a_group_runs_on_one_worker(tmp_path):
    ran = _workers(tmp_path, conftest=True)
    grouped = {test: worker for test, worker in ran.items() if "test_grouped.py" in test}
    assert len(grouped) == 4 and all(test.endswith("@shared") for test in grouped), ran
    assert len(set(grouped.values())) == 1, ran
    assert len(ran) == 6, ran


def test_without_it_the_group_has_no_name_to_be_sent_by(tmp_path):
    """What the join mends: pytest-xdist's own suffix never reaches the id (so its scheduler sees
    six tests of no group, and may split the four). When a release of either mends it, this fails:
    the join (a no-op then, it adds no second suffix) can go."""
    ran = _workers(tmp_path, conftest=False)
    assert len(ran) == 6, ran
    assert not any("@" in test for test in ran), ran
