"""speculators 0.5 (0.5.0a0-0.5.0): the family's picks, read from the installed 0.5.0 source.

As the 0.6 family but for two steps:
- data paths: `v1_sample_and_arrow` (the v1 sample through `SampleFileDataset`, the arrow directory
  through `ArrowDataset`), the default by `legacy_data_switch` (no switch in its schema: arrow);
- the arrow dataset: `arrow_train_split_reading_files`, built with training's `split_ratio=0.9` (with
  its default it fails on the first item), on `ARROW_ROWS` rows; no hidden-states transfer;
- batches: `create_collate_fn_shifting` (no `num_target_layers` or `dtype`; 0.6 added them);
- augmentation `uniform_noise`, the draft `draft_from_config`, a DFlash run's preprocess
  `dflash_preprocess_unread` (the training script is outside the wheel).

The 0.5.0 wheel's own `version.py` says 0.4.0 (the probe reports it as the reply's `release_declared`).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .. import variants

RELEASES = SpecifierSet(">=0.5.0a0,<0.6")
VERIFIED = ("0.5.0",)

V1_PATH = variants.V1_PATH
ARROW_PATH = variants.ARROW_PATH
SHIFT_BATCH = "speculators.models.eagle3.data.shift_batch"
DRAFT_MODEL = "speculators.models.eagle3.core.Eagle3DraftModel"
DRAFT_CONFIG = "speculators.models.eagle3.config.Eagle3SpeculatorConfig"
NOISE = variants.NOISE
HS_CONNECTORS = None  # the dataset reads the file itself
DFLASH_MODEL = "speculators.models.dflash.core.DFlashDraftModel"
DFLASH_CONFIG = "speculators.models.dflash.config.DFlashSpeculatorConfig"
DFLASH_CONVERTER = "speculators.convert.dflash.converter.DFlashConverter"  # looked for: absent from 0.5
ARROW_ROWS = 10  # training's split_ratio=0.9 leaves rows 0-8 as the train split
# What must be in a release outside every range for this family to run it (families.place).
REQUIRES = (V1_PATH, "speculators.train.data.SampleFileDataset", SHIFT_BATCH, ARROW_PATH,
            "speculators.train.data.create_collate_fn")
ABSENT = ("speculators._vendor.hs_connectors",)  # the 0.7 family's transfer: not this family's path

data_paths = variants.v1_sample_and_arrow
train_transform = variants.uniform_noise
collate = variants.create_collate_fn_shifting
arrow_dataset = variants.arrow_train_split_reading_files
default_path = variants.legacy_data_switch
draft_model = variants.draft_from_config
dflash_preprocess = variants.dflash_preprocess_unread
