"""`build_matrix`: one draft's contract under every installed release of both sides."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Sequence

from ..contract import Tap
from ..extract.engines import BoundEngine, engine as bind_engine
from ..extract.trainers import BoundTrainer, trainer as bind_trainer
from .cells import matrix_rows
from .rows import Matrix
from .schedule import Inputs, run_extractions
from ..inputs import InputError, check_ids, read_inputs
from ..lock import read_lock


def build_matrix(target_config: Path | str | None = None, draft: Path | str | None = None,
                 dump_layout: Sequence[Tap | str] | None = None, *,
                 contract: Path | str | None = None, serving: list[str] | None = None,
                 trainer_releases: list[str] | None = None, workers: int | None = None,
                 verify: bool = True, trainer: BoundTrainer | None = None,
                 trainer_ids: list[int] | None = None, engine: BoundEngine | None = None,
                 serve_args: tuple[str, ...] | None = None) -> Matrix:
    """Extract both sides under every (or each named) installed release; see the package doc.

    `engine`: the serving engine (default: the default engine) whose releases (`serving`: which
    of them) are the serving rows.
    `dump_layout`: the dump's slots (taps, or their canonical names).
    `contract`: a lock file; its inputs replace the first three and serving is judged against
    the locked training contract (each speculators release must still reproduce it).
    `trainer`: the training stack (default: the default trainer) whose releases are the training
    rows (`trainer_releases` names which of its releases); a lock names its own trainer.
    `serve_args`: the serve command's arguments (parity.inputs.parse_serve_args), resolved by each
    serving release's own code (the launch contract, docs/launch.md); default: a lock's stored ones."""

    t0 = time.monotonic()
    engine = engine or bind_engine()
    inputs = _inputs(target_config, draft, dump_layout, contract, trainer or bind_trainer(), trainer_ids, engine,
                     serve_args)
    model = inputs.target.model
    srels, trels = engine.releases(serving), inputs.trainer.releases(trainer_releases)
    if not srels or not trels:
        raise InputError(f"envs.toml declares no {engine.name if not srels else inputs.trainer.name} release")

    done = run_extractions(inputs, trels, srels, workers=workers or max(1, min(os.cpu_count() or 1, 4)),
                           verify=verify, t0=t0)

    training, serving = matrix_rows(trels, srels, done, inputs.locked, inputs.locked_launch)
    return Matrix(target=model.architecture, num_layers=model.num_hidden_layers, draft=str(inputs.draft.path),
                  dump_layout=[t.name for t in inputs.dump_layout or []], trainer=inputs.trainer.name, engine=engine.name,
                  contract=str(contract) if contract else None,
                  serve_args=list(inputs.serve_args) if inputs.serve_args is not None else None,
                  training=training, serving=serving, wall_s=time.monotonic() - t0, timings=done.timings)


def _inputs(target_config, draft, dump_layout, contract, trainer: BoundTrainer, trainer_ids,
            engine: BoundEngine, serve_args: tuple[str, ...] | None = None) -> Inputs:
    """The target, draft and dump layout given, or a lock's (then serving is judged against it,
    and, unless `serve_args` replace them, each release resolves the lock's serve arguments and
    is judged against the launch contract they resolved to when the lock was written)."""

    locked = locked_launch = None
    if contract is not None:
        lock = read_lock(Path(contract))
        target, given = lock.inputs(Path(contract))
        dump_layout, locked = list(lock.dump_layout), lock.training
        trainer, trainer_ids = bind_trainer(lock.trainer), lock.trainer_ids
        if serve_args is None and lock.serve_args is not None:
            serve_args, locked_launch = tuple(lock.serve_args), lock.launch
    elif target_config is None or draft is None:
        raise InputError("the matrix needs the target config and the draft (--target-config/--draft) "
                         "or a locked contract (--contract)")
    if not dump_layout and not trainer.captures_states:
        raise InputError("the matrix needs the dump layout (--dump-layout) or a locked contract (--contract)")
    if contract is None:
        target, given = read_inputs(target_config, draft)
        check_ids(target, given)
    layout = [Tap.parse(t) if isinstance(t, str) else t for t in dump_layout] if dump_layout else None
    return Inputs(target=target, draft=given, dump_layout=layout,
                  locked=locked, trainer=trainer, trainer_ids=trainer_ids, engine=engine,
                  serve_args=serve_args, locked_launch=locked_launch)
