"""Warmed interpreters: run `python -m MODULE` as a fork of a process that has already
imported what MODULE imports.

Most of an extraction's time is imports (an SGLang probe spends about 12 s importing torch,
sglang and its model code before its first tensor op, then about 8 s computing). A test
run or a `parity check` runs the same probe module of the same environment many times, so
each (interpreter, module, working directory, environment) gets one server process that
imports the module and calls its `warm()` (the import-only first steps of its handler: no
request is read, no tensor computed), then forks one child per run. The child is what
`python -m MODULE` would have been:

- its own session (killed with its process group on Ctrl-C or a timeout, like a fresh child's);
- the asking side's exact environment, working directory and private TMPDIR;
- stdin, stdout and stderr on files the asking side owns (fd 0-2 and sys.std*);
- MODULE run as `__main__` by `runpy` (parent packages imported first, as `-m` does);
- exit code as `python -m` gives it (SystemExit, or 1 with a traceback on stderr); exit
  handlers run, then the process ends without the interpreter teardown the server would
  share (os._exit), as the probes themselves already end.

What the fork keeps from the server is only what `warm()` did, which a fresh run does first
too, and only while what it imported is as it was: the server records every file and
directory it read (parity.reads) and, before each fork after its first, checks them; when
one has changed (an installed file edited, a module added on the path) it forks nothing and
ends, the asking side runs a fresh process, and the next run starts a fresh server. A module replaced through PARITY_PROBE_OVERRIDES (a test's injected drift) is never
imported by the server: it runs in the child, after the fork, as it would in a fresh process,
on the warmed module it patches. The server never runs a torch op (forked OpenMP state would
be unsafe) and is started with OMP_NUM_THREADS as the children get it.

Runs are handed to the server over a private socket pair made at its start (each run's own
connection passed as a file descriptor): no socket path on disk, none another user can reach.
The server ends when its parent does (the control socket reaches EOF), when
the parent's workspace ends (parity.workspace kills it with the other children), or when the
parent evicts it (at most MAX_SERVERS per parent process). `PARITY_NO_FORKSERVER=1` runs every
child as a fresh process instead. Any failure to reach a server falls back to a fresh process:
a server can make a run faster, never change its reply.

**Servers for a whole run** (`run_servers`, `PARITY_FORKSERVERS`): a test run or a `pytest -m
parity -n auto` starts many parity processes (its xdist workers, every `parity` command a test
runs as a user would), and a private server per process pays the imports again in each: in this
project's slow tier 50 of 59 extractions were the first of their (process, environment, module)
(bench/suite.py). Inside `run_servers()` every parity process that inherits the variable shares
one server per key instead: each listens on a socket in the run's directory (mode 0700: no
other user can reach it), named by the digest of its key, started by the first process that
asks for it (under a lock, so never twice) and reached by all. A shared server belongs to the
run, not to the process that started it: it ends when the run ends (its directory removed, its
owner process gone: checked every 2 s), when it has waited IDLE_SECONDS for a run, when it is
stale (as above), or when it is the least recently used and the run holds MAX_SHARED servers or the
machine has less than MIN_AVAILABLE memory available.

Stdlib only on the server side (`python -m parity.forkserver CONTROL_FD MODULE`, or `--listen
SOCKET MODULE OWNER_PID` for a run's server): it runs in every environment.
"""

from __future__ import annotations

import atexit
import fcntl
import gc
import hashlib
import importlib
import io
import json
import os
import runpy
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import OrderedDict
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from . import reads, runlog
from .workspace import (kill_group, run_local, private_caches, private_dir, register_server, tracked,
                        unregister_server)

