"""speculators 0.8 (0.8.x): where this family keeps what the training probe runs.

Between the 0.7 and 0.9 families, and read from the installed 0.8.1 source:
- one data path, as 0.9: the arrow directory read by `ArrowDataset` (no v1 sample, no
  `standardize_data_v1`, no `legacy_data` switch);
- the train split augmented by default, as 0.7: `AddUniformNoise(std=DataArgs.noise_std)`
  (`speculators.train.noise_transforms`), which training passes to `ArrowDataset` as
  `transform` (`speculators.train.dataloader`);
- the hidden-states transfer is the separate hs-connectors package (`hs_connectors`, 0.8.1
  pinned by the wheel), as 0.9;
- DFlash drafts as 0.9: the preprocess read from its installed training CLI (`dflash_preprocess`).

Imports nothing from speculators at module level: `family_for` imports every family
module in whichever speculators environment the probe runs in.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .v0_7 import NOISE, train_transform  # noqa: F401 - the 0.7 augmentation, unchanged
from .v0_7 import arrow_dataset  # noqa: F401 - ArrowDataset(..., transform=...), as in 0.7
from .v0_9 import (ARROW_PATH, DFLASH_CONFIG, DFLASH_CONVERTER, DFLASH_MODEL, DRAFT_CONFIG, DRAFT_MODEL,  # noqa: F401
                   HS_CONNECTORS, SHIFT_BATCH, data_paths, default_path, dflash_preprocess)

RELEASES = SpecifierSet("==0.8.*")
VERIFIED = ("0.8.1",)
REQUIRES = (ARROW_PATH, SHIFT_BATCH, f"{HS_CONNECTORS}.transfer.HiddenStatesBackend", NOISE)
