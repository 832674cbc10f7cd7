"""The ways speculators releases differ, one variant per concern, named by what it does. A family
(families/) is a short table picking one variant of each concern; no family imports another, nor
the probe that runs it.

Concerns (each function's signature is the concern's, the same in every variant; `run` is the
probe's `ProbeRun`, typed as `Run` below):
- data paths, `data_paths(run)`: (code path, runner factory) per path the release trains from:
  - `v1_sample_only` (0.3-0.4): the v1 sample through `Eagle3SampleFileDataset`;
  - `v1_sample_and_arrow` (0.5-0.7): the v1 sample through `SampleFileDataset`, then the arrow
    directory once per file backend;
  - `arrow_only` (0.8 on): the arrow directory once per file backend;
- the train-split augmentation, `train_transform(run)`: `uniform_noise` (to 0.8), `no_augmentation` (0.9);
- batching, `collate(run, sample)`: what the trainer receives from one sample, real rows only:
  `create_collate_fn_unshifted` (0.3-0.4), `create_collate_fn_shifting` (0.5),
  `create_collate_fn_with_placeholder` (0.6), `collate_fn_class` (0.7 on);
- the arrow directory's dataset, `arrow_dataset(data_mod, max_len, datapath, transfer, transform)`:
  `no_arrow_dataset` (0.3-0.4), `arrow_train_split_reading_files` (0.5), `arrow_reading_files` (0.6),
  `arrow_through_transfer` (0.7-0.8), `arrow_through_transfer_untransformed` (0.9);
- the default path, `default_path(run, ran)`: `v1_only_path` (0.3-0.4), `legacy_data_switch` (0.5-0.7),
  `arrow_only_path` (0.8 on);
- the draft the probe builds, `draft_model(model_cls, config)`: `draft_with_vocab_maps_and_verifier`
  (0.3-0.4), `draft_from_config` (0.5 on);
- a DFlash run's preprocess, `dflash_preprocess(run)`: `dflash_preprocess_unread` (0.5-0.7),
  `dflash_preprocess_from_cli` (0.8 on); 0.3-0.4 have no DFlash model, so nothing asks.

Imports nothing from speculators at module level: `family_for` imports every family module, and
with it this one, in whichever speculators environment the probe runs in.
"""

from __future__ import annotations

import tempfile
from argparse import Namespace
from pathlib import Path
from typing import Any, Callable, Protocol

import torch

from ...run_until import local_value

# The speculators code the variants run (qualified names, looked up in the installed release).
V1_PATH = "speculators.train.data.standardize_data_v1"
ARROW_PATH = "speculators.train.data.ArrowDataset._get_raw_data"
EAGLE3_SAMPLE_FILE_DATASET = "speculators.train.data.Eagle3SampleFileDataset"
NOISE = "speculators.train.noise_transforms.AddUniformNoise"
TRAIN_CLI = "speculators.train.cli.main"

_REAL = ("input_ids", "hidden_states", "verifier_last_hidden_states")


class Run(Protocol):
    """What a variant gets from the probe (its `ProbeRun`): the marked sample's sizes and the steps
    every family shares. Declared here so that a variant, like the families that pick it, never
    imports the probe that runs it."""

    tmp: Path
    num_slots: int
    hidden: int
    seq_len: int
    looked_for: list[str]
    shift: Callable | None
    backend_default: str

    def look_up(self, qualname: str) -> Any: ...
    def data_args_default(self, name: str) -> Any: ...
    def token_ids(self) -> Any: ...  # torch.Tensor, [seq_len]
    def collate(self, sample: dict) -> dict: ...
    def arrow_runners(self) -> list[tuple[str, Callable[[], tuple[Callable, dict]]]]: ...


# -- data paths -------------------------------------------------------------------------------


def v1_sample_only(run: Run) -> list:
    """0.3-0.4: the v1 sample only (no `ArrowDataset`, no `SampleFileDataset`/`BaseDataset`).
    `standardize_data_v0` (present up to 0.4.0a2) reads a different, pre-concatenated format,
    `hidden_state` [T, 3H] + `target` [T, H], which no slot dump describes, and 0.3.0's
    scripts/train.py reads it only with `--data-format-version 0` (default 1; 0.4.0's script has no
    such option), so it is not run."""
    run.looked_for.extend([V1_PATH, EAGLE3_SAMPLE_FILE_DATASET])
    return [(V1_PATH, lambda: _eagle3_sample_file_runner(run))]


