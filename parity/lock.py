"""Locked contracts: a snapshot of what a draft was trained on, checked against both sides.

A lock file (`contracts/NAME.json`) records the inputs (target config, served draft, dump
layout) and the training contract as extracted when it was written. `check_lock` extracts
BOTH sides afresh from the installed versions: the training contract must still equal
the lock (a speculators bump that changes the data path fails here), and the serving
contract must equal it too (an SGLang bump that changes the capture fails here).
`parity lock --update` rewrites the snapshot, like a snapshot test.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from . import files
from .contract import LaunchContract, Tap, TrainingContract
from .contract.models import TapName
from .extract.engines import DEFAULT as DEFAULT_ENGINE, BoundEngine, engine as bind_engine
from .extract.engines import names as engine_names
from .extract.trainers import DEFAULT as DEFAULT_TRAINER, BoundTrainer, trainer as bind_trainer
from .extract.trainers import names as trainer_names
from .gate import CheckResult, Difference, Verdict, check
from .inputs import MAX_SERVE_ARGS, Draft, InputError, Target, read_config, read_inputs, validation_line

LOCK_VERSION = 1


class Lock(BaseModel):
    """What a lock file holds. Paths are relative to the lock file's directory."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    parity_lock: int = Field(LOCK_VERSION, description="Lock format version: this parity reads "
                             f"format {LOCK_VERSION} only.")
    name: str = Field(description="A name for the draft/target pair.")
    target_config: str = Field(description="The target's config.json, relative to this file.")
    draft: str = Field(description="The draft directory as it is served, relative to this file.")
    dump_layout: tuple[TapName, ...] = Field(min_length=2, description="Which state each dumped slot holds, "
                                             "in slot order (the fc input and the loss target); written as "
                                             "canonical names.")
    engine: str = Field(DEFAULT_ENGINE, description="The serving engine checked against (an engine of "
                        "parity.extract.engines, e.g. 'sglang', 'vllm').")
    trainer: str = Field(DEFAULT_TRAINER, description="The training stack the draft was trained with "
                         "(a trainer folder of parity.extract.trainers, e.g. 'speculators', 'specforge').")
    trainer_release: str | None = Field(None, description="The trainer's release the lock was written "
                                        "under (as its training contract's provenance records it).")
    engine_release: str | None = Field(None, exclude_if=lambda v: v is None, description="The serving engine's "
                                       "release the lock was written under (the installed one, or the one its flag "
                                       "named); a check under another release says so. Absent in a lock written "
                                       "before the field.")
    trainer_ids: list[int] | None = Field(None, description="SpecForge: the run's own id override "
                                          "(model.aux_hidden_state_layer_ids); None: the draft's or its default.")
    trained: str | None = Field(None, exclude_if=lambda v: v is None, description="The draft as the trainer "
                                "wrote it (--trained), relative to this file: the training side is built from it "
                                "(SpecForge: its training output, read for the trained depth); absent: from the "
                                "served draft, as the trainer would load it.")
    training: TrainingContract = Field(description="The training contract when the lock was written.")
    serve_args: list[str] | None = Field(None, max_length=MAX_SERVE_ARGS, exclude_if=lambda v: v is None,
                                         description="The serve command's arguments (--serve-args), resolved "
                                         "again at every check.")
    launch: LaunchContract | None = Field(None, exclude_if=lambda v: v is None, description="The launch contract "
                                          "when the lock was written: a check fails on each field the installed "
                                          "engine now resolves otherwise (docs/launch.md).")

    @field_validator("parity_lock")
    @classmethod
    def _known_format(cls, v: int) -> int:
        if v > LOCK_VERSION:
            raise ValueError(f"format {v} was written by a newer parity; this one reads format "
                             f"{LOCK_VERSION}: upgrade parity")
        if v < 1:
            raise ValueError(f"format {v} does not exist (formats start at 1)")
        if v != LOCK_VERSION:
            raise ValueError(f"format {v} is not format {LOCK_VERSION}: re-lock with `parity lock --update`")
        return v

    @field_validator("engine", "trainer")
    @classmethod
    def _registered(cls, v: str, info) -> str:
        """An engine (a trainer) is any one registered: a folder of parity.extract, or register_engine's."""
        known = (engine_names if info.field_name == "engine" else trainer_names)()
        if v not in known:
            raise ValueError(f"unknown {info.field_name} {v!r}: this parity has {', '.join(known)}")
        return v

    def inputs(self, lock_path: Path) -> tuple[Target, Draft]:
        """The target and draft this lock names (relative to its own directory), read and checked."""
        base = Path(lock_path).parent.resolve()
        target, draft = read_inputs((base / self.target_config).resolve(), (base / self.draft).resolve())
        # shown to the engines under the paths the lock names, not their links' targets (parity.extract.named)
        return (replace(target, given=os.path.abspath((base / self.target_config).parent)),
                replace(draft, given=os.path.abspath(base / self.draft)))

    def trained_path(self, lock_path: Path) -> Path | None:
        """What this lock names as --trained (relative to its own directory); None when it names none."""
        if self.trained is None:
            return None
        return (Path(lock_path).parent.resolve() / self.trained).resolve()


