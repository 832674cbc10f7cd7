"""speculators 0.9 (0.9.x): the family's picks.

- data paths: `arrow_only`, the arrow directory read by `ArrowDataset` (`arrow_only_path`);
- augmentation: `no_augmentation` (no `noise_transforms`; `arrow_through_transfer_untransformed`:
  its `ArrowDataset` takes no transform);
- the hidden-states transfer: the separate hs-connectors package (`hs_connectors`), with file, fp8
  and mooncake backends: the file and FP8 transfers are run (FP8 files written with hs-connectors'
  own quantizer), mooncake needs its store and is skipped;
- batches `collate_fn_class`, the draft `draft_from_config`; DFlash drafts with
  `dflash_preprocess_from_cli`, read from its installed training CLI (none in 0.9.0).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .. import variants

RELEASES = SpecifierSet("==0.9.*")
VERIFIED = ("0.9.0",)

ARROW_PATH = variants.ARROW_PATH
SHIFT_BATCH = "speculators.models.eagle3.data.shift_batch"
DRAFT_MODEL = "speculators.models.eagle3.core.Eagle3DraftModel"
DRAFT_CONFIG = "speculators.models.eagle3.config.Eagle3SpeculatorConfig"
HS_CONNECTORS = "hs_connectors"
DFLASH_MODEL = "speculators.models.dflash.core.DFlashDraftModel"
DFLASH_CONFIG = "speculators.models.dflash.config.DFlashSpeculatorConfig"
# Its reader of the served (z-lab) DFlash form: the block size and mask token a DFlash run is built with.
DFLASH_CONVERTER = "speculators.convert.dflash.converter.DFlashConverter"
TRAIN_CLI = variants.TRAIN_CLI
# What must be in a release outside every range for this family to run it (families.place).
REQUIRES = (ARROW_PATH, SHIFT_BATCH, f"{HS_CONNECTORS}.transfer.HiddenStatesBackend")
# ... and what must NOT be: a train-split augmentation this family does not apply.
ABSENT = ("speculators.train.noise_transforms.AddUniformNoise",)

data_paths = variants.arrow_only
train_transform = variants.no_augmentation
collate = variants.collate_fn_class
arrow_dataset = variants.arrow_through_transfer_untransformed
default_path = variants.arrow_only_path
draft_model = variants.draft_from_config
dflash_preprocess = variants.dflash_preprocess_from_cli
