"""One private temporary directory per parity command, removed whatever the exit path.

Why one directory and not careful cleanup in each module: the probes run in subprocesses
that end with `os._exit` (gloo teardown can hang), so no `finally` or `atexit` runs there;
a probe killed on Ctrl-C or a timeout runs nothing at all; and the engines write caches of
their own under the temp dir (torch inductor's precompiled header is 150 MB). Pointing the
whole command, its children included, at a directory we own turns "every module must clean
up after itself" into one `rmtree` in a `finally`.

    with workspace():            # the CLI around each command, the pytest plugin around each item
        ...                      # tempfile.* in this process lands inside it
        run_child([...], ...)    # parity.children: each child gets its own TMPDIR inside it,
                                 # removed when it ends

`run_child` works without an enclosing workspace too (library use): the child's private
directory is then made in the user's TMPDIR and still removed when the child ends.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Iterator

_active: Path | None = None  # the workspace this process is in, if any
_children: set[subprocess.Popen] = set()
_servers: dict[subprocess.Popen, tuple[Path, object]] = {}  # forkserver servers -> (dir, control socket)
_forked: set[int] = set()  # children forked by those servers (each leads its own session)
_lock = threading.Lock()


def active() -> Path | None:
    return _active


@contextmanager
def workspace(prefix: str = "parity-") -> Iterator[Path]:
    """Make a private directory in the user's TMPDIR, make it this process's temp dir, and on
    leaving (return, error, KeyboardInterrupt, SystemExit) kill the children still running and
    remove it. Nested use joins the outer workspace, which owns the cleanup."""
    global _active
    if _active is not None:
        yield _active
        return
    root = Path(tempfile.mkdtemp(prefix=prefix))
    saved = tempfile.tempdir
    _active, tempfile.tempdir = root, str(root)
    try:
        yield root
    finally:
        kill_children()
        _active, tempfile.tempdir = None, saved
        shutil.rmtree(root, ignore_errors=True)


def kill_children() -> None:
    """Kill every child `parity.children.run_child` started that is still running (its whole process group),
    and every warmed server (parity.forkserver) with its private directory."""
    with _lock:
        running = list(_children)
        servers = list(_servers.items())
        forked = list(_forked)
    for proc in running:
        _kill(proc)
    for pid in forked:
        kill_group(pid)
    for proc, (tmp, _) in servers:
        unregister_server(proc, tmp)


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads (or, if it leads none yet, the process)."""
    for kill in (os.killpg, os.kill):
        try:
            return kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        except PermissionError:
            return


@contextmanager
def tracked(pid: int) -> Iterator[None]:
    """While inside, the forked child `pid` (parity.forkserver) is killed with the workspace."""
    with _lock:
        _forked.add(pid)
    try:
        yield
    finally:
        with _lock:
            _forked.discard(pid)


def private_dir(prefix: str) -> Path:
    """A new private directory in this process's temp dir (the workspace, when one is active)."""
    return Path(tempfile.mkdtemp(prefix=prefix))


# Cache roots that default to the user's ~/.cache (or the temp dir) and that code a child imports
# writes into (transformers 4.x writes HF_HOME/hub/version.txt at import; SGLang and vLLM cache
# compiled kernels and model inspections; torch's inductor cache): a child's point into its own
# private directory. TORCHINDUCTOR_CACHE_DIR is also one that the import sets: importing
# speculators (torch._inductor) writes `<temp dir>/torchinductor_<user>` into os.environ, so a
# parity command that imported it (the CLI did, to read a SpecForge draft's config schema) handed
# its children a value of its own private temp dir: a key no later command matched (every
# `check --trainer specforge` computed both sides again, and started their servers again).
CACHE_ROOTS = {"HF_HOME": "huggingface", "SGLANG_CACHE_DIR": "sglang-cache", "VLLM_CACHE_ROOT": "vllm-cache",
               "TORCHINDUCTOR_CACHE_DIR": "torchinductor"}


# Environment variables that say only where a run's temporary files go, the terminal's size, or
# that are the test runner's bookkeeping: they differ from one run (one command, one xdist
# worker, one test) to the next, and parity sets the ones a child sees itself (private_caches). Every other variable of a
# child's environment may steer the engine (SGLang, vLLM and their libraries read their own
# variables, and several enumerate the whole environment at import): the reply cache keys on
# them all (parity.reply_cache), and a warmed server serves only children asking with the same
# ones (parity.forkserver).
RUN_LOCAL_ENV = frozenset({"TMPDIR", "TEMP", "TMP", *CACHE_ROOTS, "PWD", "OLDPWD", "SHLVL", "_", "COLUMNS", "LINES"})
RUN_LOCAL_PREFIXES = ("PYTEST_",)  # PYTEST_CURRENT_TEST, PYTEST_XDIST_WORKER, ...


def run_local(name: str) -> bool:
    """Whether the environment variable `name` is one of RUN_LOCAL_ENV (or RUN_LOCAL_PREFIXES)."""
    return name in RUN_LOCAL_ENV or name.startswith(RUN_LOCAL_PREFIXES)


def private_caches(env: dict[str, str], tmp: Path | str) -> dict[str, str]:
    """`env` with TMPDIR and every cache root (CACHE_ROOTS) inside `tmp`, a directory removed
    when the child ends: nothing the child caches is left in the user's home."""
    return {**env, "TMPDIR": str(tmp), **{var: os.path.join(str(tmp), name) for var, name in CACHE_ROOTS.items()}}


def engine_cache(variable: str, name: str) -> None:
    """Point an engine's cache root (`variable`, e.g. VLLM_CACHE_ROOT, which defaults to the
    user's ~/.cache) at `name` in this process's temp dir, before the engine reads it. A probe's
    temp dir is private and removed when it ends, so nothing an engine caches is left in the
    user's home (docs/engines-on-cpu.md, 'Caches'). Set unconditionally: parity's runs never
    write into a cache the user keeps."""
    os.environ[variable] = os.path.join(tempfile.gettempdir(), name)


def register_server(proc: subprocess.Popen, tmp: Path, control) -> None:
    """A long-lived child (a parity.forkserver server), its private directory and its control
    socket: killed, removed and closed when the workspace ends, or at exit outside any workspace."""
    with _lock:
        _servers[proc] = (tmp, control)


def unregister_server(proc: subprocess.Popen, tmp: Path) -> None:
    """Kill the server `proc` (its process group), reap it and remove its directory."""
    with _lock:
        _, control = _servers.pop(proc, (None, None))
    _kill(proc)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    if control is not None:
        with suppress(OSError):
            control.close()
    shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def running(proc: subprocess.Popen) -> Iterator[None]:
    """While inside, the child `proc` is killed with the workspace; an exception out of the block
    (Ctrl-C, a timeout, an error) kills it, with anything it started, and reaps it first."""
    with _lock:
        _children.add(proc)
    try:
        yield
    except BaseException:
        _kill(proc)
        proc.communicate()
        raise
    finally:
        with _lock:
            _children.discard(proc)


atexit.register(kill_children)  # library use, outside any workspace: no server outlives us


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the child leads its own group: helpers die with it
    except (ProcessLookupError, PermissionError):
        proc.kill()
