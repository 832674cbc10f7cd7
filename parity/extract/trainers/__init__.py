"""Trainers: what each training stack feeds the draft, one folder per trainer.

Everything outside this folder (the CLI, the gate, locks, the matrix, replay, the pytest
plugin) reaches a trainer through `trainer(name)`, which returns the `Trainer` its folder
exports as `TRAINER`. A trainer folder holds

    __init__.py          the extractor, and `TRAINER`: this interface, implemented
    probe.py             run in the trainer's own environment: its own data path on a marked sample
    <name>_<family>.py   one module per release family, each declaring `RELEASES` (a packaging
                         SpecifierSet) and `VERIFIED`; see parity.extract.families

so adding a trainer is adding a folder, and adding a release family is adding a file
(docs/adding-a-release.md).
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ...contract import TargetModel, Tap, TrainingContract


class Trainer(Protocol):
    """What the rest of parity needs from one training stack."""

    name: str
    """The trainer's name, as `trainer(name)` and the CLI know it; also the package whose code runs."""

    errors: tuple[type[Exception], ...]
    """Its bad-input and unsupported-case errors (exit 2, one line)."""

    def training_contract(self, target: TargetModel, dump_layout: list[Tap] | None = None, *,
                          datagen_ids: list[int] | None = None, datagen_convention: str | None = None,
                          draft_dir: Path | None = None, release: str | None = None,
                          data_path: str | None = None) -> TrainingContract:
        """The training contract, found by running the trainer's own code on `target`.

        The dump layout comes from `dump_layout`, else `datagen_ids` read in
        `datagen_convention`, else the draft's own ids. `release` None runs this
        interpreter's installed trainer, else the environment pinning that release.
        `data_path` picks a data path other than the release's default."""

    def read_draft(self, draft_dir: Path) -> Any:
        """What a draft directory in this trainer's format says (ids, graph flags, vocab mapping)."""

    def is_trained_draft(self, config: dict) -> bool:
        """Whether a draft's config.json object is in this trainer's own (as-trained) format."""


DEFAULT = "speculators"  # the trainer a command uses when none is named


def names() -> list[str]:
    """Every trainer: the folders beside this file."""
    return sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.ispkg)


def trainer(name: str) -> Trainer:
    """The trainer called `name`; InputError (one line) for a trainer parity does not have."""
    if name not in names():
        from ...inputs import InputError

        raise InputError(f"unknown trainer {name!r}; parity has: {', '.join(names())}")
    return importlib.import_module(f"{__name__}.{name}").TRAINER