def v1_sample_and_arrow(run: Run) -> list:
    """0.5-0.7: two data paths, the v1 sample (a list of per-layer [T, H] tensors in a `.pt` file)
    read through `SampleFileDataset` + `standardize_data_v1`, and the arrow directory read by
    `ArrowDataset`, once per file backend; `DataArgs.legacy_data` (0.7) picks between them."""
    run.looked_for.append(V1_PATH)
    return [(V1_PATH, lambda: _sample_file_runner(run)), *run.arrow_runners()]


def arrow_only(run: Run) -> list:
    """0.8 on: one data path, the arrow directory read by `ArrowDataset`, once per file backend (the
    v1 sample and `standardize_data_v1` are gone, and with them the `legacy_data` switch)."""
    return run.arrow_runners()


def _v1_sample_file(run: Run, dump: torch.Tensor) -> Path:
    """The v1 sample of `dump` ([T, L, H]): a `.pt` file whose `hidden_states` is a list of per-layer [T, H]."""
    sample = {"input_ids": run.token_ids(), "loss_mask": torch.ones(run.seq_len, dtype=torch.long),
              "hidden_states": [dump[:, s].clone() for s in range(run.num_slots)]}
    path = run.tmp / "v1" / "data_0.pt"
    path.parent.mkdir(exist_ok=True)
    torch.save(sample, path)
    return path


def _eagle3_sample_file_runner(run: Run):
    """The v1 sample through `Eagle3SampleFileDataset(standardize_fn=standardize_data_v1)`, as 0.3-0.4's
    scripts/train.py builds it: the dataset standardizes it (`torch.cat(hidden_states[:-1])` to the
    fc, `hidden_states[-1]` the target, as in 0.5-0.7) and applies `shift_batch` itself, at the end
    of `__getitem__` (after the transform), not the collate."""
    from speculators.train import data

    def go(dump: torch.Tensor, transform: Any) -> dict:  # dump: [T, L, H]
        torch.manual_seed(0)
        path = _v1_sample_file(run, dump)
        dataset = data.Eagle3SampleFileDataset(max_len=run.seq_len + 2, file_list=[str(path)], transform=transform,
                                               hidden_states_dtype=torch.bfloat16,
                                               standardize_fn=data.standardize_data_v1)
        return run.collate(dataset[0])

    cls = data.Eagle3SampleFileDataset
    return go, {"via": f"{cls.__module__}.{cls.__qualname__}(standardize_fn=standardize_data_v1)"}


def _sample_file_runner(run: Run):
    """The v1 sample through `SampleFileDataset` (0.5-0.7), which standardizes it with `standardize_data_v1`."""
    from speculators.train.data import SampleFileDataset, standardize_data_v1  # noqa: F401 - present

    def go(dump: torch.Tensor, transform: Any) -> dict:  # dump: [T, L, H]
        torch.manual_seed(0)  # the noise augmentation is reproducible
        path = _v1_sample_file(run, dump)
        dataset = SampleFileDataset(max_len=run.seq_len + 2, file_list=[str(path)], transform=transform,
                                    hidden_states_dtype=torch.bfloat16)
        return run.collate(dataset[0])

    return go, {"via": f"{SampleFileDataset.__module__}.{SampleFileDataset.__qualname__}"}


# -- the train-split augmentation -----------------------------------------------------------------


def uniform_noise(run: Run) -> tuple[Any, str | None]:
    """To 0.8: the train split is augmented by default, `AddUniformNoise(std=DataArgs.noise_std)`, passed
    to the datasets as `transform`; none where the release has no such class, or its wheel no training
    schema (`DataArgs`, 0.7 on; before, the training script is outside the wheel) with `noise_std`."""
    cls = run.look_up(NOISE)
    std = run.data_args_default("noise_std")
    if cls is None or std is None:
        return None, None
    return cls(std=std), f"{NOISE}(std={std})"


def no_augmentation(run: Run) -> tuple[Any, str | None]:
    """0.9: no augmentation of the train split (no `noise_transforms`, `ArrowDataset` takes no transform)."""
    return None, None


# -- batching ---------------------------------------------------------------------------------------


def create_collate_fn_unshifted(run: Run, sample: dict) -> dict[str, torch.Tensor]:
    """0.3-0.4: `create_collate_fn(max_len)` over one (already shifted) sample; it takes no `hidden_size`
    and no `preprocess` (the dataset shifts). Its real rows are the first `lengths` ones (padding follows)."""
    from speculators.train.data import create_collate_fn

    return _first_rows(create_collate_fn(run.seq_len + 2)([sample]))


