"""speculators 0.6 (0.6.0-0.6.0.2): the family's picks.

As the 0.7 family but for its hidden states and batches:
- data paths: `v1_sample_and_arrow` (the v1 sample through `SampleFileDataset`, the arrow directory
  through `ArrowDataset`), the default by `legacy_data_switch` (no switch in its schema: arrow);
- the arrow dataset: `arrow_reading_files`, no hidden-states transfer (it loads
  `hidden_states/hs_{i}.safetensors` itself);
- batches: `create_collate_fn_with_placeholder` (0.7 on: `CollateFn`), whose padding rows follow
  the sample's `lengths`;
- augmentation `uniform_noise` (when its `DataArgs` has `noise_std`), the draft `draft_from_config`,
  a DFlash run's preprocess `dflash_preprocess_unread` (the training script is outside the wheel).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .. import variants

RELEASES = SpecifierSet(">=0.6,<0.7")
VERIFIED = ("0.6.0.2",)

V1_PATH = variants.V1_PATH
ARROW_PATH = variants.ARROW_PATH
SHIFT_BATCH = "speculators.models.eagle3.data.shift_batch"
DRAFT_MODEL = "speculators.models.eagle3.core.Eagle3DraftModel"
DRAFT_CONFIG = "speculators.models.eagle3.config.Eagle3SpeculatorConfig"
NOISE = variants.NOISE
HS_CONNECTORS = None  # the dataset reads the file itself
DFLASH_MODEL = "speculators.models.dflash.core.DFlashDraftModel"
DFLASH_CONFIG = "speculators.models.dflash.config.DFlashSpeculatorConfig"
# looked for: absent from 0.6 (no speculators.convert.dflash)
DFLASH_CONVERTER = "speculators.convert.dflash.converter.DFlashConverter"
# What must be in a release outside every range for this family to run it (families.place).
REQUIRES = (V1_PATH, "speculators.train.data.SampleFileDataset", SHIFT_BATCH, ARROW_PATH,
            "speculators.train.data.create_collate_fn")
ABSENT = ("speculators._vendor.hs_connectors",)  # the 0.7 family's transfer: not this family's path

data_paths = variants.v1_sample_and_arrow
train_transform = variants.uniform_noise
collate = variants.create_collate_fn_with_placeholder
arrow_dataset = variants.arrow_reading_files
default_path = variants.legacy_data_switch
draft_model = variants.draft_from_config
dflash_preprocess = variants.dflash_preprocess_unread
