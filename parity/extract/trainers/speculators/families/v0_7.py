"""speculators 0.7 (0.7.0-0.7.0.2): the family's picks.

- data paths: `v1_sample_and_arrow`, the v1 sample through `SampleFileDataset` + `standardize_data_v1`
  and the arrow directory through `ArrowDataset`; `DataArgs.legacy_data` (default False) picks
  between them (`legacy_data_switch`);
- augmentation: `uniform_noise` (`AddUniformNoise(std=DataArgs.noise_std)`), passed to both datasets;
- the arrow dataset: `arrow_through_transfer`, the transfer being speculators' vendored copy of
  hs-connectors (`speculators._vendor.hs_connectors`), whose only backend is the file;
- batches: `collate_fn_class` (`CollateFn`, the first release with it);
- the draft `draft_from_config`; DFlash drafts (`DFLASH_MODEL`, 0.5 on) with
  `dflash_preprocess_unread`: the wheel holds no training CLI.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .. import variants

RELEASES = SpecifierSet("==0.7.*")
VERIFIED = ("0.7.0.2",)

V1_PATH = variants.V1_PATH
ARROW_PATH = variants.ARROW_PATH
SHIFT_BATCH = "speculators.models.eagle3.data.shift_batch"
DRAFT_MODEL = "speculators.models.eagle3.core.Eagle3DraftModel"
DRAFT_CONFIG = "speculators.models.eagle3.config.Eagle3SpeculatorConfig"
HS_CONNECTORS = "speculators._vendor.hs_connectors"
DFLASH_MODEL = "speculators.models.dflash.core.DFlashDraftModel"
DFLASH_CONFIG = "speculators.models.dflash.config.DFlashSpeculatorConfig"
# Its reader of the served (z-lab) DFlash form (0.7 on; looked for, absent, in 0.5 and 0.6).
DFLASH_CONVERTER = "speculators.convert.dflash.converter.DFlashConverter"
NOISE = variants.NOISE
# What must be in a release outside every range for this family to run it (families.place).
REQUIRES = (V1_PATH, "speculators.train.data.SampleFileDataset", SHIFT_BATCH,
            f"{HS_CONNECTORS}.transfer.HiddenStatesBackend")

data_paths = variants.v1_sample_and_arrow
train_transform = variants.uniform_noise
collate = variants.collate_fn_class
arrow_dataset = variants.arrow_through_transfer
default_path = variants.legacy_data_switch
draft_model = variants.draft_from_config
dflash_preprocess = variants.dflash_preprocess_unread
