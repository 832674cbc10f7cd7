"""The reply of speculators' probe (parity.extract.trainers.speculators.probe), typed once for the
child that writes it (`SpeculatorsReply.checked`, run in the release's environment, which has
pydantic: speculators' own configs are pydantic models) and the parent that reads it
(`SpeculatorsReply.read`, in parity.extract.trainers.speculators): the envelope
(parity.contract.reply) plus what the probe found, and no other key.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..config_class import ConfigSchema
from ....contract.reply import FamilyReply, ForwardReply, ForwardVariant, TrainerReply


class DataPath(BaseModel):
    """One data path of the release run on the marked dump: which dumped slots its fc and its loss
    target read, how positions line up, and whether its transfer alters the values."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code_path: str = Field(description="The path's entry point, by qualified name.")
    transfer: str | None = Field(default=None, description="How the states reach it (a connector's transfer).")
    backend: str | None = Field(default=None, description="The hidden-states backend it was run with.")
    via: str | None = Field(default=None, description="The dataset class it reads through (older families).")
    writer: str | None = Field(default=None, description="What wrote the dump it reads.")
    fc_slots: list[int] = Field(description="The dumped slots its fc input reads, in order.")
    target_slot: int = Field(description="The dumped slot its loss target reads.")
    alignment: str = Field(description="How positions line up, in words.")
    offsets: dict[str, int] | None = Field(default=None, description="Each tensor's constant position shift "
                                           "(None: not a constant shift).")
    lossy: bool = Field(description="Its transfer or augmentation alters hidden-state values.")
    lossy_reason: str | None = Field(default=None, description="What alters them.")
    markers_exact: bool = Field(description="Every marker came back exact.")
    max_marker_error: float = Field(description="The largest marker error read back.")
    default: bool = Field(default=False, description="The release's training takes this path by default.")


class PathFailed(BaseModel):
    """A data path that exists but failed on the marked dump."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code_path: str
    error: str
    where: str | None = Field(default=None, description="The line of the release's code that raised.")


class PathSkipped(BaseModel):
    """A data path not run here, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code_path: str
    reason: str


class DFlashRun(BaseModel):
    """A DFlash draft: the release's DFlash model run on the data path's states."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(description="The DFlash model class run (`module.Class`).")
    fc_chunk_order: list[int] = Field(description="Which dumped state its fc reads at each of its K positions.")


class SpeculatorsReply(FamilyReply, TrainerReply):
    """What speculators' probe answers: each data path of the release run on a marked dump (which
    slots its fc and its loss target read, how they align), the draft as the release builds it."""

    paths: list[DataPath] = Field(default_factory=list, description="Each data path that ran.")
    looked_for: list[str] = Field(default_factory=list, description="The code paths looked up in the installed "
                                  "source, found or not.")
    errors: list[PathFailed] = Field(default_factory=list, description="Each data path that failed on the "
                                     "marked dump.")
    skipped: list[PathSkipped] = Field(default_factory=list, description="Each data path not run here, and why.")
    preprocess: str | None = Field(default=None, description="The batch preprocess the release's training applies "
                                   "(its shift_batch, or the DFlash preprocess), by qualified name.")
    train_transform: str | None = Field(default=None, description="The transform the release's training applies to "
                                        "the loaded states, by qualified name; None when it has none.")
    default_path: str | None = Field(default=None, description="The data path the release's training takes by "
                                     "default (a `code_path` of `paths`).")
    default_path_reason: str | None = Field(default=None, description="Why that path is the default, in words.")
    config_schema: ConfigSchema | None = Field(default=None, description="The release's draft config class as "
                                               "the draft reader uses it (its fields, defaults, boolean flags).")
    config_schema_error: str | None = Field(default=None, description="Why that class could not be read.")
    trained_depth_error: str | None = Field(default=None, description="Why the trained depth was not read.")
    dflash: DFlashRun | None = Field(default=None, description="A DFlash draft: the release's DFlash model run "
                                     "on the path's states and its fc's chunk order.")
    seconds: dict[str, float] | None = Field(default=None, description="Seconds spent importing the package and "
                                             "probing (a figure, never compared).")

    @model_validator(mode="after")
    def _paths_unless_stopped(self) -> "SpeculatorsReply":
        if self.error is None and not self.paths and not self.errors:
            raise ValueError("a reply with no error names the data paths that ran or failed")
        return self



class TrainedVariant(ForwardVariant):
    """A variant as speculators' forward side (parity.extract.trainers.speculators.forward_side)
    ran it: its own data path and draft model, teacher-forced."""

    rows: int | None = Field(default=None, ge=0, description="The training batch's rows (the sample's tokens "
                             "after shift_batch).")
    fc_width: int | None = Field(default=None, ge=0, description="The width of the fc input the data path built "
                                 "(slots times the hidden size).")
    position_ids: list[int] | None = Field(default=None, description="The batch's position_ids as speculators "
                                           "numbers the rows (shift_batch: row t at t+1), moved by the request's "
                                           "positions where asked.")
    flags: dict[str, bool] | None = Field(default=None, description="The draft config's norm flags as the draft "
                                          "model read them.")
    dump_layout: list[str] | None = Field(default=None, description="The dump's slots the sample was written "
                                          "with, as tap names, in order.")


class SpeculatorsForwardReply(ForwardReply[TrainedVariant]):
    """What speculators' forward side answers (`parity forward`'s training path)."""


__all__ = ["SpeculatorsForwardReply", "SpeculatorsReply", "TrainedVariant"]
