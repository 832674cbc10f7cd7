"""A structured, slot-by-slot difference between two contracts.

`diff(expected, actual)` never decides anything itself: it lists what differs and
explains each slot in domain words ("off by one layer", "embedding vs decoder
layer", "pre- vs post-norm"). The gate renders and decides on it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .models import BuiltDraft, Contract, FindingKind, TapName, TrainingContract
from .tap import Tap


class SlotDiff(BaseModel):
    """One fc slot compared across two contracts."""

    model_config = ConfigDict(frozen=True)

    slot: int = Field(ge=0, description="0-based position in the fc input.")
    expected: TapName | None = Field(description="The state the first contract puts here (None: slot absent or not captured).")
    actual: TapName | None = Field(description="The state the second contract puts here (None: slot absent or not captured).")
    verdict: Literal["match", "mismatch", "missing", "extra"] = Field(
        description="'missing': the second side has no state here; 'extra': the first side has none.")
    why: str = Field(default="", description="The kind of mismatch in domain words.")
    unidentified: bool = Field(default=False, description="The second side captured a state here, but one that "
                               "matches no state of the model (its contract's unidentified_state finding), "
                               "as opposed to capturing nothing.")


class FieldDiff(BaseModel):
    """A difference outside the fc slots: target, graph flag, vocab, embedding."""

    model_config = ConfigDict(frozen=True)

    field: str = Field(description="Dotted field name, e.g. 'graph.norm_before_residual'.")
    expected: Any = Field(description="Value in the first contract.")
    actual: Any = Field(description="Value in the second contract.")


class ContractDiff(BaseModel):
    """Everything that differs between two contracts; empty means they agree."""

    model_config = ConfigDict(frozen=True)

    slots: tuple[SlotDiff, ...] = Field(description="Every fc slot, matching or not, in order.")
    fields: tuple[FieldDiff, ...] = Field(default=(), description="Other differences.")

    @property
    def mismatched_slots(self) -> list[SlotDiff]:
        return [s for s in self.slots if s.verdict != "match"]

    @property
    def empty(self) -> bool:
        return not self.mismatched_slots and not self.fields


def explain(expected: Tap | None, actual: Tap | None, expected_all: list[Tap | None],
            unidentified: bool = False) -> str:
    """Name the kind of slot mismatch, in the words a user would search for. `unidentified`: the
    other side captured a state here, one that matches none of the model's (named in its findings)."""
    if actual is None and unidentified:
        return "captured, but matches no state of the model (see below)"
    if actual is None:
        return "requested but not captured"
    if expected is None:
        return "an extra state the other side does not have"
    if actual in expected_all:
        return f"order differs: {actual.name} is slot {expected_all.index(actual)} on the other side"
    if expected.kind == "final" or actual.kind == "final":
        other = actual if expected.kind == "final" else expected
        if other.kind == "stream" and other.norm.value == "none":
            return "post-final-norm vs pre-norm state"
        return "final-norm output vs another state"
    if expected.layer == actual.layer:
        if expected.residual != actual.residual:
            return "residual included vs layer update without residual"
        return f"same layer, different norm ({expected.norm.value} vs {actual.norm.value})"
    if 0 in (expected.layer, actual.layer):
        return "embedding output vs decoder-layer output"
    delta = actual.layer - expected.layer
    if abs(delta) == 1:
        return f"off by one layer ({'+' if delta > 0 else ''}{delta})"
    return f"different layer ({'+' if delta > 0 else ''}{delta})"


def _flag_fields(a: Contract, b: Contract) -> list[FieldDiff]:
    out = []
    for name in ("norm_before_fc", "fc_norm", "norm_output", "norm_before_residual"):
        x, y = getattr(a.graph, name), getattr(b.graph, name)
        if x is not None and y is not None and x != y:
            out.append(FieldDiff(field=f"graph.{name}", expected=x, actual=y))
    return out


def _vocab_fields(a: Contract, b: Contract) -> list[FieldDiff]:
    out = []
    for name in ("draft_vocab_size", "target_vocab_size"):
        x, y = getattr(a.vocab, name), getattr(b.vocab, name)
        if x is not None and y is not None and x != y:
            out.append(FieldDiff(field=f"vocab.{name}", expected=x, actual=y))
    x, y = a.vocab.d2t, b.vocab.d2t
    if "unknown" not in (x, y) and x != y:
        out.append(FieldDiff(field="vocab.d2t", expected=x, actual=y))
    return out


