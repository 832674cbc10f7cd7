"""speculators 0.9 (0.9.x): where this family keeps what the training probe runs.

What differs from the 0.7 family (every other step of the probe is the same code):
- one data path: the arrow directory read by `ArrowDataset` (the v1 sample and
  `standardize_data_v1` are gone, and with them the `legacy_data` switch);
- no train-split augmentation (no `noise_transforms`, `ArrowDataset` takes no transform);
- the hidden-states transfer is the separate hs-connectors package (`hs_connectors`), with
  file, fp8 and mooncake backends: the file and FP8 transfers are run (FP8 files written
  with hs-connectors' own quantizer), mooncake needs its store and is skipped.

Imports nothing from speculators at module level: `family_for` imports every family
module in whichever speculators environment the probe runs in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from packaging.specifiers import SpecifierSet

if TYPE_CHECKING:
    from ..probe import ProbeRun

RELEASES = SpecifierSet("==0.9.*")
VERIFIED = ("0.9.0",)

ARROW_PATH = "speculators.train.data.ArrowDataset._get_raw_data"
SHIFT_BATCH = "speculators.models.eagle3.data.shift_batch"
DRAFT_MODEL = "speculators.models.eagle3.core.Eagle3DraftModel"
DRAFT_CONFIG = "speculators.models.eagle3.config.Eagle3SpeculatorConfig"
HS_CONNECTORS = "hs_connectors"
# What must be in a release outside every range for this family to run it (families.place).
REQUIRES = (ARROW_PATH, SHIFT_BATCH, f"{HS_CONNECTORS}.transfer.HiddenStatesBackend")
# ... and what must NOT be: a train-split augmentation this family does not apply.
ABSENT = ("speculators.train.noise_transforms.AddUniformNoise",)


def train_transform(run: "ProbeRun") -> tuple[Any, str | None]:
    """No augmentation of the train split in this family."""
    return None, None


def data_paths(run: "ProbeRun") -> list:
    """(code path, runner factory) per path: the arrow directory, once per file backend."""
    return run.arrow_runners()


def arrow_dataset(data_mod, max_len: int, datapath: str, transfer, transform):
    """ArrowDataset as training builds it (this family's takes no transform)."""
    if transform is not None:
        raise ValueError("speculators 0.9's ArrowDataset takes no transform")
    return data_mod.ArrowDataset(max_len=max_len, datapath=datapath, transfer=transfer, on_missing="raise",
                                 hidden_states_dtype=torch.bfloat16)


def default_path(run: "ProbeRun", ran: set[str]) -> tuple[str | None, str]:
    """The only path, read through the training schema's default backend."""
    if ARROW_PATH in ran:
        return ARROW_PATH, (f"no legacy_data switch in the training schema; hidden_states_backend "
                            f"default {run.backend_default!r}")
    return None, "no data path ran"