OFF = "PARITY_NO_FORKSERVER"
MAX_SERVERS = 6  # per parent process: each holds an engine's imports (about 0.5 GB resident)
SHARED = "PARITY_FORKSERVERS"  # the directory of the run's shared servers (run_servers)
MAX_SHARED = 40  # servers alive at once in one run's directory (least recently used stopped first; ~0.6 GB each)
MIN_AVAILABLE = 8 << 30  # memory kept available (MemAvailable, or the cgroup's room) when a server starts,
# at most a third of the machine's: idle servers are stopped, least recently used first, while there
# is less (at most MEMORY_STOPS per start; where memory cannot be read: at most UNMEASURED servers)
MEMORY_STOPS = 2
BUSY_SECONDS = 60  # a server that began a run this recently is never stopped for memory
UNMEASURED = 20
IDLE_SECONDS = 3600  # a shared server that has had no run for this long ends (a suite returns to a
# release environment most of an hour later: its families' extractions first, the matrix and the
# old releases' own tests at the end; the run's end stops them all anyway)
MAX_BASE = 70  # the longest temp dir a run's directory is made in (its sockets' paths must fit in 107 bytes)

# Environment variables that differ from run to run and on which no import depends (a child's
# private TMPDIR and cache roots, the test runner's bookkeeping: parity.workspace.run_local, and
# parity's own switches for this run): a server started under one value serves children asking
# with another (each child gets its own). PARITY_HOME is read when a child runs, never while a
# module imports; where it moves what a child imports (an installed parity's import directory
# lies in the home), that reaches the key as PYTHONPATH.
VOLATILE = frozenset({"PARITY_PROBE_OVERRIDES", "PARITY_NO_CACHE", "PARITY_DEBUG", "PARITY_HOME", OFF, SHARED,
                      reads.ENV, runlog.ENV})


def enabled() -> bool:
    return os.environ.get(OFF, "") in ("", "0") and hasattr(os, "fork") and hasattr(socket, "AF_UNIX")


# -- the asking side -----------------------------------------------------------------------------

@dataclass
class _Server:
    proc: subprocess.Popen
    control: socket.socket  # each run's connection is handed over on it (SCM_RIGHTS)
    tmp: Path
    lock: threading.Lock


_servers: "OrderedDict[tuple, _Server]" = OrderedDict()
_lock = threading.Lock()
last = threading.local()  # how this thread's last child ran, for the run log (parity.runlog): `last.how`


class Unavailable(RuntimeError):
    """No server could be reached: the caller runs a fresh process instead."""


class Stale(Unavailable):
    """The server's imports have changed on disk since it read them: it forked nothing."""


def _key(python: str, warm: str, cwd: str, env: dict[str, str]) -> tuple:
    return (python, warm, cwd, tuple(sorted((k, v) for k, v in env.items() if k not in VOLATILE and not run_local(k))))


def _start(python: str, warm: str, cwd: str, env: dict[str, str]) -> _Server:
    """A server process on a private control socket (no path on disk: nothing to leave
    behind, no other user can reach it); it exits when this end closes."""
    tmp = private_dir("parity-forkserver-")
    server_env = private_caches(env, tmp)
    server_env.pop("PARITY_PROBE_OVERRIDES", None)  # the server warms the real module only
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with open(tmp / "log", "w") as log:
            proc = subprocess.Popen([python, "-m", "parity.forkserver", str(theirs.fileno()), warm],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=server_env,
                                    cwd=cwd, start_new_session=True, pass_fds=[theirs.fileno()])
    except OSError as exc:
        ours.close()
        raise Unavailable(f"forkserver for {warm} under {python} did not start: {exc}") from exc
    finally:
        theirs.close()
    register_server(proc, tmp, ours)
    return _Server(proc, ours, tmp, threading.Lock())


def _stop(server: _Server) -> None:
    unregister_server(server.proc, server.tmp)


def _server(python: str, warm: str, cwd: str, env: dict[str, str]) -> _Server:
    key = _key(python, warm, cwd, env)
    with _lock:
        server = _servers.get(key)
        last.how = "forked"
        if server is not None and server.proc.poll() is None:
            _servers.move_to_end(key)
            return server
        if server is not None:
            del _servers[key]
            _stop(server)
        while len(_servers) >= MAX_SERVERS:
            _stop(_servers.popitem(last=False)[1])
        server = _start(python, warm, cwd, env)
        last.how = "forked, server started"
        _servers[key] = server
        return server


