"""speculators as a `Trainer` (parity.extract.trainers): the names the package exports for it.

`training_contract` is `extract_training` under the interface's names (the release is
`release`, not `speculators_version`; the target and draft come read, as `Target` and `Draft`); `read_draft` is draft.read_draft; the errors are
the package's `ERRORS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....contract import DatagenDump, Tap, TrainingContract

if TYPE_CHECKING:
    from ....inputs import Draft, Target

NAME = "speculators"
FORWARD_MODULE = "parity.extract.trainers.speculators.forward_side"  # parity forward's training path


def training_contract(target: "Target", dump_layout: list[Tap] | None = None, *,
                      datagen_ids: list[int] | None = None, datagen_convention: str | None = None,
                      draft: "Draft | None" = None, release: str | None = None,
                      data_path: str | None = None, datagen_dump: DatagenDump | None = None) -> TrainingContract:
    """`extract_training` (see there), with the release named as every trainer names it. The
    draft, already read, is interpreted the way speculators reads it (draft.read_draft)."""
    from . import extract_training

    return extract_training(target.model, dump_layout, datagen_ids=datagen_ids, datagen_convention=datagen_convention,
                            draft_dir=draft, speculators_version=release, data_path=data_path,
                            datagen_dump=datagen_dump)


def is_trained_draft(config: dict) -> bool:
    """A speculators-format draft config (as trained): it names its model type or its transformer layer.

    Wider than draft.is_speculators_format (which decides where the reader finds the flags):
    export and replay take a draft that names only its transformer_layer_config."""
    return "speculators_model_type" in config or "transformer_layer_config" in config
