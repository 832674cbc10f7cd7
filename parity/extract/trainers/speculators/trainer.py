"""speculators as a `Trainer` (parity.extract.trainers): the one object the rest of parity uses."""

from __future__ import annotations

from pathlib import Path

from ....contract import TargetModel, Tap, TrainingContract
from .draft import DraftConfig, DraftError


class SpeculatorsTrainer:
    """speculators: the training contract from its own data path, drafts in its format."""

    name = "speculators"

    @property
    def errors(self) -> tuple[type[Exception], ...]:
        from . import TrainingExtractionError

        return (TrainingExtractionError, DraftError)

    def training_contract(self, target: TargetModel, dump_layout: list[Tap] | None = None, *,
                          datagen_ids: list[int] | None = None, datagen_convention: str | None = None,
                          draft_dir: Path | None = None, release: str | None = None,
                          data_path: str | None = None, **probe) -> TrainingContract:
        """`extract_training` (see there). `probe`: the probe-module test hook extract_training
        still takes, passed through unchanged until it moves into the environment."""
        from . import extract_training

        return extract_training(target, dump_layout, datagen_ids=datagen_ids,
                                datagen_convention=datagen_convention, draft_dir=draft_dir,
                                speculators_version=release, data_path=data_path, **probe)

    def read_draft(self, draft_dir: Path) -> DraftConfig:
        """The draft as this interpreter's speculators config class reads it (draft.read_draft)."""
        from .draft import read_draft

        return read_draft(draft_dir)

    def is_trained_draft(self, config: dict) -> bool:
        """A speculators-format draft config: it names its model type or its transformer layer."""
        return "speculators_model_type" in config or "transformer_layer_config" in config


TRAINER = SpeculatorsTrainer()
