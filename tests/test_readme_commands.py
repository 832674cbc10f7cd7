"""Every `parity` command the README (and docs/*.md) shows still works as shown.

A concrete command (every path in it is in this repository) is run as written, with
`python -m parity` from this checkout, and must exit with the code the output shown after
it documents (1 for a drift, 0 otherwise; 0 or 1 when no output is shown), never 2 (bad
input) or 3 (a bug), and never print a traceback. Commands that write (lock, export) write
into a temporary directory. A template line (T/config.json, NAME, D, ...) cannot be run: its
subcommand and every flag it shows must exist in the parser.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

from .doc_commands import DOCS, all_doc_commands, check_against_parser, doc_commands
from .helpers import ROOT

README = ROOT / "README.md"
COMMANDS = all_doc_commands()
CONCRETE = [c for c in COMMANDS if c.concrete]


def _is_matrix(c) -> bool:
    return c.argv[:1] == ["matrix"]


def run_as_shown(cmd, tmp_path) -> subprocess.CompletedProcess:
    argv = list(cmd.argv)
    for arg in cmd.written_args():  # lock/export: write into tmp_path, never into the checkout
        argv[argv.index(arg)] = str(tmp_path / os.path.basename(arg.rstrip("/")))
    # as a user runs it from the checkout (cwd first on sys.path): no PYTHONPATH of its own, which
    # would reach the children's environment and give them servers of their own (parity.forkserver)
    env = dict(os.environ)
    env.pop("PARITY_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "parity", *argv], capture_output=True, text=True,
                          cwd=ROOT, env=env)


def assert_ran_as_documented(cmd, proc) -> None:
    shown = f"{cmd.where}\nexit {proc.returncode}\nstdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-2000:]}"
    assert "Traceback" not in proc.stdout + proc.stderr, shown
    assert proc.returncode in (0, 1), shown  # never 2 (bad input) or 3 (internal error)
    if cmd.documented_exit is not None:
        assert proc.returncode == cmd.documented_exit, shown


def test_the_readme_shows_commands_and_the_reader_finds_them():
    readme = doc_commands(README)
    subcommands = {c.argv[0] for c in readme if c.argv}
    assert {"contract", "check", "lock", "export", "matrix", "can-i-deploy", "forward", "replay",
            "schema", "conventions", "--version"} <= subcommands, subcommands
    assert not any(c.argv and c.argv[0].endswith(":") for c in COMMANDS)  # output lines are not commands
    assert any(c.concrete and c.argv[0] == "replay" for c in COMMANDS)  # docs/replay.md's example


@pytest.mark.parametrize("cmd", COMMANDS, ids=[c.where.split(": ", 1)[0] + ":" + " ".join(c.argv[:1])
                                                 for c in COMMANDS])
def test_every_shown_command_exists_in_the_parser(cmd):
    assert not check_against_parser(cmd.argv, cmd.text), (cmd.where, check_against_parser(cmd.argv, cmd.text))


@pytest.mark.parametrize("cmd", COMMANDS, ids=[c.where.split(": ", 1)[0] + ":" + " ".join(c.argv[:1])
                                                 for c in COMMANDS])
def test_template_paths_are_placeholders_not_rotten_paths(cmd):
    """A path that is not in the repository must be a visible template (NAME, T/, D) or live
    outside it (the reader's own deploy/...), not a bundled file that moved."""
    assert not cmd.rotten_paths, (cmd.where, cmd.rotten_paths)


@pytest.mark.slow
@pytest.mark.parametrize("releases", [
    pytest.param(("--sglang", "0.5.12.post1", "--speculators", "0.9.0"), id="one-row"),
    pytest.param((), id="every-release", marks=pytest.mark.exhaustive)])
def test_matrix_readme_command_runs(releases, tmp_path):
    """`parity matrix --contract contracts/NAME.json` (issue 12.4 crashed on every lock): the
    README's form, run as docs/matrix.md shows it. The suite runs it on one row (a release the
    lock drifts on, so the documented exit 1 still holds): every release's cell of a matrix is
    tests/test_matrix.py's; the whole command, every installed release, is `exhaustive`."""
    shown = [c for c in COMMANDS if _is_matrix(c) and c.concrete]
    assert shown, "the docs show no runnable `parity matrix --contract` command"
    for cmd in shown:
        assert "--contract" in cmd.argv, cmd.where
        if releases:
            cmd = dataclasses.replace(cmd, argv=[*cmd.argv, *releases])
        assert_ran_as_documented(cmd, run_as_shown(cmd, tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("cmd", [c for c in CONCRETE if not _is_matrix(c)],
                         ids=[" ".join(c.argv[:2]) for c in CONCRETE if not _is_matrix(c)])
def test_concrete_command_runs_as_documented(cmd, tmp_path):
    assert_ran_as_documented(cmd, run_as_shown(cmd, tmp_path))


def test_docs_are_read():
    assert README in DOCS and len(DOCS) > 1