def create_collate_fn_shifting(run: Run, sample: dict) -> dict[str, torch.Tensor]:
    """0.5: `create_collate_fn(max_len, hidden_size, preprocess=shift_batch)`, which has no
    `num_target_layers` or `dtype` yet; its real rows are the first `lengths` ones (padding follows)."""
    from speculators.train.data import create_collate_fn

    fn = create_collate_fn(max_len=run.seq_len + 2, hidden_size=run.hidden, preprocess=run.shift)
    return _first_rows(fn([sample]))


def create_collate_fn_with_placeholder(run: Run, sample: dict) -> dict[str, torch.Tensor]:
    """0.6: `create_collate_fn(preprocess=shift_batch)` with the `num_target_layers` and `dtype` it added for
    its empty-batch placeholder; its real rows are the first `lengths` ones (padding follows)."""
    from speculators.train.data import create_collate_fn

    fn = create_collate_fn(max_len=run.seq_len + 2, hidden_size=run.hidden, num_target_layers=run.num_slots - 1,
                           dtype=torch.bfloat16, preprocess=run.shift)
    return _first_rows(fn([sample]))


def _first_rows(batch: dict) -> dict[str, torch.Tensor]:
    """A `create_collate_fn` batch of one sample, its first `lengths` rows (the real ones)."""
    real = int(batch["lengths"].sum())
    return {k: batch[k][0][:real] for k in _REAL}


def collate_fn_class(run: Run, sample: dict) -> dict[str, torch.Tensor]:
    """0.7 on: `CollateFn(preprocess=shift_batch)` over one sample; its padding rows have `document_ids` -1."""
    from speculators.train.data import CollateFn

    collate = CollateFn(max_len=run.seq_len + 2, hidden_size=run.hidden,
                        num_target_layers=run.num_slots - 1, dtype=torch.bfloat16, preprocess=run.shift)
    batch = collate([sample])
    real = batch["document_ids"][0] >= 0  # [max_len]: padding rows are -1
    return {k: batch[k][0][real] for k in _REAL}


# -- the arrow directory's dataset -----------------------------------------------------------------


def no_arrow_dataset(data_mod, max_len: int, datapath: str, transfer, transform):
    """0.3-0.4: no `ArrowDataset` (0.5 on)."""
    raise ValueError("speculators 0.3-0.4 have no ArrowDataset")


def arrow_train_split_reading_files(data_mod, max_len: int, datapath: str, transfer, transform):
    """0.5: `ArrowDataset` as training builds the train split, loading `hidden_states/hs_{i}.safetensors`
    itself. It sets `start_file_idx` only when `split_ratio` is not 1.0 (its default), and
    `_map_to_file_idx` reads it: built with the default it fails on the first item (AttributeError).
    Training (the repository's scripts/train.py) builds the train split with `split_ratio=0.9`, so this
    does too, on an arrow directory of the family's `ARROW_ROWS` identical rows (the train split is the
    first 90%: row 0 reads hs_0)."""
    return data_mod.ArrowDataset(max_len=max_len, datapath=datapath, on_missing="raise", transform=transform,
                                 split_ratio=0.9, hidden_states_dtype=torch.bfloat16)


def arrow_reading_files(data_mod, max_len: int, datapath: str, transfer, transform):
    """0.6: `ArrowDataset` as training builds the train split, with no hidden-states transfer: it loads
    `hidden_states/hs_{i}.safetensors` itself (`_maybe_load_hs_file`), so the probe writes that file and
    lets the dataset read it; the slicing (`hidden_states[:, :-1]` to the fc, `[:, -1]` the target) is
    the dataset's own."""
    return data_mod.ArrowDataset(max_len=max_len, datapath=datapath, on_missing="raise", transform=transform,
                                 hidden_states_dtype=torch.bfloat16)


def arrow_through_transfer(data_mod, max_len: int, datapath: str, transfer, transform):
    """0.7-0.8: `ArrowDataset` as training builds the train split, reading through the hidden-states
    transfer, with the augmentation as `transform` (0.8: `speculators.train.dataloader` passes it)."""
    return data_mod.ArrowDataset(max_len=max_len, datapath=datapath, transfer=transfer, on_missing="raise",
                                 transform=transform, hidden_states_dtype=torch.bfloat16)


