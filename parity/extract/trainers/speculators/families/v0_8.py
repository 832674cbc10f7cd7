"""speculators 0.8 (0.8.x): the family's picks, read from the installed 0.8.1 source; between the
0.7 and 0.9 families.

- data paths: `arrow_only` (no v1 sample, no `standardize_data_v1`, no `legacy_data` switch:
  `arrow_only_path`), as 0.9;
- augmentation: `uniform_noise`, as 0.7: `AddUniformNoise(std=DataArgs.noise_std)`
  (`speculators.train.noise_transforms`), which training passes to `ArrowDataset` as `transform`
  (`arrow_through_transfer`);
- the hidden-states transfer: the separate hs-connectors package (`hs_connectors`, 0.8.1 pinned by
  the wheel), as 0.9;
- batches `collate_fn_class`, the draft `draft_from_config`; DFlash drafts as 0.9, the preprocess
  read from its installed training CLI (`dflash_preprocess_from_cli`).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .. import variants

RELEASES = SpecifierSet("==0.8.*")
VERIFIED = ("0.8.1",)

ARROW_PATH = variants.ARROW_PATH
SHIFT_BATCH = "speculators.models.eagle3.data.shift_batch"
DRAFT_MODEL = "speculators.models.eagle3.core.Eagle3DraftModel"
DRAFT_CONFIG = "speculators.models.eagle3.config.Eagle3SpeculatorConfig"
HS_CONNECTORS = "hs_connectors"
DFLASH_MODEL = "speculators.models.dflash.core.DFlashDraftModel"
DFLASH_CONFIG = "speculators.models.dflash.config.DFlashSpeculatorConfig"
DFLASH_CONVERTER = "speculators.convert.dflash.converter.DFlashConverter"
NOISE = variants.NOISE
# What must be in a release outside every range for this family to run it (families.place).
REQUIRES = (ARROW_PATH, SHIFT_BATCH, f"{HS_CONNECTORS}.transfer.HiddenStatesBackend", NOISE)

data_paths = variants.arrow_only
train_transform = variants.uniform_noise
collate = variants.collate_fn_class
arrow_dataset = variants.arrow_through_transfer
default_path = variants.arrow_only_path
draft_model = variants.draft_from_config
dflash_preprocess = variants.dflash_preprocess_from_cli
