"""Which release of an engine or a trainer runs, and where: one rule for every side.

A release flag (`--vllm 0.33.0`, `--sglang`, `--speculators`, `--specforge`) runs parity's
environment of the release it names. With none, the release is the one **installed** where
parity runs: the version of the side's distribution (`DIST` in its folder, else its NAME) in
this interpreter's metadata, read without importing it; none installed is a one-line refusal
naming what to install or which flag to give. It is run in this interpreter, so the installed
code itself is what runs, local edits included.

Where that code cannot be imported here (the probe says so before it builds anything: its
reply's `cannot_extract` is `unimportable`, e.g. a dependency left out by `pip install
--no-deps`), the same release runs in parity's environment of it instead, built on first use
(parity.ondemand, progress on stderr) unless building is switched off (the pytest plugin:
`parity setup --installed` builds them first). parity's environment holds the release as
published, so the user's installation is compared with it first (parity.record): an editable
install, a file edited in place, or another build of the release is refused, naming the files;
never a pass on code the user does not serve.

Each run is recorded for the `Bound` call it belongs to (`recording`), so every contract says
which release was checked and from where (its provenance's `source`: INSTALLED, ENVIRONMENT,
FLAG, and the `environment` it ran in).
"""

from __future__ import annotations

import contextvars
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Iterator

from .. import record
from . import Registry
from ..contract.reply import ProbeReply
from ..envs import Env, EnvError, environments, find_env, run_module
from ..home import CHECKOUT
from ..inputs import InputError
from ..progress import logger

INSTALLED = "installed"  # the release installed here, run in this interpreter
ENVIRONMENT = "environment"  # the release installed here, run in parity's environment of it
FLAG = "flag"  # the release a flag named, run in parity's environment of it

SETUP = "--installed"  # `parity setup --installed`: build what the installed releases need

log = logger("parity")


class NotInstalled(InputError):
    """No release flag, and the side's distribution is not installed here (exit 2, one line)."""


class InstalledDiffers(InputError):
    """The installed release cannot run here, and what is installed is not the release parity
    would run instead (an editable install, edited files, another build): exit 2, naming them."""


@dataclass(frozen=True)
class Ran:
    """Where one side ran: its release, the interpreter, how it was chosen (`source`), the
    environment (its name; None for this interpreter) and, for ENVIRONMENT, why not here."""

    release: str
    python: str
    source: str
    environment: str | None = None
    why: str | None = None


def distribution(impl: Any) -> str | None:
    """The distribution whose installed release a side runs (its DIST); None for a side that
    declares none (a registered stand-in, whose release None is its own default)."""
    return getattr(impl, "DIST", None)


def installed_release(dist: str) -> str | None:
    """The version of `dist` installed in this interpreter (its metadata; nothing imported)."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def option(impl: Any) -> str:
    """How a command line names the side: '--engine vllm' or '--trainer specforge'."""
    return f"--{Registry.kind_of(impl)} {impl.NAME}"


def not_installed(impl: Any) -> NotInstalled:
    dist = distribution(impl)
    return NotInstalled(f"{option(impl)}: {dist} is not installed in {sys.executable}; install the release you "
                        f"{'serve' if option(impl).startswith('--engine') else 'train with'} "
                        f"(pip install {dist}==VERSION) or name one with {impl.FLAG} VERSION")


def release(impl: Any, flagged: str | None) -> str | None:
    """The release a side runs: `flagged`, else the installed one (NotInstalled when none is; None
    for a side that declares no distribution)."""
    if flagged is not None or distribution(impl) is None:
        return flagged
    found = installed_release(distribution(impl))
    if found is None:
        raise not_installed(impl)
    return found


def interpreter(impl: Any, flagged: str | None) -> Ran:
    """Where the side runs first: the environment of the `flagged` release, else this interpreter
    with the installed one (a probe may then move it: `run`)."""
    if flagged is not None:
        env = find_env(distribution(impl), flagged)
        return Ran(flagged, str(env.python), FLAG, None if env.current else env.name)
    return Ran(release(impl, None), sys.executable, INSTALLED)


# -- parity's environment of the installed release ----------------------------------------------

_BUILDING = {"allowed": True}


def build_on_demand(allowed: bool) -> None:
    """Whether a missing environment of an installed release is built on first use (the CLI) or
    refused, naming `parity setup --installed` (the pytest plugin: a test run installs nothing,
    and its workers would each wait on one build)."""
    _BUILDING["allowed"] = allowed


def own_environment(dist: str, version: str) -> Env | None:
    """parity's environment (not this interpreter) that has `dist==version`, built or not."""
    return next((e for e in environments() if not e.current and e.packages.get(dist) == version), None)


def built_environment(impl: Any, version: str, why: str) -> Env:
    """parity's environment of `version`, built now when it is not (progress on stderr), or a
    one-line EnvError naming the command that builds it."""
    dist = distribution(impl)
    env = own_environment(dist, version)
    if env is not None and env.built:
        return env
    command = setup_installed()
    if not _BUILDING["allowed"]:
        raise EnvError(f"{option(impl)}: the installed {dist} {version} cannot run in this interpreter ({why}) and "
                       f"parity's environment of it is not built: run `{command}` first (a test run builds none)")
    from ..ondemand import BuildError, ensure_release

    log(f"{dist} {version} (installed) cannot run in this interpreter ({why}): building parity's environment "
        "of that release (once)")
    try:
        ensure_release(dist, version, beside_this=True)
    except BuildError as exc:
        raise EnvError(f"{option(impl)}: the installed {dist} {version} cannot run in this interpreter ({why}), and "
                       f"parity's environment of it could not be built ({exc}); run `{command}` where the package "
                       "registry can be reached") from None
    env = own_environment(dist, version)
    if env is None or not env.built:
        raise EnvError(f"{option(impl)}: parity's environment of {dist} {version} was not built; run `{command}`")
    return env


