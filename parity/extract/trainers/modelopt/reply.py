"""The reply of ModelOpt's probe (parity.extract.trainers.modelopt.probe), typed once for the child
that writes it (`ModelOptReply.checked`, in the release's environment) and the parent that reads it
(`ModelOptReply.read`, in parity.extract.trainers.modelopt): the envelope (parity.contract.reply)
plus what the probe found, and no other key.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ....contract.reply import FamilyReply, FindingsReply, Slot, TrainerReply


class Exported(BaseModel):
    """What ModelOpt's exporter writes for the draft the probe's run built (default rope)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ids: list[int] | None = Field(default=None, description="eagle_config.eagle_aux_hidden_state_layer_ids as "
                                  "written (the run's, in the order it was given).")
    rope_scaling: dict[str, float | int | str | None] | None = Field(
        default=None, description="The rope_scaling it writes (0.44 on: its eagle_export_rope_scaling over a default "
        "rope).")
    rope_overrides: bool = Field(default=False, description="The rope_scaling it writes is another than the one the "
                                 "draft trained with (as the probe's run found it).")
    architectures: list[str] | None = Field(default=None, description="The architectures it names.")


class ModelOptReply(TrainerReply, FindingsReply, FamilyReply):
    """What ModelOpt's probe answers: the release family that ran it, the ids its conversion took,
    each H-wide slice of the draft's fc input and the state its loss target's logits come from,
    named numerically; the token alignment; what its exporter writes; the draft as it builds it."""

    code_paths: dict[str, str] = Field(default_factory=dict, description="ModelOpt's code the family runs, by role.")
    refused: bool = Field(default=False, description="ModelOpt's own conversion refused the run (its error says "
                          "how, in its words).")
    ids: list[int] | None = Field(default=None, description="The aux ids its conversion took (model.eagle_config), "
                                  "in the order the run gave them.")
    fc: tuple[Slot, ...] | None = Field(default=None, description="Each H-wide slice of the draft's fc input, in "
                                        "order, named by numerical identity.")
    target: Slot | None = Field(default=None, description="The state its loss target's logits come from (the "
                                "base lm_head's input), named by numerical identity.")
    alignment: str | None = Field(default=None, description="Which token the draft reads beside a position's "
                                  "states, and its loss target, in words (read off its embedding's input).")
    exported: Exported | None = Field(default=None, description="What its exporter writes for the run's draft (None: "
                                      "the release's package has no exporter of the draft).")

    @model_validator(mode="after")
    def _sample_unless_stopped(self) -> "ModelOptReply":
        if self.error is None and (self.fc is None or self.target is None or self.ids is None
                                   or self.alignment is None):
            raise ValueError("a reply with no error names the ids, the fc slots, the loss target and the alignment")
        return self


__all__ = ["Exported", "ModelOptReply"]
