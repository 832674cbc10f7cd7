"""speculators 0.9 (0.9.x): where this family keeps what the training probe runs.

What differs from the 0.7 family (every other step of the probe is the same code):
- one data path: the arrow directory read by `ArrowDataset` (the v1 sample and
  `standardize_data_v1` are gone, and with them the `legacy_data` switch);
- no train-split augmentation (no `noise_transforms`, `ArrowDataset` takes no transform);
- the hidden-states transfer is the separate hs-connectors package (`hs_connectors`), with
  file, fp8 and mooncake backends: the file and FP8 transfers are run (FP8 files written
  with hs-connectors' own quantizer), mooncake needs its store and is skipped;
- DFlash drafts (0.8 on, with the 0.8 family): the training CLI is installed
  (`speculators.train.cli.main`), so the preprocess a `--speculator-type dflash` run gets is read by
  running its own two statements (`preprocess_fns = {...}` and `preprocess = preprocess_fns.get(
  args.speculator_type)`) with the type dflash (`dflash_preprocess`): none in 0.8.1 and 0.9.0.

Imports nothing from speculators at module level: `family_for` imports every family
module in whichever speculators environment the probe runs in.
"""

from __future__ import annotations

from argparse import Namespace
from typing import TYPE_CHECKING, Any

import torch
from packaging.specifiers import SpecifierSet

from ....run_until import local_value

if TYPE_CHECKING:
    from . import Run

RELEASES = SpecifierSet("==0.9.*")
VERIFIED = ("0.9.0",)

ARROW_PATH = "speculators.train.data.ArrowDataset._get_raw_data"
SHIFT_BATCH = "speculators.models.eagle3.data.shift_batch"
DRAFT_MODEL = "speculators.models.eagle3.core.Eagle3DraftModel"
DRAFT_CONFIG = "speculators.models.eagle3.config.Eagle3SpeculatorConfig"
HS_CONNECTORS = "hs_connectors"
DFLASH_MODEL = "speculators.models.dflash.core.DFlashDraftModel"
DFLASH_CONFIG = "speculators.models.dflash.config.DFlashSpeculatorConfig"
# Its reader of the served (z-lab) DFlash form: the block size and mask token a DFlash run is built with.
DFLASH_CONVERTER = "speculators.convert.dflash.converter.DFlashConverter"
TRAIN_CLI = "speculators.train.cli.main"
# What must be in a release outside every range for this family to run it (families.place).
REQUIRES = (ARROW_PATH, SHIFT_BATCH, f"{HS_CONNECTORS}.transfer.HiddenStatesBackend")
# ... and what must NOT be: a train-split augmentation this family does not apply.
ABSENT = ("speculators.train.noise_transforms.AddUniformNoise",)


def dflash_preprocess(run: "Run") -> tuple[Any, str]:
    """(preprocess, where it came from) for a DFlash run: the training CLI's own choice, its two
    statements run alone with `args.speculator_type` dflash (parity.extract.run_until.local_value)."""
    main = run.look_up(TRAIN_CLI)
    if main is None:
        raise LookupError(f"no {TRAIN_CLI} in this release to read a DFlash run's preprocess from")
    fns = local_value(main, "preprocess_fns")
    chosen = local_value(main, "preprocess", preprocess_fns=fns, args=Namespace(speculator_type="dflash"))
    name = f"{chosen.__module__}.{chosen.__qualname__}" if chosen is not None else "none"
    return chosen, f"{name} (read from {TRAIN_CLI}: preprocess_fns.get('dflash'))"


def train_transform(run: "Run") -> tuple[Any, str | None]:
    """No augmentation of the train split in this family."""
    return None, None


def data_paths(run: "Run") -> list:
    """(code path, runner factory) per path: the arrow directory, once per file backend."""
    return run.arrow_runners()


def arrow_dataset(data_mod, max_len: int, datapath: str, transfer, transform):
    """ArrowDataset as training builds it (this family's takes no transform)."""
    if transform is not None:
        raise ValueError("speculators 0.9's ArrowDataset takes no transform")
    return data_mod.ArrowDataset(max_len=max_len, datapath=datapath, transfer=transfer, on_missing="raise",
                                 hidden_states_dtype=torch.bfloat16)


def default_path(run: "Run", ran: set[str]) -> tuple[str | None, str]:
    """The only path, read through the training schema's default backend."""
    if ARROW_PATH in ran:
        return ARROW_PATH, (f"no legacy_data switch in the training schema; hidden_states_backend "
                            f"default {run.backend_default!r}")
    return None, "no data path ran"
