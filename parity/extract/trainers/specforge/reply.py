"""The reply of SpecForge's probe (parity.extract.trainers.specforge.probe), typed once for the
child that writes it (`SpecForgeReply.checked`, run in the release's environment, which has
pydantic: it runs SGLang) and the parent that reads it (`SpecForgeReply.read`, in
parity.extract.trainers.specforge): the envelope (parity.contract.reply) plus what the probe
found, and no other key.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from ....contract.reply import FamilyReply, FindingsReply, Slot, TrainerReply


class SpecForgeReply(TrainerReply, FindingsReply, FamilyReply):
    """What SpecForge's probe answers: the release family that ran it, the ids its own resolution
    takes and how its capture is set, each H-wide slice of the training sample's fc input and its
    loss target named numerically, the target head's check and the alignment, the draft as
    SpecForge builds it."""

    code_paths: dict[str, str] = Field(default_factory=dict, description="SpecForge's code the family runs, by role "
                                       "(`normalizer` among them), and the pinned SGLang's capture (`sglang_capture`): a trainer's code and an "
                                       "engine's, unlike an engine probe's code_paths (EngineReply).")
    refused: bool = Field(default=False, description="SpecForge's own resolution refused the run (its error says "
                          "how, in its words).")
    capture_method: str | None = Field(default=None, description="How SpecForge's resolution sets the capture.")
    ids: list[Any] | None = Field(default=None, description="The ids SpecForge's resolution takes.")
    features: dict[str, str] | None = Field(default=None, description="The names under which SpecForge stores the "
                                            "captured features (`aux`, `last`).")
    capture_ids: list[int] | None = Field(default=None, description="The layer indices the pinned SGLang's model "
                                          "captures once SpecForge set the capture.")
    fc: tuple[Slot, ...] | None = Field(default=None, description="Each H-wide slice of the training "
                                        "sample's fc input, in order, named by numerical identity.")
    target: Slot | None = Field(default=None, description="The loss target, named by numerical identity.")
    target_head_rel_err: float | None = Field(default=None, description="Relative error of SpecForge's "
                                              "TargetHead on the loss target against the reference model's logits.")
    alignment: str | None = Field(default=None, description="Which state the loss target at a position is, read off "
                                  "TargetHead.preprocess on position markers, in words.")

    @model_validator(mode="after")
    def _sample_unless_stopped(self) -> "SpecForgeReply":
        if self.error is None and (self.fc is None or self.target is None or self.ids is None
                                   or self.alignment is None or "normalizer" not in self.code_paths):
            raise ValueError("a reply with no error names the ids, the fc slots, the loss target, the alignment "
                             "and the normalizer's code path")
        return self


__all__ = ["SpecForgeReply"]