def _close(x: Any, y: Any) -> bool:
    """Equal, numbers within a relative 1e-4 (both sides round what they measure to 6 digits)."""
    if isinstance(x, (tuple, list)) and isinstance(y, (tuple, list)):
        return len(x) == len(y) and all(_close(a, b) for a, b in zip(x, y))
    if isinstance(x, float) or isinstance(y, float):
        if isinstance(x, bool) or isinstance(y, bool) or not all(isinstance(v, (int, float)) for v in (x, y)):
            return x == y
        return abs(x - y) <= 1e-4 * max(abs(x), abs(y), 1e-12)
    return x == y


def _built_fields(a: Contract, b: Contract) -> list[FieldDiff]:
    """The built drafts' judged fields (BuiltDraft.JUDGED, with a DFlash draft's own) where both
    sides say and disagree."""
    if a.draft is None or b.draft is None:
        return []
    out = []
    for name in dict.fromkeys(a.draft.JUDGED + b.draft.JUDGED):
        x, y = getattr(a.draft, name), getattr(b.draft, name)
        if x is not None and y is not None and not _close(x, y):
            out.append(FieldDiff(field=f"draft.{name}", expected=_plain(x), actual=_plain(y)))
    return out


def unread_keys(trained: BuiltDraft | None, served: BuiltDraft | None) -> tuple[list[str], list[str]]:
    """Of the keys the served config sets and the engine never read while building the draft:
    (those the training side read, set to other than either side's config class takes without
    them, and not read for training only: training built the draft with them, the engine
    without; those to show: the rest that either side read or that are off the engine's default).
    A key at the trainer's default (speculators' `norm_before_fc: false`) built the trained draft
    as its absence does, and a key read for training only (`config_keys_training_only`: SpecForge's
    `pad_token_id`, the padding row of an embedding the checkpoint holds) changes nothing the
    draft it built computes: what the engine builds without it is the built-draft comparison's
    and the forward pass's to judge, not this one's. Empty where either side did not record its reads."""
    if trained is None or served is None or trained.config_keys_read is None or served.config_keys_unread is None:
        return [], []
    used = set(trained.config_keys_read)
    default = set(served.config_keys_default or ()) | set(trained.config_keys_default or ())
    only = set(trained.config_keys_training_only or ())
    unread = [k for k in served.config_keys_unread if k in used and k not in default and k not in only]
    return unread, [k for k in served.config_keys_unread
                    if k not in unread and (k in used or k not in (served.config_keys_default or ()))]


def diff(expected: Contract, actual: Contract) -> ContractDiff:
    """Compare `actual` against `expected`, slot by slot, then the rest."""
    canon = lambda c: [t.canonical(c.target_model.num_hidden_layers) if t is not None else None  # noqa: E731
                       for t in c.fc_input]
    exp, act = canon(expected), canon(actual)
    unidentified = {f.slot for f in actual.findings if f.kind == FindingKind.unidentified_state and f.slot is not None}
    slots = []
    for i in range(max(len(exp), len(act))):
        e = exp[i] if i < len(exp) else None
        a = act[i] if i < len(act) else None
        if e is not None and a is not None and e == a:
            slots.append(SlotDiff(slot=i, expected=e, actual=a, verdict="match"))
            continue
        verdict = "missing" if a is None else "extra" if e is None else "mismatch"
        slots.append(SlotDiff(slot=i, expected=e, actual=a, verdict=verdict, why=explain(e, a, exp, i in unidentified),
                              unidentified=a is None and i in unidentified))

    fields = _flag_fields(expected, actual) + _vocab_fields(expected, actual) + _built_fields(expected, actual)
    if expected.target_model.num_hidden_layers != actual.target_model.num_hidden_layers:
        fields.append(FieldDiff(field="target.num_hidden_layers",
                                expected=expected.target_model.num_hidden_layers,
                                actual=actual.target_model.num_hidden_layers))
    if expected.draft_kind != actual.draft_kind:  # an EAGLE-3 draft's fc and a DFlash draft's projection differ
        fields.append(FieldDiff(field="draft_kind", expected=expected.draft_kind, actual=actual.draft_kind))
    if "unknown" not in (expected.embedding, actual.embedding) and expected.embedding != actual.embedding:
        fields.append(FieldDiff(field="embedding", expected=expected.embedding, actual=actual.embedding))
    if isinstance(expected, TrainingContract) and isinstance(actual, TrainingContract):
        for name in ("target", "dump_layout", "fc_slots", "target_slot", "alignment"):
            x, y = getattr(expected, name), getattr(actual, name)
            if x != y:
                fields.append(FieldDiff(field=name, expected=_plain(x), actual=_plain(y)))
    return ContractDiff(slots=tuple(slots), fields=tuple(fields))


def _plain(value: Any) -> Any:
    if isinstance(value, Tap):
        return value.name
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value
