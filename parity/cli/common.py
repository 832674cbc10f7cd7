"""What several commands share: the options every engine and trainer adds, and reading the
target, the draft, the engine and the trainer a parsed command line names.

No command here branches on an engine's or a trainer's name: each one's options and rules come
from its own package (parity.extract.engines, parity.extract.trainers), reached through the
registry.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ..extract import engines, numbering, trainers
from ..extract.engines import BoundEngine
from ..extract.trainers import BoundTrainer
from ..inputs import Draft, Target, parse_dump

if TYPE_CHECKING:
    from ..contract import TrainingContract
    from ..inputs import Draft, Target


class UsageError(Exception):
    """A command line that cannot be run as given (exit 2, one line, no JSON)."""


def usage(msg: str) -> UsageError:
    return UsageError(msg)


# -- options ----------------------------------------------------------------------------------


def add_dump_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dump-layout", metavar="TAPS",
                   help="which state each dumped slot holds, e.g. h0,h3,h31,h59 (a manifest)")
    p.add_argument("--datagen-ids", metavar="IDS",
                   help="instead of --dump-layout: the data-generation layer ids, e.g. 2,16,29, or "
                        "`default` (the launch script's); the dump is found by running vLLM's capture")
    p.add_argument("--datagen-convention", default=None,
                   help="read --datagen-ids by this typed rule instead of running vLLM (labelled "
                        "'typed rule, not run'), e.g. speculators-datagen; see `parity conventions`")
    engines.add_options(p, "datagen")


def add_trainer_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trainer", default=trainers.DEFAULT, choices=trainers.names(),
                   help=f"the training stack the draft was trained with (default: {trainers.DEFAULT})")
    trainers.add_options(p, "trainer")


def add_engine_arg(p: argparse.ArgumentParser, default: str | None = engines.DEFAULT) -> None:
    """--engine; `default` None: the engine a lock names, else the default one (resolved later)."""
    p.add_argument("--engine", default=default, choices=engines.names(),
                   help=f"the serving engine (default {engines.DEFAULT})")


def add_trained(p) -> None:
    p.add_argument("--trained", type=Path, metavar="DIR",
                   help="the draft as the trainer wrote it (its checkpoint directory): the training side is "
                        "built from it; without it, from --draft as the trainer would load it (docs/built-draft.md); "
                        "--trainer specforge: its training output (the run's output_dir or a checkpoint), read for "
                        "the depth it trained the draft to (docs/launch.md)")


def add_serve_args(p) -> None:
    p.add_argument("--serve-args", metavar="'ARGS' | @FILE",
                   help="the serve command's arguments, as given after `python -m sglang.launch_server`: resolved "
                        "by the engine's own parser and resolution; a value it changes is a drift (docs/launch.md)")


# -- reading the command line ------------------------------------------------------------------


def engine_from(args, name: str | None = None) -> BoundEngine:
    """The engine the command serves with (`name`, else --engine, else the default), bound to the
    release its flag names. Another engine's release flag is refused, never silently ignored."""
    chosen = engines.engine(name or getattr(args, "engine", None) or engines.DEFAULT)
    why = engines.foreign_release(args, chosen)
    if why:
        raise usage(why)
    bound = chosen.at(chosen.impl.release_from(args))
    bound.checked_release()  # none named and none installed: one line now, before anything runs
    return bound


def trainer_from(args, name: str | None = None) -> BoundTrainer:
    """The trainer the command is about (`name`, else --trainer, else the default), bound to the
    release its flag names."""
    chosen = trainers.trainer(name or getattr(args, "trainer", None) or trainers.DEFAULT)
    bound = chosen.at(chosen.impl.release_from(args))
    bound.checked_release()  # none named and none installed: one line now, before anything runs
    return bound


def refuse_other_trainers(args, chosen: BoundTrainer, ids_only: bool = False) -> None:
    """Refuse the options that mean something only with another trainer (its run ids, with
    `ids_only`), never ignore them."""
    for other in trainers.trainers():
        if other.name == chosen.name:
            continue
        flags = [f for f in ((other.impl.IDS_FLAG,) if ids_only else other.impl.OWN_FLAGS) if f]
        if any(getattr(args, _dest(f), None) for f in flags):
            raise usage(f"{'/'.join(flags)} {'needs' if len(flags) == 1 else 'need'} --trainer {other.name}")


def capturing_trainers() -> str:
    """The trainers that take no dump description, as a user would name them: '--trainer X'."""
    return " or ".join(f"--trainer {t.name}" for t in trainers.trainers() if t.captures_states)


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def dump(args):
    """The dump description the command was given (--dump-layout, or --datagen-ids with its
    convention), parsed once."""

    return parse_dump(getattr(args, "dump_layout", None), getattr(args, "datagen_ids", None),
                      getattr(args, "datagen_convention", None))


def given(args) -> "tuple[Target, Draft | None]":
    """The target and (when the command names one) the draft, each read and checked once: every
    step below gets these objects, never the paths."""

    return Target.read(args.target_config), (Draft.read(args.draft) if getattr(args, "draft", None) else None)


def training(args, target: "Target", draft: "Draft | None") -> "TrainingContract":
    """The training contract the command line names: its trainer, release and dump description."""
    t = trainer_from(args)
    side = t.trained_side(getattr(args, "trained", None), draft)  # --trained: as the trainer wrote it
    if t.captures_states:
        if args.dump_layout or args.datagen_ids:
            raise usage(f"--trainer {t.name} captures the states itself: drop --dump-layout/--datagen-ids "
                        f"({t.impl.IDS_FLAG} gives the run's ids)")
        path = getattr(t.impl, "data_path_from", lambda _: None)(args)  # its own data path flag, if it has one
        return t.training_contract(target, None, datagen_ids=t.impl.ids_from(args),
                                   **side, **({"data_path": path} if path is not None else {}))
    refuse_other_trainers(args, t)
    d = dump(args)
    run = {}
    if d.runs_datagen:  # the dump the trainer's data generation makes, found by running its engine
        if t.impl.DATAGEN_ENGINE is None:
            raise usage(f"--trainer {t.name} runs no data generation: give --dump-layout")
        maker = engines.engine(t.impl.DATAGEN_ENGINE)
        run["datagen_dump"] = maker.at(maker.impl.release_from(args)).extract_dump(target, d.datagen_ids)
    convention = numbering.convention(d.convention) if d.convention is not None else None
    return t.training_contract(target, d.layout, datagen_ids=d.datagen_ids, datagen_convention=convention,
                               **side, **run)