def extract_for_lock(target: Target, draft: Draft, layout: Sequence[Tap] | None, trainer: BoundTrainer | None = None,
                     *, trainer_ids: list[int] | None = None, trained: Path | None = None) -> TrainingContract:
    """The training contract a lock holds, from `trainer` bound to its release (default: the
    default trainer, installed); a trainer that captures its states itself takes no layout, and
    its `trainer_ids` are the run's own; `trained`: what the trainer wrote (--trained,
    BoundTrainer.trained_side), else the served draft is read."""
    t = trainer or bind_trainer()
    side = t.trained_side(trained, draft)
    if t.captures_states:
        return t.training_contract(target, None, datagen_ids=trainer_ids, **side)
    return t.training_contract(target, list(layout), **side)


def lock_destination(path: Path, target_config: Path, draft: Path) -> Path:
    """Where a lock may be written: a file path (not a directory), never one of the inputs."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"lock file {path}: is a directory; give a file path such as {path}/NAME.json")
    if path.exists() and not path.is_file():
        raise InputError(f"lock file {path}: exists and is not a regular file")
    out = path.resolve()
    if out == Path(target_config).resolve() or Path(draft).resolve() in out.parents:
        raise InputError(f"lock file {path}: is one of the inputs (the target config or inside the "
                         "draft); write the lock elsewhere, e.g. contracts/NAME.json")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"lock file {path}: {parent} is a file, not a directory")
            break
    return path


def write_lock(path: Path, name: str, target: Target, draft: Draft, layout: Sequence[Tap] | None, *,
               trainer: BoundTrainer | None = None, trainer_ids: list[int] | None = None,
               serve_args: tuple[str, ...] | None = None, engine: BoundEngine | None = None,
               trained: Path | None = None) -> Lock:
    """Extract the training contract under `trainer` (bound to its release; default: the default
    trainer, installed) and, with `serve_args`, the launch contract under the lock's serving
    `engine` (default: the default engine, installed), and write the lock."""
    path = lock_destination(path, target.path, draft.path)
    base = path.parent.resolve()
    trainer, engine = trainer or bind_trainer(), engine or bind_engine()
    engine_release = engine.checked_release()  # none installed and none named: refused before anything runs
    launch = None
    if serve_args is not None:  # the serve command as the installed engine resolves it today (first: a
        launch = engine.extract_serving(target, draft, serve_args=serve_args).launch  # refusal builds no model)
        if launch is not None:  # the names shown are this machine's paths: a lock is portable
            launch = launch.model_copy(update={"names": {}})
    training = portable(extract_for_lock(target, draft, layout, trainer, trainer_ids=trainer_ids, trained=trained))
    lock = Lock(name=name, engine=engine.name, engine_release=engine_release, target_config=_rel(target.path, base),
                draft=_rel(draft.path, base),
                dump_layout=tuple(layout or training.dump_layout), training=training,
                trainer=trainer.name, trainer_release=training.provenance.version, trainer_ids=trainer_ids,
                serve_args=list(serve_args) if serve_args is not None else None, launch=launch,
                trained=_rel(trained, base) if trained is not None else None)
    write_atomically(path, lock.model_dump_json(indent=2) + "\n")
    return lock


# What a training contract's provenance says of this machine or this run, never written into a lock:
# the interpreter and environment it ran in, how the reply was got (a re-lock elsewhere gives the same file).
MACHINE_FIELDS = {"python": None, "source": None, "environment": None, "reply_cache": None}
MACHINE_DETAILS = ("dump_python",)


def portable(training: TrainingContract) -> TrainingContract:
    """`training` as a lock holds it: no interpreter or environment path, nothing of how it ran."""
    p = training.provenance
    details = {k: v for k, v in p.details.items() if k not in MACHINE_DETAILS}
    return training.model_copy(update={"provenance": p.model_copy(update={**MACHINE_FIELDS, "details": details})})


def write_atomically(path: Path, text: str) -> None:
    """Write beside `path`, then rename over it (parity.files): an interruption or a full disk
    leaves the old file (or none), never half a lock. The lock gets the umask's mode, as any
    file the user writes (it is committed and read by CI and teammates, often as another user);
    any OSError is bad input naming the path."""
    files.write_atomically(path, text, lambda why: InputError(f"lock file {path}: cannot be written ({why})"))


def _rel(p: Path, base: Path) -> str:
    return os.path.relpath(Path(p).resolve(), base)


def read_lock(path: Path) -> Lock:
    data = read_config(Path(path), "locked contract")
    try:
        return Lock.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"locked contract {path}: not a lock this parity can check: {validation_line(exc)}") from None


def check_lock(path: Path, engine: BoundEngine | None = None, trainer_release: str | None = None,
               verify: bool = True, *, serve_args: tuple[str, ...] | None = None) -> CheckResult:
    """Both sides, freshly extracted, against the lock; the training drift joins the differences.
    `engine`: the serving engine to check under, bound to its release (default: the lock's own
    engine, installed); `trainer_release`: the release of the lock's trainer to run."""
    path = Path(path)
    lock = read_lock(path)
    target, draft = lock.inputs(path)
    engine = engine or bind_engine(lock.engine)
    engine.preflight(target)  # an architecture the engine lacks: refused first
    if serve_args is None and lock.serve_args is not None:
        serve_args = tuple(lock.serve_args)
    engine.refuse_launch(target, draft, serve_args)  # serve arguments it refuses: before any model is built
    fresh = extract_for_lock(target, draft, lock.dump_layout, bind_trainer(lock.trainer, trainer_release),
                             trainer_ids=lock.trainer_ids, trained=lock.trained_path(path))
    result = check(lock.training, target, draft, engine, verify=verify, retrained=fresh, serve_args=serve_args)
    # the locked training contract, checked today where the trainer ran (its report says where)
    ran = {k: getattr(fresh.provenance, k) for k in ("source", "environment")}
    shown = lock.training.model_copy(update={"provenance": lock.training.provenance.model_copy(update=ran)})
    changed = releases_changed(lock, result.serving.provenance.version, fresh.provenance.version)
    result = result.model_copy(update={"training": shown, "releases": changed})
    moved = launch_moved(lock.launch, result.serving.launch)
    if not moved:
        return result
    verdict = result.verdict if result.verdict is Verdict.unservable else Verdict.drift
    return result.model_copy(update={"differences": [*result.differences, *moved], "verdict": verdict})


def releases_changed(lock: Lock, engine_release: str, trainer_release: str) -> str | None:
    """'locked under vllm 0.34.0, checked under vllm 0.33.0' when a side was checked under another
    release than the lock was written under (a side the lock does not record is not compared)."""
    was, now = [], []
    for name, locked, checked in ((lock.engine, lock.engine_release, engine_release),
                                  (lock.trainer, lock.trainer_release, trainer_release)):
        if locked is not None and locked != checked:
            was.append(f"{name} {locked}")
            now.append(f"{name} {checked}")
    return f"locked under {' and '.join(was)}, checked under {' and '.join(now)}" if was else None


def launch_moved(locked: LaunchContract | None, fresh: LaunchContract | None) -> list[Difference]:
    """Each launch field the installed engine now resolves otherwise than when the lock was
    written (a bump that changes the resolution fails the lock, defaults included)."""
    if locked is None or fresh is None:
        return []
    return [Difference(kind="lock", where=f"launch.{field}", training=was, serving=fresh.effective.get(field),
                       message=f"launch {field}: the lock resolved {was}, the installed engine now resolves "
                               f"{fresh.effective.get(field)}")
            for field, was in locked.effective.items() if fresh.effective.get(field) != was]
