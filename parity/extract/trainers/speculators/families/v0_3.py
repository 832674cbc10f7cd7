"""speculators 0.3-0.4 (0.3.0, 0.4.0a0-0.4.0.1): the family's picks, read from the installed 0.3.0,
0.4.0a0-a2, 0.4.0 and 0.4.0.1 sources (their `train/data.py` differs only in `standardize_data_v0`,
present up to 0.4.0a2, and the `sample_lengths.json` lookup, from 0.4.0a0 on).

- data paths: `v1_sample_only`, the v1 sample (a `.pt` file whose `hidden_states` is a list of
  per-layer [T, H] tensors) through `Eagle3SampleFileDataset(standardize_fn=standardize_data_v1)`,
  as the repository's scripts/train.py builds it: no `ArrowDataset` yet (`no_arrow_dataset`, and
  the default path `v1_only_path`);
- the shift: `speculators.train.data.shift_batch` (0.5 on: `speculators.models.eagle3.data`), which
  the dataset applies itself, so batches come from `create_collate_fn_unshifted`;
- augmentation: `uniform_noise`, which finds none (no training schema in the wheel);
- the draft: `draft_with_vocab_maps_and_verifier` (its constructor takes the vocabulary maps and
  loads the verifier);
- no DFlash (0.5 on: `speculators.models.dflash`): a DFlash draft is the release's own answer,
  "this trainer release has no DFlash", found by looking its model class up (typed as the trainer
  lacking it, never as parity's limit), so no `dflash_preprocess` is picked.

Whether the loss target passes through the verifier's final norm differs inside the range: 0.3.0
and 0.4.0a0-a2 have no `verifier_norm` (the LM head gets the target as is), 0.4.0 and 0.4.0.1 do;
the probe finds it by running the draft, as for every family.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .. import variants

RELEASES = SpecifierSet(">=0.3,<0.5.0a0")
VERIFIED = ("0.3.0", "0.4.0.1")

V1_PATH = variants.V1_PATH
DATASET = variants.EAGLE3_SAMPLE_FILE_DATASET
SHIFT_BATCH = "speculators.train.data.shift_batch"
ARROW_PATH = None  # no arrow directory in this family
HS_CONNECTORS = None
DRAFT_MODEL = "speculators.models.eagle3.core.Eagle3DraftModel"
DRAFT_CONFIG = "speculators.models.eagle3.config.Eagle3SpeculatorConfig"
NOISE = variants.NOISE
# Looked for, and absent from 0.3.0 and 0.4.0.1 (speculators.models has no dflash): a DFlash draft is
# this release's own answer, "no DFlash" (the probe's lacks_dflash), never parity's limit.
DFLASH_MODEL = "speculators.models.dflash.core.DFlashDraftModel"
DFLASH_CONFIG = "speculators.models.dflash.config.DFlashSpeculatorConfig"
DFLASH_CONVERTER = "speculators.convert.dflash.converter.DFlashConverter"
# What must be in a release outside every range for this family to run it (families.place).
REQUIRES = (V1_PATH, DATASET, SHIFT_BATCH, "speculators.train.data.create_collate_fn")
ABSENT = ("speculators.train.data.ArrowDataset",)  # a data path this family does not run

data_paths = variants.v1_sample_only
train_transform = variants.uniform_noise
collate = variants.create_collate_fn_unshifted
arrow_dataset = variants.no_arrow_dataset
default_path = variants.v1_only_path
draft_model = variants.draft_with_vocab_maps_and_verifier
