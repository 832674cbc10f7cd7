"""pytest plugin (registered through the `pytest11` entry point): `pytest -m parity`.

A thin shell over the library. It registers the `parity` and `gpu` markers and adds one
test per locked contract found under `--parity-contracts` (default `contracts/`), plus
one for an ad-hoc `--parity-target/--parity-draft/--parity-dump-layout` triple. A failing
check prints the gate's slot table, not a traceback. Each item runs its extractions in
subprocesses with their own ports, so `pytest -n auto` is safe.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from .contract import parse_taps
from .errors import UserError
from .extract.engines import engine
from .extract.trainers import trainer
from .gate import Verdict, check
from .inputs import InputError, check_fit, parse_serve_args, read_inputs
from .extract.installed import build_on_demand
from .lock import check_lock, read_lock
from .report import render_check
from .forkserver import run_servers
from .workspace import workspace


def pytest_addoption(parser):
    group = parser.getgroup("parity", "EAGLE-3 train/serve parity")
    group.addoption("--parity-contracts", default=None, metavar="DIR",
                    help="directory of locked contracts to check (default: contracts/)")
    group.addoption("--parity-target", metavar="PATH", help="target config.json for an ad-hoc check")
    group.addoption("--parity-draft", metavar="DIR", help="served draft directory for an ad-hoc check")
    group.addoption("--parity-dump-layout", metavar="TAPS", help="dump layout for an ad-hoc check")
    group.addoption("--parity-trained", metavar="DIR", help="for an ad-hoc check: the draft as the trainer wrote "
                    "it (a lock names its own, `parity lock --trained`); the training side is built from it")
    group.addoption("--parity-engine", metavar="NAME", default=None,
                    help="for an ad-hoc check: the serving engine, installed (default: parity's default engine)")
    group.addoption("--parity-trainer", metavar="NAME", default=None,
                    help="for an ad-hoc check: the training stack, installed (default: parity's default trainer)")
    group.addoption("--parity-engine-release", metavar="VERSION", default=None,
                    help="for an ad-hoc check: another release of the engine, in parity's environment of it "
                         "(default: the one installed)")
    group.addoption("--parity-trainer-release", metavar="VERSION", default=None,
                    help="for an ad-hoc check: another release of the trainer, in parity's environment of it "
                         "(default: the one installed)")
    group.addoption("--parity-no-verify", action="store_true",
                    help="skip the confirming extraction of suggested fixes")
    group.addoption("--parity-serve-args", metavar="'ARGS' | @FILE", default=None,
                    help="the serve command's arguments, resolved by the engine (docs/launch.md); a lock's own "
                         "--serve-args are used when this is not given")


def pytest_configure(config):
    build_on_demand(False)  # a test run installs nothing: `parity setup --installed` builds first
    config.addinivalue_line("markers", "parity: train/serve parity checks (select with -m parity)")
    config.addinivalue_line("markers", "gpu: needs CUDA; skipped without it")
    if not hasattr(config, "workerinput"):  # the run's controller: its xdist workers inherit the servers
        # One warmed server per engine environment for the whole run, shared by every worker and
        # every parity command a test runs (parity.forkserver.run_servers): each imports once.
        servers = run_servers()
        servers.__enter__()
        config._parity_servers = servers
    given = config.getoption("parity_contracts")
    if given is not None and not _contracts_dir(config).is_dir():  # else: zero items, a silent exit 5
        what = "is not a directory" if _contracts_dir(config).exists() else "does not exist"
        raise pytest.UsageError(f"--parity-contracts {given}: {_contracts_dir(config)} {what}")


def pytest_unconfigure(config):
    servers = getattr(config, "_parity_servers", None)
    if servers is not None:  # every server of the run stopped, its directory removed
        servers.__exit__(None, None, None)


class ParityFailure(Exception):
    """A drift: its message is the gate's report."""


class ParityItem(pytest.Item):
    def __init__(self, *, run, paths=("", ""), **kwargs):
        super().__init__(**kwargs)
        self._run = run
        self._paths = paths  # the target config and draft as the report names them (its FIX: the file to edit)
        self.add_marker(pytest.mark.parity)

    def runtest(self):

        with workspace():  # the item's temp files and its probes' go with it, pass or fail
            result = self._run()
        if result.verdict is not Verdict.parity:
            raise ParityFailure(render_check(result, *self._paths))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ParityFailure):
            return str(excinfo.value)

        if isinstance(excinfo.value, UserError):
            return f"parity could not check this pair: {excinfo.value}"
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, self.name


class LockFile(pytest.File):
    def collect(self):


        verify = not self.config.getoption("parity_no_verify")
        serve_args = self.config.getoption("parity_serve_args")
        yield ParityItem.from_parent(self, name=self.path.stem, paths=_lock_paths(self.path),
                                     run=lambda: check_lock(self.path, verify=verify,
                                                            serve_args=parse_serve_args(serve_args)))


def _lock_paths(lock: Path) -> tuple[str, str]:
    """The target config and the draft a lock names, relative to the working directory where
    they are under it (as the CLI shows them); ('', '') when the lock cannot be read (its item
    says why when it runs)."""
    try:
        read = read_lock(lock)
    except UserError:
        return "", ""
    return tuple(_shown(lock.parent / p) for p in (read.target_config, read.draft))


def _shown(path: Path) -> str:
    rel = os.path.relpath(path.resolve())
    return str(path.resolve()) if rel.startswith(os.pardir) else rel


def _contracts_dir(config) -> Path:
    return Path(config.rootpath, config.getoption("parity_contracts") or "contracts").resolve()


def pytest_collect_file(file_path: Path, parent):
    if file_path.suffix == ".json" and file_path.resolve().parent == _contracts_dir(parent.config):
        return LockFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    target, draft = config.getoption("parity_target"), config.getoption("parity_draft")
    if not (target or draft):
        return
    layout = config.getoption("parity_dump_layout")
    if not (target and draft and layout):
        raise pytest.UsageError("--parity-target, --parity-draft and --parity-dump-layout go together")


    try:  # an unknown name is a usage error, before anything runs
        served_by = engine(config.getoption("parity_engine") or engine().name, config.getoption("parity_engine_release"))
        trained_by = trainer(config.getoption("parity_trainer") or trainer().name,
                             config.getoption("parity_trainer_release"))
    except InputError as exc:
        raise pytest.UsageError(str(exc)) from None

    def run():

        given = read_inputs(target, draft)  # read once, here at the boundary
        side = trained_by.trained_side(config.getoption("parity_trained"), given[1])
        training = trained_by.training_contract(given[0], parse_taps(layout), **side)
        check_fit(*given, training)
        return check(training, *given, served_by, verify=not config.getoption("parity_no_verify"),
                     serve_args=parse_serve_args(config.getoption("parity_serve_args")))

    items.append(ParityItem.from_parent(session, name=f"parity[{Path(draft).name}]", run=run,
                                        paths=(str(target), str(draft))))
