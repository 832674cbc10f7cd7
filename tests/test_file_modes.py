"""What parity writes for the user has the mode any file the user writes has (issue 34): a lock
is committed and read by CI jobs and teammates, often as another user on a shared runner, so it
must not be 0600 because it was renamed into place from a temporary file."""

from __future__ import annotations

import os
import shutil
import stat
from contextlib import contextmanager
from pathlib import Path

import pytest

from parity import cli
from parity.export import _write
from parity.extract.engines import engine
from parity.fixtures import DraftRecipe, speculators_draft
from parity.inputs import Draft

from .helpers import ROOT

KIMI = ROOT / "fixtures" / "targets" / "kimi-k2.5" / "config.json"
KIMI_DRAFT = ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3"


@contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.slow
def test_the_bundled_examples_lock_has_the_umasks_mode(tmp_path, capsys):
    """`parity lock` on the bundled example (README's flow), under two umasks: the new lock and
    the one --update puts in its place each have 0666 less the umask, as `>` would give them."""
    lock = tmp_path / "contracts" / "kimi.json"
    argv = ["lock", str(lock), "--target-config", str(KIMI), "--draft", str(KIMI_DRAFT),
            "--dump-layout", "h0,h3,h31,h59"]
    with umask(0o027):
        assert cli.main(argv) == 0, capsys.readouterr().err
    assert mode(lock) == 0o640
    with umask(0o022):
        assert cli.main([*argv, "--update"]) == 0, capsys.readouterr().err
    assert mode(lock) == 0o644
    assert sorted(p.name for p in lock.parent.iterdir()) == ["kimi.json"]  # no temporary left


def test_an_atomic_lock_write_has_the_umasks_mode(tmp_path):
    from parity.lock import write_atomically

    for mask, want in ((0o022, 0o644), (0o077, 0o600), (0o002, 0o664)):
        with umask(mask):
            write_atomically(tmp_path / "lock.json", "{}\n")
        assert mode(tmp_path / "lock.json") == want, oct(mask)
    assert [p.name for p in tmp_path.iterdir()] == ["lock.json"]


def test_an_exports_files_have_the_umasks_mode_not_the_inputs(tmp_path):
    """The draft's weights copied into the export are new files of the user's: 0600 weights (a
    checkpoint downloaded with a private mode) still export as 0666 less the umask."""
    draft_dir = tmp_path / "draft"
    shutil.copytree(speculators_draft(DraftRecipe()), draft_dir)
    weights = sorted(draft_dir.glob("*.safetensors"))
    assert weights
    for f in weights:
        f.chmod(0o600)
    out = tmp_path / "out"
    out.mkdir()
    with umask(0o022):
        _write(out, Draft.read(draft_dir), [1, 15, 28], engine("sglang"), None)
    written = sorted(out.iterdir())
    assert {p.name for p in written} == {"config.json", *(f.name for f in weights)}
    assert {p.name: mode(p) for p in written} == {p.name: 0o644 for p in written}
    assert all(mode(f) == 0o600 for f in weights)  # the input is only read
