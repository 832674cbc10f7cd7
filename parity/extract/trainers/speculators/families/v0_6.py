"""speculators 0.6 (0.6.0-0.6.0.2): where this family keeps what the training probe runs.

Its batches are made by `create_collate_fn` (0.7 on: `CollateFn`), whose padding rows follow
the sample's `lengths`.

As the 0.7 family (v0_7.py: the v1 sample through `SampleFileDataset` + `standardize_data_v1`,
and the arrow directory through `ArrowDataset`, the arrow one by default), except that this
family's `ArrowDataset` has no hidden-states transfer: it loads
`hidden_states/hs_{i}.safetensors` itself (`_maybe_load_hs_file`), so the probe writes that
file and lets the dataset read it; the slicing (`hidden_states[:, :-1]` to the fc,
`[:, -1]` as the target) is the dataset's own.

Imports nothing from speculators at module level.
"""

from __future__ import annotations


import torch
from packaging.specifiers import SpecifierSet

from . import v0_7

RELEASES = SpecifierSet(">=0.6,<0.7")
VERIFIED = ("0.6.0.2",)

V1_PATH, ARROW_PATH, SHIFT_BATCH = v0_7.V1_PATH, v0_7.ARROW_PATH, v0_7.SHIFT_BATCH
DRAFT_MODEL, DRAFT_CONFIG, NOISE = v0_7.DRAFT_MODEL, v0_7.DRAFT_CONFIG, v0_7.NOISE
HS_CONNECTORS = None  # the dataset reads the file itself
DFLASH_MODEL, DFLASH_CONFIG, dflash_preprocess = v0_7.DFLASH_MODEL, v0_7.DFLASH_CONFIG, v0_7.dflash_preprocess
DFLASH_CONVERTER = v0_7.DFLASH_CONVERTER  # looked for: absent from 0.6 (no speculators.convert.dflash)
# What must be in a release outside every range for this family to run it (families.place).
REQUIRES = (V1_PATH, "speculators.train.data.SampleFileDataset", SHIFT_BATCH, ARROW_PATH,
            "speculators.train.data.create_collate_fn")
ABSENT = ("speculators._vendor.hs_connectors",)  # the 0.7 family's transfer: not this family's path

train_transform, data_paths, v1_runner, default_path = (v0_7.train_transform, v0_7.data_paths, v0_7.v1_runner,
                                                        v0_7.default_path)


def collate(run, sample: dict) -> dict[str, torch.Tensor]:
    """What the trainer receives: this family's `create_collate_fn(preprocess=shift_batch)` over one
    sample; its real rows are the first `lengths` ones (padding follows)."""
    from speculators.train.data import create_collate_fn

    fn = create_collate_fn(max_len=run.seq_len + 2, hidden_size=run.hidden, num_target_layers=run.num_slots - 1,
                           dtype=torch.bfloat16, preprocess=run.shift)
    batch = fn([sample])
    real = int(batch["lengths"].sum())
    return {k: batch[k][0][:real] for k in ("input_ids", "hidden_states", "verifier_last_hidden_states")}


def arrow_dataset(data_mod, max_len: int, datapath: str, transfer, transform):
    """ArrowDataset as training builds it for the train split: it reads the file itself."""
    return data_mod.ArrowDataset(max_len=max_len, datapath=datapath, on_missing="raise", transform=transform,
                                 hidden_states_dtype=torch.bfloat16)