def _retire(server: _Server) -> None:
    """Stop `server` and drop it, so that the next run starts a fresh one."""
    with _lock:
        for key, known in list(_servers.items()):
            if known is server:
                del _servers[key]
    _stop(server)


def forget() -> None:
    """Stop every server this process started (the workspace's end does the same)."""
    with _lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        _stop(server)


def _ask(server: _Server, request: dict, timeout: float) -> int:
    """Have `server` fork a child for `request`; its exit code. On a timeout or an interrupt
    the child (its whole process group) is killed and the exception propagates."""
    conn, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            with server.lock:
                socket.send_fds(server.control, [b"r"], [theirs.fileno()])
        except OSError as exc:
            raise Unavailable(f"forkserver {server.proc.pid}: {exc}") from exc
        theirs.close()
        return _exchange(conn, request, timeout, f"forkserver {server.proc.pid}")
    finally:
        conn.close()
        theirs.close()


def _exchange(conn: socket.socket, request: dict, timeout: float, who: str) -> int:
    """Send `request` on `conn` (a run's own connection to a server) and wait for the child it
    forks; its exit code. On a timeout or an interrupt the child (its whole process group) is
    killed and the exception propagates."""
    try:
        conn.settimeout(timeout)  # the first request also waits for the server's imports
        conn.sendall((json.dumps(request) + "\n").encode())
        reader = conn.makefile("rb")
        line = reader.readline()  # the server warms the module on its first request
        answer = json.loads(line) if line else {}
        if "stale" in answer:
            raise Stale(f"{who}: {answer['stale']} changed since it was imported")
        pid = answer.get("pid")
    except (OSError, ValueError, KeyError) as exc:
        raise Unavailable(f"{who}: {exc}") from exc
    if pid is None:
        raise Unavailable(f"{who} forked nothing")
    with tracked(pid):
        try:
            conn.settimeout(timeout)
            try:
                line = reader.readline()
            except socket.timeout:
                raise subprocess.TimeoutExpired(request["module"], timeout) from None
            if not line:  # the server died: the child's fate is unknown, so it is ended
                raise Unavailable(f"{who} ended during a run")
            return int(json.loads(line)["status"])
        except BaseException:
            kill_group(pid)
            raise


def run(python: str, module: str, warm: str, input_text: str, env: dict[str, str], timeout: float,
        cwd: str, tmp: Path) -> subprocess.CompletedProcess:
    """`python -m module` (stdin `input_text`, environment `env`, working directory `cwd`) as a
    fork of the server that warmed `warm` (the module before any override). `tmp` is the
    child's private directory (its TMPDIR, already in `env`), where its std streams go.
    Unavailable when no server can be reached (run a fresh process instead)."""
    files = {name: str(tmp / f".{name}") for name in ("stdin", "stdout", "stderr")}
    Path(files["stdin"]).write_text(input_text)
    request = {"module": module, "warm": warm, "env": env, "cwd": cwd, **files}
    root = shared_dir()
    if root is not None:  # the run's server, shared by every parity process of the run
        conn, who = _shared(root, python, warm, cwd, env)
        try:
            status = _exchange(conn, request, timeout, who)
        finally:
            conn.close()
    else:
        server = _server(python, warm, cwd, env)
        try:
            status = _ask(server, request, timeout)
        except Stale:
            _retire(server)
            raise
    out, err = (Path(files[n]).read_text(errors="replace") for n in ("stdout", "stderr"))
    for path in files.values():
        Path(path).unlink(missing_ok=True)
    return subprocess.CompletedProcess([python, "-m", module], status, out, err)


# -- the run's shared servers (client side) ------------------------------------------------------

_started: list[subprocess.Popen] = []  # shared servers this process started (kept from the collector)