def arrow_through_transfer_untransformed(data_mod, max_len: int, datapath: str, transfer, transform):
    """0.9: `ArrowDataset` as training builds it, reading through the hidden-states transfer; it takes no transform."""
    if transform is not None:
        raise ValueError("speculators 0.9's ArrowDataset takes no transform")
    return data_mod.ArrowDataset(max_len=max_len, datapath=datapath, transfer=transfer, on_missing="raise",
                                 hidden_states_dtype=torch.bfloat16)


# -- the default path -----------------------------------------------------------------------------


def v1_only_path(run: Run, ran: set[str]) -> tuple[str | None, str]:
    """0.3-0.4: the v1 sample, the only path."""
    if V1_PATH in ran:
        return V1_PATH, "the only data path installed (no arrow directory before 0.5)"
    return None, "no data path ran"


def legacy_data_switch(run: Run, ran: set[str]) -> tuple[str | None, str]:
    """0.5-0.7: the path the training CLI takes by default, which `DataArgs.legacy_data` (default False)
    decides where the training schema has it (0.7; before, the arrow directory)."""
    legacy = run.data_args_default("legacy_data")
    if legacy is True and V1_PATH in ran:
        return V1_PATH, "DataArgs.legacy_data defaults to True"
    if ARROW_PATH in ran:
        why = ("DataArgs.legacy_data defaults to False" if legacy is False else
               "no legacy_data switch in the training schema")
        return ARROW_PATH, f"{why}; hidden_states_backend default {run.backend_default!r}"
    if V1_PATH in ran:
        return V1_PATH, "the only data path installed"
    return None, "no data path ran"


def arrow_only_path(run: Run, ran: set[str]) -> tuple[str | None, str]:
    """0.8 on: the arrow directory, the only path, read through the training schema's default backend."""
    if ARROW_PATH in ran:
        return ARROW_PATH, (f"no legacy_data switch in the training schema; hidden_states_backend "
                            f"default {run.backend_default!r}")
    return None, "no data path ran"


# -- the draft the probe builds ---------------------------------------------------------------------


def draft_from_config(model_cls, config):
    """0.5 on: `Eagle3DraftModel(config)`; the verifier's weights load apart (`load_verifier_weights`)."""
    return model_cls(config)


def draft_with_vocab_maps_and_verifier(model_cls, config):
    """0.3-0.4: `Eagle3DraftModel(config, t2d, d2t)` takes the vocabulary maps as required arguments
    (0.3.0 refuses None for them), and its constructor loads the verifier's embedding and LM head
    (0.4.0, 0.4.0.1: and final norm) from `speculators_config.verifier.name_or_path`. So the tiny draft
    gets identity maps (the first draft_vocab_size verifier tokens kept, offsets 0) and a tiny seeded
    verifier checkpoint written here (the transformer layer's config + those three tensors)."""
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


# -- a DFlash run's preprocess ----------------------------------------------------------------------


def dflash_preprocess_unread(run: Run) -> tuple[Any, str]:
    """0.5-0.7: the wheel holds no training CLI (its trainer is the repository's scripts/train.py, outside
    the wheel), so the preprocess a DFlash run gets cannot be read from installed code: the data path
    runs with none, the one that agrees with the installed model (its forward aligns the targets itself,
    rolling the verifier's logits by one), and the contract says the choice was not read."""
    return None, ("none (not read: the training script is outside the wheel; the installed DFlash model "
                  "aligns its targets itself)")


def dflash_preprocess_from_cli(run: Run) -> tuple[Any, str]:
    """0.8 on: the training CLI is installed (`speculators.train.cli.main`), so the preprocess a
    `--speculator-type dflash` run gets is read by running its own two statements (`preprocess_fns = {...}`
    and `preprocess = preprocess_fns.get(args.speculator_type)`) alone with the type dflash
    (parity.extract.run_until.local_value): none in 0.8.1 and 0.9.0."""
    main = run.look_up(TRAIN_CLI)
    if main is None:
        raise LookupError(f"no {TRAIN_CLI} in this release to read a DFlash run's preprocess from")
    fns = local_value(main, "preprocess_fns")
    chosen = local_value(main, "preprocess", preprocess_fns=fns, args=Namespace(speculator_type="dflash"))
    name = f"{chosen.__module__}.{chosen.__qualname__}" if chosen is not None else "none"
    return chosen, f"{name} (read from {TRAIN_CLI}: preprocess_fns.get('dflash'))"
