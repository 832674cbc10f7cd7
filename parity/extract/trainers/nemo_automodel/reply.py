"""The reply of NeMo Automodel's probe (parity.extract.trainers.nemo_automodel.probe), typed once
for the child that writes it (`NemoAutomodelReply.checked`, in the release's environment) and the
parent that reads it (`NemoAutomodelReply.read`): the envelope (parity.contract.reply) plus what
the probe found, and no other key.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from ....contract.reply import BuiltReply, FamilyReply, FindingsReply, Slot, TrainerReply


class NemoAutomodelReply(TrainerReply, FindingsReply, FamilyReply, BuiltReply):
    """What NeMo Automodel's probe answers: the release family that ran it, the ids its target
    class took, each H-wide slice of the draft's fc input and the state its loss target's logits
    come from, named numerically; the alignment; the draft as its recipe builds it."""

    code_paths: dict[str, str] = Field(default_factory=dict, description="Its code the family runs, by role.")
    refused: bool = Field(default=False, description="Its own resolution refused the run (its error says how).")
    ids: list[int] | None = Field(default=None, description="The aux ids its target class took, in the order "
                                  "given.")
    default_ids: list[int] | None = Field(default=None, description="Its default ids for the target's depth.")
    cache_ids: list[int] | None = Field(default=None, description="The offline path: the ids its cache's manifest "
                                        "records (aux_layer_ids, as its precompute's target class took them).")
    cache_dtype: str | None = Field(default=None, description="The offline path: the dtype its cache stores the "
                                    "states in (the manifest's).")
    fc: tuple[Slot, ...] | None = Field(default=None, description="Each H-wide slice of the draft's fc input, in "
                                        "order, named by numerical identity.")
    target: Slot | None = Field(default=None, description="The state its loss target's logits come from (the "
                                "target lm_head's input), named by numerical identity.")
    alignment: str | None = Field(default=None, description="How the batch lines tokens and the loss target up "
                                  "with the states, in words (read off the batch).")

    @model_validator(mode="after")
    def _sample_unless_stopped(self) -> "NemoAutomodelReply":
        if self.error is None and (self.fc is None or self.target is None or self.ids is None
                                   or self.alignment is None):
            raise ValueError("a reply with no error names the ids, the fc slots, the loss target and the alignment")
        return self


__all__ = ["NemoAutomodelReply"]
