"""Trainers: what each training stack feeds the draft, one folder per trainer.

Everything outside this folder (the CLI, the gate, locks, the matrix, replay, the pytest
plugin, export) reaches a trainer through `trainer(name, release)`: a `BoundTrainer`, the
trainer's package (whose module-level names implement `Trainer`) with the release it runs
under. A trainer declares its own command-line options (`add_options`, `release_from`,
`ids_from`). A trainer folder holds

    __init__.py          the extractor, its options, and the names of the `Trainer` interface
    probe.py             run in the trainer's own environment: its own data path on a marked sample
    forward_side.py      `parity forward`'s training path: the trainer's data path and draft model
    families/            one module per release family, each declaring `RELEASES` (a packaging
                         SpecifierSet) and `VERIFIED`; see parity.extract.families

so adding a trainer is adding a folder, and adding a release family is adding a file
(docs/adding-a-release.md).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .. import Bound, Registry
from ...inputs import Draft, TrainingRun

if TYPE_CHECKING:
    from ...contract import DatagenDump, Tap, TrainingContract
    from ...inputs import Target

DEFAULT = "speculators"  # the trainer a command uses when none is named

# The commands that ask for a trainer's release or options; each trainer adds its own to those it
# takes (`add_options(parser, command)`): "trainer" is where --trainer is (the options that only
# mean something with --trainer NAME), "sweep" the release range `parity sweep` runs (RANGE, for a
# trainer that declares SWEEP_FROM; when not given, its SWEEP_DEFAULT, else 'all'), the others are the
# commands of that name.
COMMANDS = ("contract", "trainer", "check", "lock", "replay", "matrix", "can-i-deploy", "sweep")


@runtime_checkable
class Trainer(Protocol):
    """What parity needs from a training stack. Every release-specific line lives below this
    boundary, in the trainer's release-family modules (`<trainer>/families/`)."""

    NAME: str
    """The trainer's name as `trainer(name)` and contracts spell it; also the package whose code runs."""

    FLAG: str
    """The command-line flag that names its release, e.g. '--speculators'."""

    TITLE: str
    """Its name in a sentence, e.g. 'SpecForge'."""

    CAPTURES_STATES: bool
    """It captures the target's states itself: it takes no dump description (--dump-layout)."""

    IDS_FLAG: str | None
    """The flag of the run's own id override, for a trainer that captures its states (else None)."""

    OWN_FLAGS: tuple[str, ...]
    """The flags that mean something only with `--trainer NAME` (refused under another trainer)."""

    DATAGEN_ENGINE: str | None
    """The engine whose data generation makes the dump it trains on, found by running it for
    --datagen-ids (None: no dump)."""

    ERRORS: tuple[type[Exception], ...]
    """Its bad-input and unsupported-case errors (exit 2, one line)."""

    FORWARD_MODULE: str
    """The module `parity forward` runs (`python -m`, JSON request on stdin) for the training path."""

    FORWARD_REPLY: type
    """The typed reply of that module (a parity.contract.reply.ForwardReply), which the child
    validates before it sends it and `parity forward` reads."""

    def training_contract(self, target: "Target", dump_layout: "list[Tap] | None" = None, *,
                          datagen_ids: list[int] | None = None, datagen_convention: "Convention | None" = None,
                          draft: "Draft | None" = None, release: str | None = None,
                          data_path: str | None = None,
                          datagen_dump: "DatagenDump | None" = None,
                          trained: bool = False) -> "TrainingContract":
        """The training contract, found by running the trainer's own code on `target`.

        The dump layout comes from `dump_layout`, else `datagen_dump` (the layout found by
        running the data-generation engine, parity.extract.engines.vllm.extract_dump), else
        `datagen_ids` read in `datagen_convention` (a typed rule, labelled so: the caller resolves
        its name, parity.extract.numbering.convention, as the table sits above the sides), else the
        draft's own ids. `release` None runs this
        interpreter's installed trainer, else the environment pinning that release.
        `data_path` picks a data path other than the release's default. The target and the
        draft come read and checked (parity.inputs); a trainer that runs the target itself
        (SpecForge captures its states) builds it from `target.config`, and its `datagen_ids`
        are the run's own ids, given to it as is."""

    # Optional: CONVENTION (a parity.conventions.Convention): its layer-id numbering as a typed rule,
    # listed by parity.extract.numbering.conventions().
    # Optional: TRAINED_RUN (bool, default False). True for a trainer whose --trained is its
    # training output (parity.inputs.TrainingRun, read by its own code in its probe, beside the
    # served draft), not a draft directory in its own format: `training_contract` then takes
    # `trained_run` (BoundTrainer.trained_side).
    # Optional: data_path_from(args) -> str | None, for a trainer that captures its states: the data
    # path its own flag picks (NeMo Automodel's offline cache), passed as `data_path`.
    # Optional: SWEEP_FROM (str): the first release `parity sweep` covers under 'all' (none declared:
    # the sweep leaves it out); SWEEP_DEFAULT ('all' or 'none', default 'all'): what it sweeps when
    # its RANGE is not given. A trainer with CAPTURES_STATES is swept over the capture cases (the
    # run's ids, parity.sweep.cases.CAPTURE_CASES), any other over the training cases (a dump's layout).

    def add_options(self, parser: Any, command: str, /) -> None:
        """Add this trainer's options to `command`'s parser (one of COMMANDS), if it takes any."""

    def release_from(self, args: argparse.Namespace, /) -> str | None:
        """The release of this trainer the parsed command line names (None: none named)."""

    def ids_from(self, args: argparse.Namespace, /) -> list[int] | None:
        """The run's own id override the parsed command line gives (IDS_FLAG), or None."""

    def read_draft(self, draft_dir: Path) -> Any:
        """What a draft directory says (ids, graph flags, vocab mapping), read the way this trainer reads it."""

    def is_trained_draft(self, config: dict) -> bool:
        """Whether a draft's config.json object is in this trainer's own (as-trained) format."""


