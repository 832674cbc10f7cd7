"""Running one matrix's extractions, several at a time, each in its release's environment.

The training extraction of every trainer release starts at once. Against a lock the
serving checks (one per SGLang release) start at once too; otherwise each training
contract, when it arrives, starts one serving check per SGLang release, unless an
equivalent contract (one the gate would judge identically) already did. Ctrl-C starts
nothing more and ends what runs.
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from contextlib import nullcontext
from dataclasses import dataclass, field

from ..contract import LaunchContract, Tap, TrainingContract
from ..errors import CannotExtract, InternalError, UserError
from ..extract.engines import BoundEngine
from ..extract.trainers import BoundTrainer
from ..inputs import Draft, Target
from ..releases import Release
from ..workspace import kill_children
from .rows import CANNOT
from ..gate import check
from ..lock import extract_for_lock

# Extraction subprocesses running at once in this process, across concurrent matrices: more
# than the CPUs only makes each slower (and multiplies memory).
_SLOTS = threading.BoundedSemaphore(max(1, os.cpu_count() or 1))

# One training extraction per release at a time in this process: concurrent matrices (a test
# file, a bench) then reuse the first one's probe reply (parity.extract.trainers.speculators caches it)
# instead of running the same probe side by side.
_TRAINING_LOCKS: dict[str, threading.Lock] = {}
_TRAINING_LOCKS_GUARD = threading.Lock()


@dataclass(frozen=True)
class Inputs:
    """What every cell is extracted from."""

    target: Target  # read and checked once, by build_matrix
    draft: Draft
    dump_layout: list[Tap] | None  # None: a trainer that captures its states itself (SpecForge)
    locked: TrainingContract | None  # a lock's training contract: serving is judged against it
    trainer: BoundTrainer  # the trainer of the training rows (each row binds its release)
    engine: BoundEngine  # the serving engine of the serving rows (each row binds its release)
    trainer_ids: list[int] | None = None  # a trainer that captures its states: the run's own id override
    serve_args: tuple[str, ...] | None = None  # the serve command's arguments, resolved under each serving release
    locked_launch: LaunchContract | None = None  # the lock's launch contract, when its own arguments are used


@dataclass
class Extractions:
    """What the extractions returned: a training contract (or why not: a line, or the failure
    of parity's own code met) per trainer release, and a check result (or the error it
    raised) per serving check."""

    training: dict[str, TrainingContract | str | InternalError] = field(default_factory=dict)
    checks: dict[tuple[str, str], tuple] = field(default_factory=dict)
    timings: list[dict] = field(default_factory=list)  # each task: what, start_s, seconds

    def check(self, engine_release: str, training: TrainingContract) -> tuple:
        """(CheckResult or None, the error it raised or None) for `training` under `engine_release`."""
        return self.checks[(engine_release, training_key(training))]


def training_key(c: TrainingContract) -> str:
    """Training contracts that the gate would judge identically share one serving check."""
    d = json.loads(c.to_json())
    for k in ("provenance", "findings"):
        d.pop(k, None)
    d["errors"] = sorted(f.message for f in c.findings if f.severity == "error")
    return json.dumps(d, sort_keys=True)


def message_line(exc: BaseException) -> str:
    """The first line of the error's message (its type's name when it has none)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def run_extractions(inputs: Inputs, trainer_releases: list[Release], engine_releases: list[Release], *, workers: int,
                    verify: bool, t0: float) -> Extractions:
    """Every training extraction and every serving check the matrix needs (timed from `t0`,
    a `time.monotonic()` reading)."""
    out = Extractions()
    clock = _Clock(t0, out.timings)
    pending: dict[tuple[str, str], Future] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:  # one torch thread each: envs.run_module
        try:
            if inputs.locked is not None:  # serving does not wait for training
                _start_checks(pool, clock, pending, engine_releases, inputs, inputs.locked, verify)
            started = {pool.submit(clock.timed, f"training under {r.package} {r.version}", _extract_training,
                                   r, inputs, slot=False): r for r in trainer_releases}
            for done in as_completed(started):
                contract = out.training[started[done].version] = done.result()
                if inputs.locked is None and isinstance(contract, TrainingContract):
                    _start_checks(pool, clock, pending, engine_releases, inputs, contract, verify)
            out.checks = {k: f.result() for k, f in pending.items()}
        except BaseException:  # Ctrl-C: start nothing more, end what runs (the pool waits for it)
            pool.shutdown(wait=False, cancel_futures=True)
            kill_children()
            raise
    out.timings.sort(key=lambda t: t["start_s"])
    return out


def _start_checks(pool: ThreadPoolExecutor, clock: "_Clock", pending: dict, engine_releases: list[Release],
                  inputs: Inputs, training: TrainingContract, verify: bool) -> None:
    """One serving check per engine release for `training`, unless an equivalent one started."""
    key = training_key(training)
    if any(k == key for _, k in pending):
        return
    for r in engine_releases:
        pending[(r.version, key)] = pool.submit(clock.timed, f"serving check under {r.package} {r.version}",
                                                _check, r, inputs, training, verify)


def _extract_training(release: Release, inputs: Inputs) -> TrainingContract | str | InternalError:
    """The training contract under `release`, or the 'cannot extract under' line saying why not,
    or the failure of parity's own code that stopped it (that row's error, not the matrix's)."""

    if release.problem:
        return f"{CANNOT} {release.package} {release.version}: {release.problem}"
    try:
        with _training_lock(release.version), _SLOTS:  # the lock first: a waiter holds no CPU slot
            return extract_for_lock(inputs.target, inputs.draft, inputs.dump_layout, inputs.trainer.at(release.bound),
                                    trainer_ids=inputs.trainer_ids)
    except CannotExtract as exc:
        return message_line(exc)
    except UserError as exc:
        return f"{CANNOT} {release.package} {release.version}: {message_line(exc)}"
    except InternalError as exc:
        return exc


def _check(release: Release, inputs: Inputs, training: TrainingContract, verify: bool) -> tuple:
    """The gate's check under `release` (with the serve arguments, the launch contract too):
    (result, None), or (None, the error it raised: LaunchRefused when the release does not
    resolve the serve arguments; InternalError when parity's own code failed, that cell's error)."""

    if release.problem:
        return None, None
    try:
        return check(training, inputs.target, inputs.draft, inputs.engine.at(release.bound), verify=verify,
                     serve_args=inputs.serve_args), None
    except (UserError, InternalError) as exc:
        return None, exc


def _training_lock(version: str) -> threading.Lock:
    with _TRAINING_LOCKS_GUARD:
        return _TRAINING_LOCKS.setdefault(version, threading.Lock())


class _Clock:
    """Times each task from the start of the matrix; serving checks hold a CPU slot while they run."""

    def __init__(self, t0: float, timings: list[dict]):
        self.t0, self.timings = t0, timings

    def timed(self, what: str, fn, *args, slot: bool = True):
        with _SLOTS if slot else nullcontext():
            start = time.monotonic()
            try:
                return fn(*args)
            finally:
                self.timings.append({"what": what, "start_s": round(start - self.t0, 2),
                                     "seconds": round(time.monotonic() - start, 2)})
