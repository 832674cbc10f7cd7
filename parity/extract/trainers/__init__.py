"""Trainers: what each training stack feeds the draft, one folder per trainer.

Everything outside this folder (the CLI, the gate, locks, the matrix, replay, the pytest
plugin, export) reaches a trainer through `trainer(name)`: the trainer's package, whose
module-level names implement `Trainer`. A trainer folder holds

    __init__.py          the extractor, and the names of the `Trainer` interface
    probe.py             run in the trainer's own environment: its own data path on a marked sample
    forward_side.py      `parity forward`'s training path: the trainer's data path and draft model
    families/            one module per release family, each declaring `RELEASES` (a packaging
                         SpecifierSet) and `VERIFIED`; see parity.extract.families

so adding a trainer is adding a folder, and adding a release family is adding a file
(docs/adding-a-release.md).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .. import folders, side

if TYPE_CHECKING:
    from ...contract import DatagenDump, Tap, TrainingContract
    from ...inputs import Draft, Target

DEFAULT = "speculators"  # the trainer a command uses when none is named


@runtime_checkable
class Trainer(Protocol):
    """What parity needs from a training stack. Every release-specific line lives below this
    boundary, in the trainer's release-family modules (`<trainer>/families/`)."""

    NAME: str
    """The trainer's name as `trainer(name)` and contracts spell it; also the package whose code runs."""

    ERRORS: tuple[type[Exception], ...]
    """Its bad-input and unsupported-case errors (exit 2, one line)."""

    FORWARD_MODULE: str
    """The module `parity forward` runs (`python -m`, JSON request on stdin) for the training path."""

    def training_contract(self, target: "Target", dump_layout: "list[Tap] | None" = None, *,
                          datagen_ids: list[int] | None = None, datagen_convention: str | None = None,
                          draft: "Draft | None" = None, release: str | None = None,
                          data_path: str | None = None,
                          datagen_dump: "DatagenDump | None" = None,
                          trained: bool = False) -> "TrainingContract":
        """The training contract, found by running the trainer's own code on `target`.

        The dump layout comes from `dump_layout`, else `datagen_dump` (the layout found by
        running the data-generation engine, parity.extract.engines.vllm.extract_dump), else
        `datagen_ids` read in `datagen_convention` (a typed rule, labelled so), else the
        draft's own ids. `release` None runs this
        interpreter's installed trainer, else the environment pinning that release.
        `data_path` picks a data path other than the release's default. The target and the
        draft come read and checked (parity.inputs); a trainer that runs the target itself
        (SpecForge captures its states) builds it from `target.config`, and its `datagen_ids`
        are the run's own ids, given to it as is."""

    def read_draft(self, draft_dir: Path) -> Any:
        """What a draft directory says (ids, graph flags, vocab mapping), read the way this trainer reads it."""

    def is_trained_draft(self, config: dict) -> bool:
        """Whether a draft's config.json object is in this trainer's own (as-trained) format."""


def names() -> list[str]:
    """Every trainer folder here."""
    return folders(sys.modules[__name__])


def trainer(name: str = DEFAULT) -> Trainer:
    """The trainer called `name`; an unknown name is a one-line InputError."""
    return side(sys.modules[__name__], "trainer", name, Trainer)  # type: ignore[return-value]