_REGISTRY = Registry(sys.modules[__name__], "trainer", Trainer)


@dataclass(frozen=True)
class BoundTrainer(Bound):
    """A trainer (`impl`, implementing `Trainer`) and the release it runs under (None: the
    installed one, or the trainer's default)."""

    @property
    def ERRORS(self) -> tuple[type[Exception], ...]:  # noqa: N802
        return self.impl.ERRORS

    @property
    def captures_states(self) -> bool:
        return self.impl.CAPTURES_STATES

    @property
    def probe(self) -> str:
        """The module its probe runs (`python -m`) in the release's environment."""
        return self.impl.PROBE_MODULE

    def training_contract(self, target: "Target", dump_layout: "list[Tap] | None" = None,
                          **kwargs: Any) -> "TrainingContract":
        """`Trainer.training_contract` under this release."""
        return self.recorded(lambda: self.impl.training_contract(target, dump_layout, release=self.release, **kwargs))

    def read_draft(self, draft_dir: Path) -> Any:
        return self.impl.read_draft(draft_dir)

    def is_trained_draft(self, config: dict) -> bool:
        return self.impl.is_trained_draft(config)

    def trained_side(self, trained: Path | str | None, draft: Draft | None) -> dict[str, Any]:
        """`training_contract`'s draft keywords for --trained `trained` (None: the served `draft`,
        as the trainer would load it): the checkpoint directory as the trainer wrote it, read as
        the draft; for a trainer with TRAINED_RUN, its training output beside the served draft."""
        if trained is None:
            return {"draft": draft}
        if getattr(self.impl, "TRAINED_RUN", False):
            return {"draft": draft, "trained_run": TrainingRun.read(trained)}
        return {"draft": Draft.read(trained), "trained": True}


def names() -> list[str]:
    """Every trainer: a folder here, or registered."""
    return _REGISTRY.names()


def trainer(name: str = DEFAULT, release: str | None = None) -> BoundTrainer:
    """The trainer called `name`, bound to `release` (None: the installed one); an unknown name
    is a one-line InputError."""
    return BoundTrainer(_REGISTRY.get(name), release)


def register_trainer(impl: Any) -> Any:
    """Make `impl` (a module or object whose names implement `Trainer`) a trainer under its NAME."""
    return _REGISTRY.register(impl)


unregister_trainer = _REGISTRY.unregister
add_options = _REGISTRY.add_options  # every trainer's options for a command (one of COMMANDS)


def trainers() -> list[BoundTrainer]:
    """Every trainer, unbound to a release, in name order."""
    return [trainer(n) for n in names()]