def site_packages(env: Env):
    return next(iter(sorted(env.path.glob("lib/python*/site-packages"))), None)


def same_code(impl: Any, version: str, why: str, env: Env | None = None) -> None:
    """Refuse (InstalledDiffers) when the installed `version` is not what parity would run in
    its environment: an editable install, files edited in place (against the installation's own
    RECORD), or, given the environment `env`, a RECORD that differs from its copy's."""
    dist = distribution(impl)
    mine = record.installed(dist)
    if mine is None:
        return
    head = f"{option(impl)}: the installed {dist} {version} cannot run in this interpreter ({why})"
    if mine.editable:
        raise InstalledDiffers(f"{head}, and it is an editable install (from {mine.editable}): parity's environment "
                               f"would run {dist} {version} as published, not your sources; install its dependencies "
                               "here so that parity runs your code")
    changed = record.edited(mine)
    if not changed and env is not None:
        theirs = record.installed(dist, site_packages(env))
        changed = record.differing(mine, theirs) if theirs is not None else []
        what = f"differ from the published {dist} {version} parity would run ({_files(changed)})"
    else:
        what = f"were edited since they were installed ({_files(changed)})"
    if changed:
        raise InstalledDiffers(f"{head}, and its files {what}: {record.named(changed)}; parity's environment would "
                               f"run {dist} {version} as published, not your code: install its dependencies here so "
                               "that parity runs it")


def _files(names: list[str]) -> str:
    return f"{len(names)} file{'s' if len(names) != 1 else ''}"


def elsewhere(impl: Any, version: str, why: str) -> Ran:
    """Where the installed `version` runs when its code cannot be imported here (`why`):
    parity's environment of it, after the installed files were compared with it."""
    same_code(impl, version, why)  # a local edit is refused before anything is built
    env = built_environment(impl, version, why)
    same_code(impl, version, why, env)
    return Ran(version, str(env.python), ENVIRONMENT, env.name, why)


def unimportable(reply: dict) -> str | None:
    """Why the probe's interpreter cannot import the release's code (its reply says so), or None."""
    entry = ProbeReply.read(reply).cannot_extract if isinstance(reply, dict) else None
    return entry.reason.removeprefix("its code cannot be imported here: ") if entry and entry.unimportable else None


# -- running ------------------------------------------------------------------------------------

_runs: contextvars.ContextVar[dict[str, Ran] | None] = contextvars.ContextVar("parity_runs", default=None)


@contextmanager
def recording() -> Iterator[dict[str, Ran]]:
    """Collect where each side ran in this block (distribution -> its first run)."""
    runs: dict[str, Ran] = {}
    token = _runs.set(runs)
    try:
        yield runs
    finally:
        _runs.reset(token)


def run(impl: Any, flagged: str | None, module: str, request: dict, *, cache: bool = True,
        timeout: float = 600) -> dict:
    """`python -m module` of the side (`impl`) with `request`, where its release runs (see the
    module docstring); the reply. With no flag, a reply saying the installed code cannot be
    imported here moves the run to parity's environment of that release."""
    ran = interpreter(impl, flagged)
    reply = run_module(ran.python, module, request, timeout, cache=cache)
    why = unimportable(reply) if ran.source == INSTALLED else None
    if why is not None:
        ran = elsewhere(impl, ran.release, why)
        reply = run_module(ran.python, module, request, timeout, cache=cache)
    runs = _runs.get()
    if runs is not None:
        runs.setdefault(distribution(impl), ran)
    return reply


def setup_installed() -> str:
    """The command that builds what the installed releases need, as the reader would type it here."""
    return ("./dev parity" if CHECKOUT is not None else "parity") + f" setup {SETUP}"


def where(impl: Any) -> str:
    """What `parity --version` says of a side: its installed release and where it would run."""
    dist = distribution(impl)
    if dist is None:
        return f"{impl.NAME}: declares no distribution ({impl.FLAG} VERSION names its release)"
    version = installed_release(dist)
    if version is None:
        return f"{dist}: not installed ({impl.FLAG} VERSION runs parity's environment of a release)"
    env = own_environment(dist, version)
    other = (f"parity's environment {env.name} ({'built' if env.built else 'not built'})" if env is not None
             else "parity's environment of it (not declared: built on first use)")
    return f"{dist} {version}: installed; runs in this interpreter ({sys.executable}), or, where its code " \
           f"cannot be imported here, in {other}"


def set_up(impl: Any) -> str:
    """`parity setup --installed` for one side: where its installed release runs, its
    environment built when its code cannot be imported here (one line saying which)."""
    dist = distribution(impl)
    version = installed_release(dist) if dist is not None else None
    if version is None:
        return f"{dist or impl.NAME}: not installed here"
    probe = getattr(impl, "PROBE", None) or getattr(impl, "PROBE_MODULE")
    reply = run_module(sys.executable, probe, {"imports_only": True}, cache=True)
    why = unimportable(reply)
    if why is None:
        return f"{dist} {version}: runs in this interpreter ({sys.executable})"
    ran = elsewhere(impl, version, why)
    return f"{dist} {version}: its code cannot be imported here ({why}); runs in parity's environment {ran.environment}"


__all__ = ["ENVIRONMENT", "FLAG", "INSTALLED", "InstalledDiffers", "NotInstalled", "Ran", "build_on_demand",
           "distribution", "installed_release", "interpreter", "recording", "release", "run", "set_up", "where"]
