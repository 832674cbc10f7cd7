"""The capture under a parallel layout, child side, engine-agnostic: which ranks parity runs for
the layout a serve command resolves to (`plan`), and running one CPU process per rank
(`run_ranks`). Each engine's probe builds its part of the target on each rank with its own code
(SGLang: parity.extract.engines.sglang.ranks).

A rank is a child forked by the probe before the probe starts any process group of its own: it
inherits the imports (torch, the engine) and the request's tensors, and nothing that was
initialised. It runs its job, writes the result to a file in a private directory and ends with
`os._exit` (no exit handler of the probe runs twice). The probe waits for every rank; when one
ends without a result (its job raised past its own handlers, or a peer it waits on is gone) or
the time runs out, every rank still running is killed, and the directory is removed on every
exit path. A rank also dies with the probe (the kernel's parent-death signal), so none outlives it.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import shutil
import signal
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

MAX_RANKS = 4  # the most CPU processes one capture runs (docs/launch.md, "The parallel layout")
RANK_TIMEOUT = 420.0  # seconds for every rank of one capture together (inside the probe's own 600)


@dataclass(frozen=True)
class Plan:
    """The layout parity runs the capture under: `tp` x `pp` ranks, the rank of tensor-parallel
    rank t on pipeline stage s being `tp * s + t` (SGLang's launcher and vLLM's both number them
    so); `stands_for`, where it is smaller than the layout resolved, what stands for what;
    `not_run`, the parts of the layout the capture does not run (said in 'Not checked')."""

    tp: int
    pp: int
    stands_for: tuple[str, ...] = ()
    not_run: tuple[str, ...] = field(default=())

    @property
    def ranks(self) -> int:
        return self.tp * self.pp

    def said(self) -> dict[str, Any]:
        return {"ranks": self.ranks, "tp": self.tp, "pp": self.pp, "stands_for": list(self.stands_for)}


class NotRunnable(Exception):
    """A layout parity's CPU harness does not run (one line naming what; parity's limit, exit 2)."""


def plan(layout: dict, fields: dict[str, str], unrun: dict[str, str] | None = None) -> Plan | None:
    """The ranks to run for `layout` (a ParallelLayout's degrees: tp, pp, dp, attention_dp, ep),
    or None when it is one rank (the capture runs in the probe's own process, as always).
    `fields` names the engine's own field for each degree (for the words); `unrun`: degrees
    above 1 of the engine's own that parity does not run ({field: value words}).

    Tensor parallelism runs over 2 ranks whatever its degree (the same shape: heads and MLP
    split, partial sums all-reduced, every rank of the group running the same capture; parity's
    tiny target has 4 heads); the pipeline runs with every stage the layout has (the engine's
    own partition of the real depth decides which layers each stage holds, so it is never
    shrunk); at most MAX_RANKS processes. Data-parallel replicas each run the same layout: one
    is run, and the rest is said. Data-parallel attention, expert parallelism and the engine's
    `unrun` degrees are not run: NotRunnable, parity's limit."""
    tp, pp = int(layout.get("tp") or 1), int(layout.get("pp") or 1)
    missing = [f"{what} ({fields.get(k, k)} {layout[k]})" for k, what in (("attention_dp", "data-parallel attention"),
                                                                          ("ep", "expert parallelism"))
               if int(layout.get(k) or 1) > 1]
    missing += [f"{name} {value}" for name, value in (unrun or {}).items()]
    if missing:
        raise NotRunnable(f"parity's multi-process capture does not run {' or '.join(missing)}, so the states the "
                          "draft is fed under this layout are not known")
    if tp > 1 and tp % 2:
        raise NotRunnable(f"parity's multi-process capture runs {fields.get('tp', 'tp')} {tp} over 2 ranks only for "
                          "an even degree, the shape 2 ranks stand for")
    tp_run = min(tp, 2)
    if tp_run * pp > MAX_RANKS:
        raise NotRunnable(f"parity's multi-process capture runs at most {MAX_RANKS} processes, and "
                          f"{fields.get('pp', 'pp')} {pp} with {fields.get('tp', 'tp')} {tp} (run as {tp_run}) "
                          f"needs {tp_run * pp}")
    stands_for, not_run = [], []
    if tp_run != tp:
        stands_for.append(f"{fields.get('tp', 'tp')} {tp} run as {tp_run} ranks (tensor parallel of the same shape; "
                          f"parity runs at most {MAX_RANKS} processes)")
        not_run.append(f"{fields.get('tp', 'tp')} {tp} itself: the capture ran tensor parallel over {tp_run} ranks, "
                       f"not {tp}")
    dp = int(layout.get("dp") or 1)
    if dp > 1:
        not_run.append(f"{fields.get('dp', 'dp')} {dp}: {dp} data-parallel replicas of this layout, each with its "
                       "own copy of the target; the capture ran one")
    if tp_run * pp == 1:
        return Plan(1, 1, tuple(stands_for), tuple(not_run)) if not_run else None
    return Plan(tp_run, pp, tuple(stands_for), tuple(not_run))


def _die_with_parent() -> None:
    """This process gets SIGKILL when the process that forked it ends (Linux's prctl
    PR_SET_PDEATHSIG); elsewhere nothing (the probe's process group is killed with it anyway)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


_partial: str | None = None  # in a rank: where `keep` writes what it has so far


def keep(so_far: Any) -> None:
    """In a rank: what it has so far, handed to the probe if it is then stopped or lost
    (run_ranks' {"lost": ..., "partial": so_far}). Nothing outside a rank."""
    if _partial is None:
        return
    with open(_partial + ".part", "wb") as f:
        pickle.dump(so_far, f)
    os.replace(_partial + ".part", _partial)


def run_ranks(n: int, job: Callable[[int], Any], timeout: float = RANK_TIMEOUT,
              stops: Callable[[Any], bool] = lambda result: False) -> list[dict]:
    """`job(rank)` in one forked process per rank; each rank's {"result": ...} or {"error":
    line, "traceback": [...]} (its job raised), or {"lost": why} (it ended without a result, or
    was killed; with "partial": what it last `keep`-ed). Every rank still running is killed when one ends without a result, raised, or
    returned a result `stops` says its peers cannot go on from (they would wait on it forever),
    and when `timeout` seconds have passed; the results' directory is removed on every exit path."""
    where = tempfile.mkdtemp(prefix="parity-ranks-")
    pids: dict[int, int] = {}
    running: dict[int, int] = {}
    try:
        for rank in range(n):
            pid = os.fork()
            if pid == 0:  # the rank: never returns
                code = 1
                try:
                    _die_with_parent()
                    global _partial
                    _partial = os.path.join(where, f"rank{rank}.partial")
                    try:
                        out = {"result": job(rank)}
                    except BaseException as exc:  # noqa: BLE001 - handed to the probe, which judges it
                        out = {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())}",
                               "traceback": traceback.format_exc().strip().splitlines()[-12:]}
                    path = os.path.join(where, f"rank{rank}.pickle")
                    with open(path + ".part", "wb") as f:
                        pickle.dump(out, f)
                    os.replace(path + ".part", path)
                    code = 0
                finally:
                    os._exit(code)
            pids[rank] = running[rank] = pid  # running: not reaped yet, the only ones ever killed
        return _collect(sorted(pids), running, where, timeout, stops)
    finally:
        for pid in running.values():  # an exit path out of the loop above (a fork failed, Ctrl-C)
            _kill(pid)
        shutil.rmtree(where, ignore_errors=True)


def _collect(ranks: list[int], running: dict[int, int], where: str, timeout: float,
             stops: Callable[[Any], bool]) -> list[dict]:
    """Reap every rank (`running` shrinks as each is reaped or killed), reading each result as it ends."""
    deadline = time.monotonic() + timeout
    out: dict[int, dict] = {}
    stopped: str | None = None  # why the ranks still running were stopped
    while running:
        for rank, pid in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == 0:
                continue
            del running[rank]
            path = os.path.join(where, f"rank{rank}.pickle")
            if not os.path.exists(path):
                out[rank] = {"lost": f"rank {rank} ended without a result ({_status(status)})",
                             **_partial_of(where, rank)}
                stopped = stopped or out[rank]["lost"]
                continue
            with open(path, "rb") as f:
                out[rank] = pickle.load(f)  # noqa: S301 - written by this probe's own fork, just now
            if "error" in out[rank] or ("result" in out[rank] and stops(out[rank]["result"])):
                stopped = stopped or f"rank {rank} stopped (its own record says why)"
        if running and stopped is None and time.monotonic() > deadline:
            stopped = f"no result after {timeout:.0f} s"
        if running and stopped is not None:  # the rest would wait on it forever
            for rank in list(running):
                _kill(running.pop(rank))
                out[rank] = {"lost": f"rank {rank} was stopped: {stopped}", **_partial_of(where, rank)}
        elif running:
            time.sleep(0.02)
    return [out[rank] for rank in ranks]


def _partial_of(where: str, rank: int) -> dict:
    """{"partial": what the rank kept} when it kept anything (`keep`), else {}."""
    path = os.path.join(where, f"rank{rank}.partial")
    if not os.path.exists(path):
        return {}
    with open(path, "rb") as f:
        return {"partial": pickle.load(f)}  # noqa: S301 - written by this probe's own fork


def _status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else f"status {status}"


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


__all__ = ["MAX_RANKS", "NotRunnable", "Plan", "keep", "plan", "run_ranks"]