def shared_dir() -> Path | None:
    """The run's directory of shared servers (`PARITY_FORKSERVERS`), when it is set and is a
    directory of this user's that no one else can enter; None otherwise (private servers)."""
    where = os.environ.get(SHARED)
    if not where:
        return None
    try:
        st = os.stat(where)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return Path(where)


@contextmanager
def run_servers() -> Iterator[Path]:
    """For the life of the block, every parity process of this run (this one, and each process
    it starts that inherits its environment: pytest-xdist workers, a `parity` command run by a
    test) shares one server per key (interpreter, module, working directory, environment) in a
    new private directory; on leaving, every server of the run is stopped and the directory
    removed. Nested use joins the outer run."""
    if shared_dir() is not None:
        yield shared_dir()
        return
    base = tempfile.gettempdir()
    if len(base) > MAX_BASE:  # a socket's path is at most 107 bytes: a long TMPDIR would leave none
        base = "/tmp" if os.access("/tmp", os.W_OK) else base
    root = Path(tempfile.mkdtemp(prefix="parity-fs-", dir=base))  # mode 0700
    (root / "owner").write_text(str(os.getpid()))
    os.environ[SHARED] = str(root)
    try:
        yield root
    finally:
        os.environ.pop(SHARED, None)
        stop_shared(root)


def _live(root: Path) -> dict[Path, int]:
    """The servers of `root` still running: their pid file -> pid."""
    out = {}
    for pid_file in root.glob("*.pid"):
        try:
            pid = int(pid_file.read_text())
            os.kill(pid, 0)
        except (OSError, ValueError):
            continue
        out[pid_file] = pid
    return out


def stop_shared(root: Path) -> None:
    """Stop every server of the run's directory `root`, then remove it."""
    live = _live(root)
    for pid in live.values():
        with suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while live and time.monotonic() < deadline:
        time.sleep(0.05)
        live = _live(root)
    for pid in live.values():
        kill_group(pid)
    for proc in list(_started):
        with suppress(Exception):
            proc.wait(timeout=1)
        _started.remove(proc)
    shutil.rmtree(root, ignore_errors=True)


