"""speculators 0.3-0.4 (0.3.0, 0.4.0a0-0.4.0.1): where this family keeps what the training probe runs.

One data path, read from the installed 0.3.0, 0.4.0a0-a2, 0.4.0 and 0.4.0.1 sources (their
`train/data.py` differs only in `standardize_data_v0`, present up to 0.4.0a2, and the
`sample_lengths.json` lookup, from 0.4.0a0 on):
the v1 sample (a `.pt` file whose `hidden_states` is a list of per-layer [T, H] tensors) read
by `Eagle3SampleFileDataset(standardize_fn=standardize_data_v1)`, as the repository's
scripts/train.py builds it. What differs from the 0.5 family (v0_5.py):
- no `ArrowDataset` and no `SampleFileDataset`/`BaseDataset`: the v1 sample is the only path
  (`standardize_data_v0` reads a different, pre-concatenated format, `hidden_state` [T, 3H] +
  `target` [T, H], which no slot dump describes, and 0.3.0's scripts/train.py reads it only
  with `--data-format-version 0` (default 1; 0.4.0's script has no such option), so it is not run);
- `shift_batch` is `speculators.train.data.shift_batch` (0.5 on:
  `speculators.models.eagle3.data.shift_batch`), and the dataset applies it itself at the end
  of `__getitem__` (after the transform), not the collate;
- `create_collate_fn(max_len)` takes no `hidden_size` and no `preprocess`; its padding rows
  still follow `lengths`;
- `Eagle3DraftModel(config, t2d, d2t)` takes the vocabulary maps as required arguments (0.5
  on: the config only; 0.3.0 refuses None for them), and its constructor loads the verifier's
  embedding and LM head (0.4.0, 0.4.0.1: and final norm) from
  `speculators_config.verifier.name_or_path` (0.5 on: a separate `load_verifier_weights`), so
  the probe's tiny draft gets the identity maps and a tiny verifier checkpoint (`draft_model`);
- `standardize_data_v1` is `torch.cat(hidden_states[:-1])` to the fc and `hidden_states[-1]`
  as the target, as in 0.5-0.7;
- no DFlash (0.5 on: `speculators.models.dflash`): a DFlash draft is the release's own answer,
  "this trainer release has no DFlash", found by looking its model class up (typed as the trainer
  lacking it, never as parity's limit).

Whether the loss target passes through the verifier's final norm differs inside the range: 0.3.0
and 0.4.0a0-a2 have no `verifier_norm` (the LM head gets the target as is), 0.4.0 and 0.4.0.1 do;
the probe finds it by running the draft, as for every family.

Imports nothing from speculators at module level.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from packaging.specifiers import SpecifierSet

from . import v0_5

if TYPE_CHECKING:
    from . import Run

RELEASES = SpecifierSet(">=0.3,<0.5.0a0")
VERIFIED = ("0.3.0", "0.4.0.1")

V1_PATH = v0_5.V1_PATH  # speculators.train.data.standardize_data_v1
DATASET = "speculators.train.data.Eagle3SampleFileDataset"
SHIFT_BATCH = "speculators.train.data.shift_batch"
ARROW_PATH = None  # no arrow directory in this family
HS_CONNECTORS = None
DRAFT_MODEL, DRAFT_CONFIG, NOISE = v0_5.DRAFT_MODEL, v0_5.DRAFT_CONFIG, v0_5.NOISE
# Looked for, and absent from 0.3.0 and 0.4.0.1 (speculators.models has no dflash): a DFlash draft is
# this release's own answer, "no DFlash" (the probe's lacks_dflash), never parity's limit.
DFLASH_MODEL, DFLASH_CONFIG, DFLASH_CONVERTER = v0_5.DFLASH_MODEL, v0_5.DFLASH_CONFIG, v0_5.DFLASH_CONVERTER
# What must be in a release outside every range for this family to run it (families.place).
REQUIRES = (V1_PATH, DATASET, SHIFT_BATCH, "speculators.train.data.create_collate_fn")
ABSENT = ("speculators.train.data.ArrowDataset",)  # a data path this family does not run

train_transform = v0_5.train_transform


def data_paths(run: "Run") -> list:
    """(code path, runner factory): the v1 sample only."""
    run.looked_for.extend([V1_PATH, DATASET])
    return [(V1_PATH, lambda: v1_runner(run))]


def v1_runner(run: "Run"):
    """The v1 sample through Eagle3SampleFileDataset, which standardizes and shifts it itself."""
    from speculators.train import data

    def go(dump: torch.Tensor, transform: Any) -> dict:  # dump: [T, L, H]
        torch.manual_seed(0)
        sample = {"input_ids": run.token_ids(), "loss_mask": torch.ones(run.seq_len, dtype=torch.long),
                  "hidden_states": [dump[:, s].clone() for s in range(run.num_slots)]}
        path = run.tmp / "v1" / "data_0.pt"
        path.parent.mkdir(exist_ok=True)
        torch.save(sample, path)
        dataset = data.Eagle3SampleFileDataset(max_len=run.seq_len + 2, file_list=[str(path)], transform=transform,
                                               hidden_states_dtype=torch.bfloat16,
                                               standardize_fn=data.standardize_data_v1)
        return run.collate(dataset[0])

    cls = data.Eagle3SampleFileDataset
    return go, {"via": f"{cls.__module__}.{cls.__qualname__}(standardize_fn=standardize_data_v1)"}


def collate(run: "Run", sample: dict) -> dict[str, torch.Tensor]:
    """What the trainer receives: this family's `create_collate_fn(max_len)` over one (already shifted)
    sample; its real rows are the first `lengths` ones (padding follows)."""
    from speculators.train.data import create_collate_fn

    batch = create_collate_fn(run.seq_len + 2)([sample])
    real = int(batch["lengths"].sum())
    return {k: batch[k][0][:real] for k in ("input_ids", "hidden_states", "verifier_last_hidden_states")}


def draft_model(model_cls, config):
    """The tiny draft the probe runs, built as this family builds it: `Eagle3DraftModel(config, t2d, d2t)`
    with identity vocabulary maps (the first draft_vocab_size verifier tokens kept, offsets 0), whose constructor
    loads the verifier's embedding, LM head and final norm from
    `speculators_config.verifier.name_or_path`; that is a tiny seeded verifier checkpoint written
    here (the transformer layer's config + those three tensors)."""
    from safetensors.torch import save_file

    layer = config.transformer_layer_config
    vocab, hidden = layer.vocab_size, layer.hidden_size
    with tempfile.TemporaryDirectory(prefix="parity-verifier-") as where:
        layer.save_pretrained(where)
        generator = torch.Generator().manual_seed(1)
        save_file({"model.embed_tokens.weight": torch.randn(vocab, hidden, generator=generator),
                   "lm_head.weight": torch.randn(vocab, hidden, generator=generator),
                   "model.norm.weight": torch.rand(hidden, generator=generator) + 0.5},
                  str(Path(where) / "model.safetensors"))
        config.speculators_config.verifier.name_or_path = where
        t2d = torch.zeros(vocab, dtype=torch.bool)  # the first draft_vocab_size tokens kept, offsets 0
        t2d[:config.draft_vocab_size] = True
        d2t = torch.zeros(config.draft_vocab_size, dtype=torch.long)
        return model_cls(config, t2d=t2d, d2t=d2t)


def arrow_dataset(data_mod, max_len: int, datapath: str, transfer, transform):
    raise ValueError("speculators 0.3-0.4 have no ArrowDataset")


def default_path(run: "Run", ran: set[str]) -> tuple[str | None, str]:
    """The only path."""
    if V1_PATH in ran:
        return V1_PATH, "the only data path installed (no arrow directory before 0.5)"
    return None, "no data path ran"
