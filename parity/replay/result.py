"""What a replay measured: each wiring's accuracy per draft step, ranked, and the verdict."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from ..errors import ExitCode
from ..verdict import Conclusion

# Two wirings closer than this in step-0 accuracy (points) are not told apart.
AMBIGUOUS_POINTS = 2.0
# The served wiring may lose at most this much (points) before replay calls it drift.
LOSS_TOLERANCE_POINTS = 0.5


class ReplayVerdict(Conclusion):
    """What a replay concludes about the wiring a draft is served with."""

    parity = "parity", ExitCode.OK  # the served wiring is the trained one, and the weights agree
    drift = "drift", ExitCode.DRIFT  # the served wiring differs and loses accuracy (or cannot be scored)
    suspect = "suspect", ExitCode.DRIFT  # the weights prefer another wiring than the training contract says


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WiringScore(_Frozen):
    """One wiring of the fc input, scored by speculators' own metrics on the dumps."""

    taps: tuple[str, ...] = Field(description="The states fed to the fc, in order, e.g. ('h0', 'h2', 'h5').")
    slots: tuple[int, ...] = Field(description="The dump slots holding them, in the same order.")
    roles: tuple[Literal["training", "served", "asked", "search"], ...] = Field(
        description="Why this wiring was scored: the training contract's, the serving contract's, "
                    "one asked for with --wiring, or a search candidate.")
    full_acc: tuple[float, ...] = Field(
        description="Per draft step k: fraction of positions whose drafts at steps 0..k all equal the "
                    "target's argmax (speculators' full_acc_k, teacher forcing). Step 0 first.")
    cond_acc: tuple[float, ...] = Field(
        description="Per draft step k: step k's accuracy where steps 0..k-1 were right (cond_acc_k).")
    positions: int = Field(ge=1, description="Positions scored at step 0 (all samples, after shift_batch).")

    @model_validator(mode="after")
    def _shapes(self) -> "WiringScore":
        if len(self.taps) != len(self.slots) or not self.full_acc or len(self.full_acc) != len(self.cond_acc):
            raise ValueError("taps/slots and full_acc/cond_acc must pair up, with at least one step")
        return self

    @computed_field(description="Expected tokens per verification with len(full_acc) draft tokens "
                                "under greedy verification: 1 (the target's own token) + sum_k full_acc_k.")
    @property
    def accept_length(self) -> float:
        return 1.0 + sum(self.full_acc)

    @property
    def step0(self) -> float:
        return self.full_acc[0]


class ReplayResult(_Frozen):
    """A replay: the draft, the dumps, every scored wiring (best first) and what they mean."""

    verdict: ReplayVerdict = Field(
        description="parity: the served wiring is the trained one and the weights agree with the training "
                    "contract; drift: the served wiring differs and loses accuracy (or cannot be scored); "
                    "suspect: the draft's weights prefer another wiring than the training contract says.")
    draft: str = Field(description="The draft directory replayed.")
    data: str = Field(description="The dump directory (speculators' format) replayed on.")
    dump_layout: tuple[str, ...] = Field(description="What each dumped slot holds, e.g. ('h0','h2','h5','h8').")
    samples: int = Field(ge=1, description="Samples replayed.")
    steps: int = Field(ge=1, description="Draft (TTT) steps scored per position.")
    scores: tuple[WiringScore, ...] = Field(description="Every scored wiring, best step-0 accuracy first.")
    training: tuple[str, ...] = Field(description="The training contract's fc wiring (from the installed speculators).")
    target: str = Field(description="The loss target's state (the dump's last slot): accuracy is against "
                                    "the argmax of lm_head(norm(target)), as in training.")
    served: tuple[str | None, ...] | None = Field(
        default=None, description="The serving contract's fc wiring (None: serving not asked; a None slot: "
                                  "the engine captures nothing there).")
    served_form: str | None = Field(default=None, description="Which served config the serving contract is of.")
    served_unscored: str | None = Field(
        default=None, description="Why the served wiring could not be scored (states the dump does not hold).")
    search: Literal["exhaustive", "subsets+reorder", "none"] = Field(
        description="exhaustive: every ordered choice of slots; subsets+reorder: ascending subsets, then "
                    "every order of the best few; none: only the named wirings.")
    speculators_version: str = Field(description="The speculators release whose code ran.")
    sglang_version: str | None = Field(default=None, description="The SGLang release the served wiring is from.")
    notes: tuple[str, ...] = Field(default=(), description="What the reader should know about this replay.")
    wall_s: dict[str, float] = Field(default_factory=dict, description="Wall times of the phases, seconds.")

    def score_of(self, taps: tuple[str, ...] | None) -> WiringScore | None:
        return next((s for s in self.scores if taps is not None and s.taps == tuple(taps)), None)

    @property
    def best(self) -> WiringScore:
        return self.scores[0]

    @property
    def trained(self) -> WiringScore:
        found = self.score_of(self.training)
        assert found is not None, "the training wiring is always scored"
        return found

    def to_json_dict(self) -> dict:
        return self.model_dump(mode="json")
