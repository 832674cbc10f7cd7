"""The reply of the replay probe (parity.replay.probe), typed once for the child that writes it
(`ReplayReply.checked`, run in a speculators environment) and the parent that reads it
(`ReplayReply.read`, parity.replay.run): the envelope (parity.contract.reply) plus each wiring's
score under speculators' own data path, model and metrics, and no other key.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..contract.reply import TypedReply


class WiringScoreReply(BaseModel):
    """One wiring's score as speculators' own metrics give it, summed over the batches."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slots: list[int] = Field(description="The dump slots whose states were concatenated into the fc input, in "
                             "order (the wiring).")
    full_acc: list[float] = Field(description="Per TTT step k: the fraction of positions whose drafts at steps "
                                  "0..k all equal the target's argmax (teacher forcing).")
    cond_acc: list[float] = Field(description="Per TTT step k: step k's accuracy where steps 0..k-1 were right.")
    positions: list[int] = Field(description="Per TTT step: the positions speculators scored (its metrics' "
                                 "totals).")
    loss: float = Field(description="speculators' eager KL loss, per scored position.")

    @model_validator(mode="after")
    def _one_figure_per_step(self) -> "WiringScoreReply":
        if not len(self.full_acc) == len(self.cond_acc) == len(self.positions):
            raise ValueError(f"a score names one figure per step: full_acc {len(self.full_acc)}, cond_acc "
                             f"{len(self.cond_acc)}, positions {len(self.positions)}")
        return self


class ReplayReply(TypedReply):
    """What the replay probe answers: the dataset as speculators' ArrowDataset read it, the draft
    as it loaded, each wiring's score."""

    samples: int | None = Field(default=None, ge=0, description="The samples scored (the dataset's, or the "
                                "request's limit).")
    dumped_slots: int | None = Field(default=None, ge=1, description="The slots each dump holds (the data path's "
                                     "hidden_states slots plus the verifier's last state).")
    hidden_size: int | None = Field(default=None, ge=1, description="The width of one slot (the draft's target "
                                    "hidden size).")
    fc_slots_expected: int | None = Field(default=None, ge=1, description="How many slots the draft's fc takes "
                                          "(its input width over the hidden size).")
    draft_ids: list[int] = Field(default_factory=list, description="The aux ids the draft's config names "
                                 "(eagle_aux_hidden_state_layer_ids; empty when none).")
    scores: tuple[WiringScoreReply, ...] | None = Field(default=None, description="Each wiring's score, in the "
                                                        "request's order.")
    timings: dict[str, float] = Field(default_factory=dict, description="Seconds each phase took, by phase "
                                      "(import, load, score, per wiring).")

    @model_validator(mode="after")
    def _scores_unless_stopped(self) -> "ReplayReply":
        if self.scores is None and self.error is None:
            raise ValueError("a replay reply with no error names each wiring's score")
        return self


__all__ = ["ReplayReply", "WiringScoreReply"]
