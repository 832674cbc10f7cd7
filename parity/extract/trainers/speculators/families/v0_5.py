"""speculators 0.5 (0.5.0a0-0.5.0): where this family keeps what the training probe runs.

As the 0.6 family (v0_6.py: the v1 sample through `SampleFileDataset` + `standardize_data_v1`,
and the arrow directory through an `ArrowDataset` that loads `hidden_states/hs_{i}.safetensors`
itself, no hidden-states transfer; `hidden_states[:, :-1]` to the fc, `[:, -1]` the target, the
slicing the dataset's own), except, read from the installed 0.5.0 source:
- `create_collate_fn(max_len, hidden_size, preprocess)` has no `num_target_layers` or `dtype`
  (0.6 added them for its empty-batch placeholder); its padding rows still follow `lengths`;
- `ArrowDataset` sets `start_file_idx` only when `split_ratio` is not 1.0 (its default), and
  `_map_to_file_idx` reads it: built with the default it fails on the first item
  (AttributeError). Training (the repository's scripts/train.py) builds the train split with
  `split_ratio=0.9`, so this family does too, on an arrow directory of `ARROW_ROWS` identical
  rows (the train split is the first 90%: row 0 reads hs_0).

The 0.5.0 wheel's own `version.py` says 0.4.0 (the probe reports it as the reply's `release_declared`).

Imports nothing from speculators at module level.
"""

from __future__ import annotations

import torch
from packaging.specifiers import SpecifierSet

from . import v0_6

RELEASES = SpecifierSet(">=0.5.0a0,<0.6")
VERIFIED = ("0.5.0",)

V1_PATH, ARROW_PATH, SHIFT_BATCH = v0_6.V1_PATH, v0_6.ARROW_PATH, v0_6.SHIFT_BATCH
DRAFT_MODEL, DRAFT_CONFIG, NOISE = v0_6.DRAFT_MODEL, v0_6.DRAFT_CONFIG, v0_6.NOISE
HS_CONNECTORS = v0_6.HS_CONNECTORS  # None: the dataset reads the file itself
DFLASH_MODEL, DFLASH_CONFIG, dflash_preprocess = v0_6.DFLASH_MODEL, v0_6.DFLASH_CONFIG, v0_6.dflash_preprocess
DFLASH_CONVERTER = v0_6.DFLASH_CONVERTER  # looked for: absent from 0.5
ARROW_ROWS = 10  # training's split_ratio=0.9 leaves rows 0-8 as the train split
# What must be in a release outside every range for this family to run it (families.place).
REQUIRES = v0_6.REQUIRES
ABSENT = v0_6.ABSENT

train_transform, data_paths, v1_runner, default_path = (v0_6.train_transform, v0_6.data_paths, v0_6.v1_runner,
                                                        v0_6.default_path)


def collate(run, sample: dict) -> dict[str, torch.Tensor]:
    """What the trainer receives: this family's `create_collate_fn(max_len, hidden_size, preprocess=shift_batch)`
    over one sample; its real rows are the first `lengths` ones (padding follows)."""
    from speculators.train.data import create_collate_fn

    fn = create_collate_fn(max_len=run.seq_len + 2, hidden_size=run.hidden, preprocess=run.shift)
    batch = fn([sample])
    real = int(batch["lengths"].sum())
    return {k: batch[k][0][:real] for k in ("input_ids", "hidden_states", "verifier_last_hidden_states")}


def arrow_dataset(data_mod, max_len: int, datapath: str, transfer, transform):
    """ArrowDataset as training builds the train split: `split_ratio=0.9`, reading the file itself."""
    return data_mod.ArrowDataset(max_len=max_len, datapath=datapath, on_missing="raise", transform=transform,
                                 split_ratio=0.9, hidden_states_dtype=torch.bfloat16)