def _connect(path: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
        return conn
    except OSError:
        conn.close()
        return None


def _shared(root: Path, python: str, warm: str, cwd: str, env: dict[str, str]) -> tuple[socket.socket, str]:
    """A connection to the run's server for this key, started (once, under a lock) if none
    listens yet. Unavailable when none can be started or reached."""
    digest = hashlib.sha256(repr(_key(python, warm, cwd, env)).encode()).hexdigest()[:16]
    sock = root / f"{digest}.sock"
    conn = _connect(sock)
    last.how = "forked"
    if conn is not None:
        return conn, f"forkserver {sock.name}"
    try:
        lock = open(root / f"{digest}.lock", "a")
    except OSError as exc:
        raise Unavailable(f"the run's forkserver directory {root}: {exc}") from exc
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        conn = _connect(sock)  # another process may have started it while this one waited
        if conn is not None:
            return conn, f"forkserver {sock.name}"
        with suppress(OSError):
            sock.unlink()  # a server that ended without removing it
        _evict(root)
        tmp = root / f"{digest}.d"
        tmp.mkdir(exist_ok=True)
        server_env = private_caches(env, tmp)
        server_env.pop("PARITY_PROBE_OVERRIDES", None)  # the server warms the real module only
        try:
            owner = (root / "owner").read_text().strip()
            with open(root / f"{digest}.log", "a") as log:
                proc = subprocess.Popen([python, "-m", "parity.forkserver", "--listen", str(sock), warm, owner],
                                        stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=server_env, cwd=cwd,
                                        start_new_session=True)
        except OSError as exc:
            raise Unavailable(f"forkserver for {warm} under {python} did not start: {exc}") from exc
        _started.append(proc)
        last.how = "forked, server started"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            conn = _connect(sock)
            if conn is not None:
                return conn, f"forkserver {sock.name}"
            if proc.poll() is not None:
                break
            time.sleep(0.02)
        raise Unavailable(f"forkserver for {warm} under {python} did not listen at {sock}")


def _evict(root: Path) -> None:
    """Make room for one more server in `root`: stop the least recently used (each server
    touches its pid file at every run) while MAX_SHARED are alive, and then, while the machine
    has less memory available than it should keep (`_wanted`), up to MEMORY_STOPS more that
    have not begun a run for BUSY_SECONDS. A server holds an engine's imports (about 0.6 GB); a
    suite that visits thirty environments restarted the ones it came back to when twenty was
    the fixed limit."""
    live = _live(root)
    by_use = sorted(live, key=lambda f: _touched(f) or 0)
    available, wanted = _available(), _wanted()
    limit = MAX_SHARED if available is not None else UNMEASURED
    while len(by_use) >= limit:
        _stop_pid(live[by_use.pop(0)])
    idle = [f for f in by_use if time.time() - (_touched(f) or 0) > BUSY_SECONDS]
    for pid_file in idle[:MEMORY_STOPS]:
        available = _available()
        if available is None or available >= wanted:
            break
        _stop_pid(live[pid_file])


def _touched(pid_file: Path) -> float | None:
    try:
        return pid_file.stat().st_mtime
    except OSError:
        return None  # ended (and removed) since it was listed


def _available() -> int | None:
    """The memory available to this run, in bytes: Linux's MemAvailable, or less where the
    cgroup this process runs in has less room left (a container's limit); None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            meminfo = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f if line.split()[1:]}
        available = meminfo["MemAvailable"]
    except (OSError, ValueError, IndexError, KeyError):
        return None
    with suppress(OSError, ValueError):
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text())
            available = min(available, int(limit) - used)
    return available


def _wanted() -> int:
    """The memory a server start keeps available: MIN_AVAILABLE, at most a third of the machine's."""
    with suppress(OSError, ValueError, IndexError, StopIteration):
        with open("/proc/meminfo") as f:
            total = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
        return min(MIN_AVAILABLE, total // 3)
    return MIN_AVAILABLE


def _stop_pid(pid: int, wait: float = 2.0) -> None:
    """SIGTERM to a server another process may have started (only if that pid is still a
    parity.forkserver: a pid file can outlive its process), and a short wait for it to end
    (its memory counts as available once it has)."""
    with suppress(OSError):
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"parity.forkserver" not in f.read():
                return
    with suppress(OSError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[-1].split()[0] == "Z":
                    return  # ended; its parent has not reaped it yet
        except (OSError, IndexError):
            return
        time.sleep(0.05)


# -- the server ----------------------------------------------------------------------------------

def _warm(module: str) -> None:
    """Import `module` and run its `warm()` when it has one. A failure is left for the child
    to meet again in its own run (and report as a fresh process would).

    The cyclic garbage collector is off while it imports (an engine's import allocates
    millions of objects and few cycles: about 2 of an SGLang probe's 14 s of imports were
    collections), and what it imported is then frozen (`gc.freeze`): a forked child's
    collections skip the server's objects instead of walking, and so copying, every page of
    them. Collection itself is as in a fresh process: on, for everything the child allocates."""
    gc.disable()
    try:
        warm = getattr(importlib.import_module(module), "warm", None)
        if callable(warm):
            warm()
    except BaseException:  # noqa: BLE001 - the child reports it
        traceback.print_exc()
    finally:
        gc.freeze()
        gc.enable()


def _child(request: dict) -> None:
    """In the forked child: become `python -m request['module']`; never returns."""
    code = 1
    try:
        os.setsid()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for fd, (name, mode) in enumerate((("stdin", os.O_RDONLY), ("stdout", os.O_WRONLY | os.O_TRUNC),
                                           ("stderr", os.O_WRONLY | os.O_TRUNC))):
            opened = os.open(request[name], mode | (os.O_CREAT if fd else 0), 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=False)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
        tempfile.tempdir = None  # read TMPDIR again: the child's own
        sys.argv = [request["module"]]
        try:
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
        except BaseException:  # noqa: BLE001 - as `python -m` prints it
            traceback.print_exc()
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001 - the set-up itself failed
        with open(2, "w", closefd=False) as err:
            traceback.print_exc(file=err)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def _wait(conn: socket.socket, pid: int) -> None:
    try:
        _, status = os.waitpid(pid, 0)
        conn.sendall((json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n").encode())
    except OSError:
        pass
    finally:
        _open.discard(conn)
        conn.close()


_open: set[socket.socket] = set()  # connections of runs not yet reported (server side)


class _State:
    """What a server keeps between runs: the modules it warmed and the record of what they read."""

    def __init__(self):
        self.warmed: set[str] = set()
        self.imported: dict = {}


def _handle(conn: socket.socket, state: _State, listener: socket.socket, on_stale) -> None:
    """One run handed to the server on `conn`: warm its module the first time, refuse it when
    what was imported has changed on disk (`on_stale`, which ends the server), else fork the
    child and report its pid, then its exit code (a thread waits for it)."""
    _open.add(conn)
    try:
        request = json.loads(conn.makefile("rb").readline())
        if request["warm"] not in state.warmed:
            state.warmed.add(request["warm"])
            _warm(request["warm"])
            state.imported = reads.baseline()
        stale = state.imported.get("changed") or reads.changed_since(state.imported)
        if stale:  # a fork would run code that is no longer on disk: end, the asker runs fresh
            on_stale()
            conn.sendall((json.dumps({"stale": stale[:3]}) + "\n").encode())
            os._exit(0)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:
            for other in (listener, *_open):  # the child holds no other run's connection
                if other is not conn:
                    other.close()
            conn.close()
            _child(request)
        conn.sendall((json.dumps({"pid": pid}) + "\n").encode())
    except Exception:  # noqa: BLE001 - this request fails; the asking side falls back
        traceback.print_exc()
        _open.discard(conn)
        conn.close()
        return
    threading.Thread(target=_wait, args=(conn, pid), daemon=True).start()


def serve(control_fd: int, warm: str) -> None:
    """Take runs handed over on the control socket until the parent closes it."""
    reads.start()  # what the warm imports read: checked before every fork after the first
    control = socket.socket(fileno=control_fd)
    state = _State()
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 16, 1)
        except OSError:
            os._exit(0)
        if not message:  # the parent has gone
            os._exit(0)
        if fds:
            _handle(socket.socket(fileno=fds[0]), state, control, lambda: None)


def serve_listening(path: str, warm: str, owner: int) -> None:
    """A run's shared server (run_servers): take runs on the socket `path` until the run ends
    (the socket's directory removed, or its owner process gone), no run came for IDLE_SECONDS,
    it is stale, or it is asked to stop (SIGTERM); the socket and pid file go with it."""
    reads.start()
    pid_file = path[:-len(".sock")] + ".pid"

    def leave(*_, orphaned: bool = False) -> None:
        for f in (path, pid_file):
            with suppress(OSError):
                os.unlink(f)
        if orphaned:  # the run ended without its teardown (killed): its directory goes with its servers
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, leave)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(16)
    with open(pid_file, "w") as f:
        f.write(str(os.getpid()))
    state, last = _State(), time.monotonic()
    while True:
        ready, _, _ = select.select([listener], [], [], 2.0)
        if not ready:
            try:
                os.kill(owner, 0)
            except OSError:
                leave(orphaned=True)
            if not os.path.exists(path) or time.monotonic() - last > IDLE_SECONDS:
                leave()
            continue
        conn, _ = listener.accept()
        last = time.monotonic()
        with suppress(OSError):
            os.utime(pid_file)  # most recently used: the last to be stopped when the run holds too many
        _handle(conn, state, listener, lambda: [os.unlink(f) for f in (path, pid_file) if os.path.exists(f)])


if __name__ == "__main__":
    if sys.argv[1] == "--listen":
        serve_listening(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        serve(int(sys.argv[1]), sys.argv[2])
