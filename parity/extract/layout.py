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


def judged(exc: BaseException) -> dict[str, Any]:
    """An error a rank met, with what the probe needs to judge it in its own process: its one line,
    and whether it is a limit of parity's CPU harness or a failure of parity's own code."""
    from .child import harness_limit, one_line, parity_fault

    return {"line": one_line(exc), "limit": harness_limit(exc), "fault": parity_fault(exc),
            "type": type(exc).__name__}


def lockstep(count: int, setup: Callable[[], Any], configure: Callable[[Any, int], None],
             stage: Callable[[Any], dict], forward: Callable[[Any], Any], start_refuses: bool = False) -> dict:
    """A rank's record: `setup()` (its place in the groups, its part of the target: what the rest
    is handed; an error there is `fatal`), then its runs, in the same order on every rank (each
    stage's forward waits on the previous stage's): per run n of `count` (0: the start-up's own
    capture, then each candidate id list), `configure(built, n)`, this rank's `stage(built)` and
    `forward(built)` (what the last stage hands the draft, None on an earlier stage), appended to
    `record["runs"]` and kept (`keep`). An engine error setting a capture is recorded and the
    forward still runs, so that no peer waits forever; with `start_refuses`, one at run 0 ends
    the rank (`refused`: the start-up refuses, no server starts). A forward error on a stage
    before the last ends it (`stopped`: the later stages would wait for what it never sends)."""
    record: dict[str, Any] = {"runs": []}
    try:
        built = setup()
    except Exception as exc:  # noqa: BLE001 - judged by the probe (the engine's, parity's limit or its bug)
        record["fatal"] = judged(exc)
        return record
    for n in range(count):
        run: dict[str, Any] = {}
        try:
            configure(built, n)
        except Exception as exc:  # noqa: BLE001 - the engine's, judged by the probe
            run["configure_error"] = judged(exc)
            if n == 0 and start_refuses:
                run["stage"] = stage(built)
                record["runs"].append(run)
                record["refused"] = True
                return record
        run["stage"] = stage(built)
        try:
            run["aux"] = forward(built)
        except Exception as exc:  # noqa: BLE001
            run["forward_error"] = judged(exc)
            if not run["stage"]["is_last"]:
                record["runs"].append(run)
                record["stopped"] = True
                return record
        record["runs"].append(run)
        keep(record)  # what the probe reads of this rank if a peer's failure stops it later
    return record  # the groups end with the process (os._exit: gloo's teardown can hang)


def stops(record: Any) -> bool:
    """Whether a rank's record ends the capture for its peers (run_ranks' `stops`)."""
    return bool(record.get("fatal") or record.get("stopped") or record.get("refused"))


def records(ranked: list[dict]) -> list[dict]:
    """Each rank's record: its result, or what it kept when a peer's failure stopped it ({} for none)."""
    return [e.get("result") or e.get("partial") or {} for e in ranked]


def parity_stop(records_: list[dict], ranked: list[dict], package: str, version: str) -> dict | None:
    """What stopped the capture under the layout when it is parity's, as reply fields (None when
    nothing did, or the engine did): a limit of its CPU harness (HARNESS_LIMIT_KEY: exit 2) or a
    fault of its own code (noted for the reply: exit 3) that a rank met, or a rank lost for no
    reason of the engine's (no peer stopped on its own account: parity's limit)."""
    from .child import HARNESS_LIMIT_KEY, faults, limits

    for record in records_:
        for error in [record.get("fatal")] + [run.get(k) for run in record.get("runs", [])
                                              for k in ("configure_error", "forward_error")]:
            if error and error.get("fault"):
                faults.append(error["fault"])
                return {"error": f"{package} {version}: a rank of the layout's capture stopped: {error['line']}"}
            if error and error.get("limit"):
                limits.append(error["limit"])
                return {"error": error["limit"], HARNESS_LIMIT_KEY: error["limit"]}
    if not any(stops(r) for r in records_) and any("result" not in e for e in ranked):
        rank, entry = next((i, e) for i, e in enumerate(ranked) if "result" not in e)
        why = (f"parity's multi-process capture lost rank {rank} of {len(ranked)}: "
               f"{entry.get('lost') or entry.get('error')}")
        return {"error": why, HARNESS_LIMIT_KEY: why}
    return None


def candidate_runs(ranked: list[dict], count: int) -> list[tuple[dict | None, list[str]]]:
    """For each of `count` candidate runs (runs 1..count): the last stage's first tensor rank's run
    (None where it did not run it) and the errors any rank met in it."""
    out = []
    for i in range(1, count + 1):
        runs = [r["runs"][i] for r in records(ranked) if len(r.get("runs", ())) > i]
        last = next((run for run in runs if run["stage"]["is_last"] and run["stage"]["tp_rank"] == 0), None)
        out.append((last, [run[k]["line"] for run in runs for k in ("configure_error", "forward_error")
                           if run.get(k)]))
    return out


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


__all__ = ["MAX_RANKS", "NotRunnable", "Plan", "candidate_runs", "judged", "keep", "lockstep", "parity_stop", "plan", "records",
           "run_ranks", "stops"]
