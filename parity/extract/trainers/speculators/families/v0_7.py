"""speculators 0.7 (0.7.0-0.7.0.2): where this family keeps what the training probe runs.

What differs from the 0.9 family (every other step of the probe is the same code):
- two data paths: the v1 sample (a list of per-layer [T, H] tensors in a `.pt` file) read
  through `SampleFileDataset` + `standardize_data_v1`, and the arrow directory read by
  `ArrowDataset`; `DataArgs.legacy_data` (default False) picks between them;
- the train split is augmented by default: `AddUniformNoise(std=DataArgs.noise_std)`,
  passed to both datasets as `transform`;
- the hidden-states transfer is speculators' vendored copy of hs-connectors
  (`speculators._vendor.hs_connectors`), whose only backend is the file;
- DFlash drafts (`DFLASH_MODEL`, 0.5 on; the 0.5 and 0.6 families take these names): the wheel
  holds no training CLI (its trainer is the repository's scripts/train.py, outside the wheel), so
  the preprocess a DFlash run gets cannot be read from installed code: the data path runs with none,
  the one that agrees with the installed model (its forward aligns the targets itself, rolling the
  verifier's logits by one), and the contract says the choice was not read (`dflash_preprocess`).

Imports nothing from speculators at module level: `family_for` imports every family
module in whichever speculators environment the probe runs in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from packaging.specifiers import SpecifierSet

if TYPE_CHECKING:
    from . import Run

RELEASES = SpecifierSet("==0.7.*")
VERIFIED = ("0.7.0.2",)

V1_PATH = "speculators.train.data.standardize_data_v1"
ARROW_PATH = "speculators.train.data.ArrowDataset._get_raw_data"
SHIFT_BATCH = "speculators.models.eagle3.data.shift_batch"
DRAFT_MODEL = "speculators.models.eagle3.core.Eagle3DraftModel"
DRAFT_CONFIG = "speculators.models.eagle3.config.Eagle3SpeculatorConfig"
HS_CONNECTORS = "speculators._vendor.hs_connectors"
DFLASH_MODEL = "speculators.models.dflash.core.DFlashDraftModel"
DFLASH_CONFIG = "speculators.models.dflash.config.DFlashSpeculatorConfig"
# Its reader of the served (z-lab) DFlash form (0.7 on; looked for, absent, in 0.5 and 0.6).
DFLASH_CONVERTER = "speculators.convert.dflash.converter.DFlashConverter"
NOISE = "speculators.train.noise_transforms.AddUniformNoise"
# What must be in a release outside every range for this family to run it (families.place).
REQUIRES = (V1_PATH, "speculators.train.data.SampleFileDataset", SHIFT_BATCH,
            f"{HS_CONNECTORS}.transfer.HiddenStatesBackend")


def dflash_preprocess(run: "Run") -> tuple[Any, str]:
    """(preprocess, where it came from) for a DFlash run: none, and no installed code says so."""
    return None, ("none (not read: the training script is outside the wheel; the installed DFlash model "
                  "aligns its targets itself)")


def train_transform(run: "Run") -> tuple[Any, str | None]:
    """The augmentation training applies to the train split by default: uniform noise."""
    cls = run.look_up(NOISE)
    std = run.data_args_default("noise_std")
    if cls is None or std is None:
        return None, None
    return cls(std=std), f"{NOISE}(std={std})"


def data_paths(run: "Run") -> list:
    """(code path, runner factory) per path: the v1 sample, then the arrow directory per file backend."""
    run.looked_for.append(V1_PATH)
    return [(V1_PATH, lambda: v1_runner(run)), *run.arrow_runners()]


def v1_runner(run: "Run"):
    """The v1 sample (`hidden_states` = list of per-layer [T, H]) through SampleFileDataset."""
    from speculators.train.data import SampleFileDataset, standardize_data_v1  # noqa: F401 - present

    def go(dump: torch.Tensor, transform: Any) -> dict:  # dump: [T, L, H]
        torch.manual_seed(0)  # the noise augmentation is reproducible
        sample = {"input_ids": run.token_ids(), "loss_mask": torch.ones(run.seq_len, dtype=torch.long),
                  "hidden_states": [dump[:, s].clone() for s in range(run.num_slots)]}
        path = run.tmp / "v1" / "data_0.pt"
        path.parent.mkdir(exist_ok=True)
        torch.save(sample, path)
        dataset = SampleFileDataset(max_len=run.seq_len + 2, file_list=[str(path)], transform=transform,
                                    hidden_states_dtype=torch.bfloat16)
        return run.collate(dataset[0])

    return go, {"via": f"{SampleFileDataset.__module__}.{SampleFileDataset.__qualname__}"}


def arrow_dataset(data_mod, max_len: int, datapath: str, transfer, transform):
    """ArrowDataset as training builds it for the train split (with the augmentation)."""
    return data_mod.ArrowDataset(max_len=max_len, datapath=datapath, transfer=transfer, on_missing="raise",
                                 transform=transform, hidden_states_dtype=torch.bfloat16)


def default_path(run: "Run", ran: set[str]) -> tuple[str | None, str]:
    """The path the training CLI takes by default: `DataArgs.legacy_data` decides."""
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
