"""The verdict: compare the training contract with the serving contract, decide, and find the id fix.

`check(training, target, draft)` (both read once, parity.inputs) extracts the serving contract (asking the
engine, in the same process, what each candidate id list would capture), diffs the
two slot by slot, and returns a `CheckResult` whose verdict is 'parity' or 'drift'.
parity.gate adds export's advice for a draft the engine cannot load (export itself decides
with this check, so the two never import each other).
The fix is never computed from a rule we typed: a candidate is kept only if the
installed engine, run on it, feeds exactly the training fc input; then a second full
extraction with the fixed config (through the engine's own config reader) confirms it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .contract import BuiltDraft, ContractDiff, FindingKind, ServingContract, TrainingContract, diff
from .contract.diff import unread_keys
from .contract.reply import Candidate
from .errors import ExitCode
from .extract.candidates import candidate_id_lists
from .extract.engines import BoundEngine, engine as default_engine
from .inputs import Draft, Target

class Conclusion(StrEnum):
    """A command's conclusion, each member declared with the exit code a command ends with on it
    (the README's table); written as its value in JSON ('parity', ...)."""

    exit_code: ExitCode

    def __new__(cls, value: str, exit_code: ExitCode):
        member = str.__new__(cls, value)
        member._value_ = value
        member.exit_code = exit_code
        return member


class Verdict(Conclusion):
    """What a comparison concludes (`check`, `forward`, the matrix's cells)."""

    parity = "parity", ExitCode.OK  # the draft is fed (or computes) what it was trained on
    drift = "drift", ExitCode.DRIFT  # it is not: the differences say where, a fix where one exists
    unservable = "unservable", ExitCode.DRIFT  # the engine cannot run the draft as written at all
    error = "error", ExitCode.BAD_INPUT  # the comparison itself could not run (forward)

    @property
    def word(self) -> str:
        """The verdict as a report's headline starts: 'PARITY', 'DRIFT', ..."""
        return self.value.upper()

    @classmethod
    def worst(cls, verdicts) -> "Verdict":
        """The verdict of several comparisons: an error first, then a drift, then an unservable
        case; parity only when every one is (and for none)."""
        found = {cls(v) for v in verdicts}
        return next((v for v in (cls.error, cls.drift, cls.unservable) if v in found), cls.parity)


class Difference(BaseModel):
    """One reason the two sides disagree, in a form both humans and CI can read."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["slot", "field", "lock", "launch"] | FindingKind = Field(
        description="'slot' (a slot fed another state), 'field' (a contract field differs), 'lock' (the installed "
        "trainer left the lock), 'launch' (the engine resolves the serve command otherwise than asked), or the "
        "kind of an error finding, such as 'engine_error'.")
    where: str = Field(description="Slot number, field name or side the difference is in.")
    training: Any = Field(default=None, description="The training side's value.")
    serving: Any = Field(default=None, description="The serving side's value.")
    message: str = Field(description="One sentence for a human.")

    @property
    def blocks_serving(self) -> bool:
        """It is the error finding of a kind that means the engine cannot run the draft at all."""
        return isinstance(self.kind, FindingKind) and self.kind.blocks_serving


class Suggestion(BaseModel):
    """The id list to write in the draft config so the engine feeds the training contract."""

    model_config = ConfigDict(frozen=True)

    engine: str = Field(description="The serving engine, e.g. 'sglang'.")
    engine_version: str = Field(description="The release the fix was found and verified under.")
    eagle_aux_hidden_state_layer_ids: list[int] = Field(description="The ids, in the engine's own convention for "
                                                        "config_key (the name is EAGLE-3's; a DFlash draft's too).")
    config_key: str = Field(default="eagle_config.eagle_aux_hidden_state_layer_ids",
                            description="Where in the draft's config.json the engine reads them for the draft's "
                            "kind, e.g. 'dflash_config.target_layer_ids' for a DFlash draft.")
    verified: bool = Field(description="A full extraction with these ids written in the config matched.")
    serving_fc_input: list[str | None] = Field(description="What the engine feeds with these ids.")


class ExportAdvice(BaseModel):
    """For a draft the engine cannot load as written: what `parity export` would do with it,
    found by running export's own gate (so the advice never promises what export refuses)."""

    model_config = ConfigDict(frozen=True)

    exportable: bool = Field(description="`parity export` would write a draft the engine serves as trained.")
    eagle_aux_hidden_state_layer_ids: list[int] | None = Field(
        default=None, description="The ids export would write (in the engine's convention).")
    serving_fc_input: list[str | None] = Field(default_factory=list,
                                               description="What the engine feeds the exported draft.")
    reason: str | None = Field(default=None, description="Why export refuses, when it does.")


class DraftFix(BaseModel):
    """For a built-draft drift: the served config.json edit that makes the engine build the
    draft as training did, verified by extracting the served side again with it."""

    model_config = ConfigDict(frozen=True)

    edit: dict[str, Any] = Field(description="Top-level config.json keys and the values to write (the trained "
                                 "build's), e.g. {'tie_word_embeddings': False}.")
    verified: bool = Field(description="With the edit, the engine's build equals the trained one in every judged field.")
    still_differ: list[str] = Field(default_factory=list, description="Judged fields that still differ with the edit "
                                    "(empty when verified).")
    left: str | None = Field(default=None, exclude_if=lambda v: v is None, description="What else the extraction "
                             "with the edit leaves, so that the edit is no fix: the draft not built, or a reason the "
                             "engine cannot serve it.")


# How a judged field of the built draft is set in a served (EAGLE-3 form) config.json.
_HF_ACT = {"gelu_tanh": "gelu_pytorch_tanh"}


def draft_edit(trained: BuiltDraft, served_config: dict[str, Any], fields: list[str]) -> dict[str, Any]:
    """The config.json keys that give the served build `trained`'s value of each of `fields`."""
    edit: dict[str, Any] = {}
    for name in fields:
        if name in BuiltDraft.WIRING:
            continue
        if name == "lm_head_tied":
            edit["tie_word_embeddings"] = trained.lm_head_tied
        elif name == "hidden_act":
            edit["hidden_act"] = _HF_ACT.get(trained.hidden_act, trained.hidden_act)
        elif name in ("rope_frequencies", "rope_scale"):
            if isinstance(served_config.get("rope_parameters"), dict):  # transformers 5's form
                edit["rope_parameters"] = {"rope_theta": trained.rope_theta, "rope_type": "default",
                                           **(trained.rope_scaling or {})}
            else:
                edit["rope_theta"] = trained.rope_theta
                edit["rope_scaling"] = trained.rope_scaling
        else:
            edit[name] = getattr(trained, name)
    return edit


class CheckResult(BaseModel):
    """The gate's decision with everything needed to explain it."""

    model_config = ConfigDict(frozen=True)

    verdict: Verdict
    training: TrainingContract
    serving: ServingContract
    diff: ContractDiff
    differences: list[Difference]
    notes: list[str] = Field(default_factory=list, description="Findings that are not train/serve differences.")
    suggestion: Suggestion | None = None
    unfixable: str | None = Field(default=None, description="Why the installed engine cannot reproduce the training contract.")
    unservable: str | None = Field(default=None, description="Why the engine cannot load or run this "
                                   "draft at all (verdict 'unservable').")
    export: ExportAdvice | None = Field(default=None, description="For an unservable speculators-format "
                                        "draft: what `parity export` would do with it.")
    draft_fix: DraftFix | None = Field(default=None, exclude_if=lambda v: v is None, description="For a built-draft drift: the served config edit "
                                       "that makes the engine build the draft as training did.")
    candidates_tried: list[Candidate] = Field(default_factory=list)
    releases: str | None = Field(default=None, exclude_if=lambda v: v is None, description="Checking a lock "
                                 "under other releases than it was written under: which ('locked under vllm 0.34.0, "
                                 "checked under vllm 0.33.0').")

    def to_json_dict(self) -> dict[str, Any]:
        return json.loads(self.model_dump_json())


def decide(training: TrainingContract, serving: ServingContract, retrained: TrainingContract | None = None
           ) -> tuple[Verdict, ContractDiff, list[Difference], str | None]:
    """The one decision every caller (check, lock checks, the plugin, the matrix) uses:
    (verdict, slot diff, differences, why unservable).

    `retrained`: for a lock, the training contract the installed trainer gives today; where it
    left the locked one (`training`), each change is a difference of its own."""
    d = diff(training, serving)
    differences = _differences(d, training, serving) + launch_differences(serving) + key_differences(training, serving)
    if retrained is not None:
        differences += _lock_differences(training, retrained)
    unservable = [f.message for f in serving.findings if f.severity == "error" and f.kind.blocks_serving]
    unservable += target_misfits(serving)
    if unservable:
        return Verdict.unservable, d, differences, "; ".join(unservable)
    return (Verdict.parity if not differences else Verdict.drift), d, differences, None


def _differences(d: ContractDiff, training: TrainingContract, serving: ServingContract) -> list[Difference]:
    out = [Difference(kind="slot", where=f"slot {s.slot}", training=s.expected and s.expected.name,
                      serving=s.actual and s.actual.name,
                      message=f"slot {s.slot}: trained on {s.expected.name if s.expected else 'nothing'}, "
                              f"served {s.actual.name if s.actual else 'nothing'} ({s.why})")
           for s in d.mismatched_slots]
    out += [Difference(kind="field", where=f.field, training=f.expected, serving=f.actual,
                       message=f"{f.field}: trained with {f.expected}, served with {f.actual}")
            for f in d.fields]
    for side, c in (("training", training), ("serving", serving)):
        for f in c.findings:
            if f.severity == "error" and f.kind != FindingKind.not_captured:
                out.append(Difference(kind=f.kind, where=side, message=f"{side}: {f.message}"))
    return out


def key_differences(training: TrainingContract, serving: ServingContract) -> list[Difference]:
    """Each key the served config sets that the training side read while building the draft
    and the engine never reads while building it (docs/built-draft.md, "Config keys read"):
    training built the draft with it, the engine builds it without."""
    unread, _ = unread_keys(training.draft, serving.draft)
    release = f"{serving.engine} {serving.provenance.version}"
    trainer = f"{training.provenance.package} {training.provenance.version}"
    return [Difference(kind=FindingKind.config_key_unread, where=f"config.{key}", training="read", serving="never read",
                       message=f"{release} never reads `{key}`, which {trainer} built the draft with: the served "
                               "config sets it and the engine builds the draft without it")
            for key in unread]


def target_misfits(serving: ServingContract) -> list[str]:
    """What the served draft, as the engine builds it, cannot do with this target at all: emit a
    token id the target's vocabulary does not have (an lm_head with more rows than the target
    has tokens, or a d2t table reaching past it). Whatever training did, such a draft is not
    served as trained (docs/built-draft.md)."""
    built, vocab = serving.draft, serving.target_model.vocab_size
    if built is None or vocab is None:
        return []
    release = f"{serving.engine} {serving.provenance.version}"
    out = []
    if built.draft_vocab_size is not None and built.draft_vocab_size > vocab:
        out.append(f"the draft's lm_head has {built.draft_vocab_size} rows (draft_vocab_size, as {release} builds "
                   f"it), more than the target's {vocab} tokens: it proposes ids the target cannot verify")
    elif built.max_token_id is not None and built.max_token_id >= vocab:
        out.append(f"the draft's d2t table maps to target id {built.max_token_id}, past the target's {vocab} "
                   f"tokens (ids 0..{vocab - 1})")
    return out


def launch_differences(serving: ServingContract) -> list[Difference]:
    """What the serve command the engine resolved changes from what the user asked (each given
    field it overrode), and an algorithm under which the engine never feeds an EAGLE-3 draft its
    aux states. Defaults the user did not give are reported in the contract, not judged."""
    launch = serving.launch
    if launch is None:
        return []
    release = f"{serving.engine} {serving.provenance.version}"
    out = [Difference(kind="launch", where=o.field, training=o.requested, serving=o.effective,
                      message=f"launch {o.field}: asked {o.requested}, {release} runs {o.effective} (changed by "
                              f"{o.by})") for o in launch.overrides]
    if launch.serves_the_draft is False:
        field = launch.algorithm_field
        algorithm = launch.effective.get(field)
        dflash = launch.draft_kind == "dflash"
        answer = launch.algorithm_answer or ("its is_dflash_family()" if dflash else "its is_eagle3()")
        wanted = ("dflash" if dflash else "eagle3") if field == "method" else ("DFLASH" if dflash else "EAGLE3")
        out.append(Difference(kind="launch", where=field, training=wanted, serving=algorithm,
                              message=f"launch {field}: {algorithm} is not {launch.kind_named} in {release} ({answer} "
                                      f"is False): the target's states the {launch.kind_named} draft was trained on "
                                      "are never captured for it, so its fc is never fed what it was trained on"
                              if dflash else
                                      f"launch {field}: {algorithm} is not EAGLE-3 in {release} ({answer} is "
                                      "False): the target's aux hidden states are never captured, "
                                      "so the EAGLE-3 draft's fc is never fed what it was trained on"))
    return out


# The launch field that is the served draft depth, per engine (the engine's own names): SGLang's
# draft forward steps, vLLM's proposed tokens (one draft step each).
SERVED_STEPS = ("speculative_num_steps", "num_speculative_tokens")


def depth_notes(training: TrainingContract, serving: ServingContract) -> list[str]:
    """A warning when the engine drafts deeper than training unrolled the draft (docs/launch.md,
    "The trained depth"): past the trained depth the draft proposes from its own outputs deeper
    than it ever saw, so acceptance there degrades; the draft is still fed what it was trained
    on and the server runs, so it is a note, not a drift."""
    depth, launch = training.trained_depth, serving.launch
    if depth is None or launch is None:
        return []
    field = next((f for f in SERVED_STEPS if isinstance(launch.effective.get(f), int)), None)
    if field is None or launch.effective[field] <= depth.steps:
        return []
    served = launch.effective[field]
    trained = f"{depth.steps}" if depth.recorded else f"{depth.steps}, not recorded"
    return [f"launch {field}: {serving.engine} {serving.provenance.version} drafts {served} steps deep, deeper than "
            f"training unrolled the draft ({trained}: {depth.source}): proposals past step {depth.steps} come from "
            f"deeper than the draft ever saw its own outputs, so their acceptance degrades (serve with {field} "
            f"{depth.steps} or retrain deeper; a warning, not a drift: docs/launch.md)"]


def _lock_differences(locked: TrainingContract, fresh: TrainingContract) -> list[Difference]:
    """What the installed trainer now does differently from what the lock recorded."""
    moved = diff(locked, fresh)
    name = lambda tap: tap.name if tap else "nothing"  # noqa: E731
    out = [Difference(kind="lock", where="training", training=s.expected and s.expected.name,
                      serving=s.actual and s.actual.name,
                      message=f"the installed {fresh.provenance.package} {fresh.provenance.version} now trains slot "
                              f"{s.slot} on {name(s.actual)}, the lock says {name(s.expected)} ({s.why})")
           for s in moved.mismatched_slots]
    out += [Difference(kind="lock", where=f.field, training=f.expected, serving=f.actual,
                       message=f"training {f.field} changed since the lock: {f.expected} -> {f.actual}")
            for f in moved.fields]
    was, now = locked.trained_depth, fresh.trained_depth  # a lock written before the field has none
    if was is not None and now is not None and was.steps != now.steps:
        out.append(Difference(kind="lock", where="trained_depth", training=was.steps, serving=now.steps,
                              message=f"training trained_depth changed since the lock: {was.steps} -> {now.steps} "
                                      f"({now.source})"))
    return out


def under_layout(serving: ServingContract) -> str:
    """` under the serve command's parallel layout (pp 2)` where the capture ran on several ranks, else ''."""
    layout = serving.launch.layout if serving.launch is not None else None
    return f" under the serve command's parallel layout ({layout.said()})" if layout and layout.run else ""


def _verify(target: Target, draft: Draft, ids: list[int], engine: BoundEngine, kind: str,
            serving: ServingContract | None = None) -> ServingContract:
    """Extract again with `ids` written where the engine reads a `kind` draft's ids, in a copy of
    the draft; under the serve command's arguments where the capture ran under a layout of several
    ranks (the ids are verified where they were found)."""
    tmp = Path(tempfile.mkdtemp(prefix="parity-fix-"))
    layout = {"serve_args": tuple(serving.launch.argv)} if serving is not None and under_layout(serving) else {}
    try:
        fixed = Draft(path=tmp, config=engine.write_ids(draft.config, ids, kind), given=draft.name)
        fixed.config_file.write_text(json.dumps(fixed.config))
        return engine.probe_serving(target, fixed, **layout)[0]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check(training: TrainingContract, target: Target, draft: Draft,
          engine: BoundEngine | None = None, verify: bool = True, *,
          retrained: TrainingContract | None = None, serve_args: tuple[str, ...] | None = None) -> CheckResult:
    """The serving contract extracted, decided against `training`, and the id fix solved and
    verified on the installed engine: everything but export's advice for an unloadable draft
    (parity.gate.check adds it; export's own gate is this one).
    `engine`: the serving engine and its release (default: the default engine, installed release).
    `retrained`: checking a lock, the training contract extracted today (see `decide`).
    `serve_args`: the serve command's arguments, resolved by the engine (the launch contract)."""
    candidates = candidate_id_lists(training.fc_input)
    engine = engine or default_engine()
    serving, tried = engine.probe_serving(target, draft, candidates=candidates, serve_args=serve_args)
    verdict, d, differences, unservable = decide(training, serving, retrained)
    notes = [f"{c.side}: {f.message}" for c in (training, serving) for f in c.findings
             if f.severity == "warning" or f.kind == FindingKind.not_captured]
    notes += depth_notes(training, serving)

    suggestion, unfixable = None, None
    # The algorithm the serve command resolves to feeds this draft no states (launch): no ids fix that.
    unserved = serving.launch is not None and serving.launch.serves_the_draft is False
    if verdict is Verdict.drift and _slots_differ(d, training, serving) and not unserved:  # ids fix slots only (not a flag, a tensor, the lock)
        suggestion, unfixable = _solve(training, serving, tried, target, draft, engine, verify)
    elif verdict is Verdict.unservable:
        # slots are never fed; a vocabulary difference stays (it says why ids run past the target)
        # (and the serve command's launch differences: an algorithm for another kind of draft is why, often)
        differences = [x for x in differences if x.kind in ("lock", "launch") or x.blocks_serving
                       or x.where.startswith("vocab.")]
        misfits = target_misfits(serving)
        if misfits:  # the draft as built: no id list changes it, whatever it is fed
            unfixable = (f"{IDS_MEND_NOTHING}: the ids choose which hidden states the draft is fed, and what "
                         f"{serving.engine} {serving.provenance.version} cannot serve is the draft's vocabulary as "
                         "it builds it (the reason it is unservable)")
        elif not unloadable(serving):  # the draft loads but the engine raised on its ids: other ids may be the fix
            suggestion, unfixable = _solve(training, serving, tried, target, draft, engine, verify)
    draft_fix = None
    built = [f.field.removeprefix("draft.") for f in d.fields if f.field.startswith("draft.")]
    if verdict is Verdict.drift and built and training.draft is not None:
        draft_fix = _fix_draft(training, target, draft, built, engine, verify)
    return CheckResult(verdict=verdict, training=training, serving=serving, diff=d,
                       differences=differences, notes=notes, suggestion=suggestion,
                       unfixable=unfixable, unservable=unservable, draft_fix=draft_fix,
                       candidates_tried=tried)


def _fix_draft(training: TrainingContract, target: Target, draft: Draft, fields: list[str], engine: BoundEngine,
               verify: bool) -> DraftFix | None:
    """The config edit for the built fields that differ, verified by building the served draft
    again with it (the weights are linked, never copied or written); None where only the draft
    class's wiring differs (BuiltDraft.WIRING: no config key sets it)."""
    edit = draft_edit(training.draft, draft.config, fields)
    if not edit:  # only the draft class's wiring differs: no config key sets it
        return None
    if not verify:
        return DraftFix(edit=edit, verified=False, still_differ=[])
    tmp = Path(tempfile.mkdtemp(prefix="parity-draft-fix-"))
    try:
        for f in draft.path.iterdir():
            if f.name != "config.json":
                (tmp / f.name).symlink_to(f.resolve())
        fixed = Draft(path=tmp, config={**draft.config, **edit}, given=draft.name)
        fixed.config_file.write_text(json.dumps(fixed.config))
        served = engine.probe_serving(target, fixed)[0]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    still = [f.field.removeprefix("draft.") for f in diff(training, served).fields if f.field.startswith("draft.")]
    unservable = decide(training, served)[3]
    left = ("the draft is not built with it" if served.draft is None else
            f"the engine cannot serve the draft with it: {unservable}" if unservable else None)
    return DraftFix(edit=edit, verified=not still and left is None, still_differ=still, left=left)


def unloadable(serving: ServingContract) -> bool:
    """The engine cannot load the draft as written (rather than raising on its ids)."""
    return any(f.kind == FindingKind.draft_unloadable for f in serving.findings)


def _slots_differ(d: ContractDiff, training: TrainingContract, serving: ServingContract) -> bool:
    """Whether the engine feeds other states than training read, in its default model runner or
    any other (vLLM's v1 and v2): what another id list can change."""
    want = [t.name for t in training.fc_input]
    return bool(d.mismatched_slots) or any([t.name if t else None for t in fed] != want
                                           for fed in serving.runners.values())


# How an unfixable reason begins when no id list, wherever written, mends what the report shows.
IDS_MEND_NOTHING = "no config edit of the ids mends it"


def fix_leaves(training: TrainingContract, fixed: ServingContract) -> str | None:
    """What the extraction of a draft with an ids fix written still leaves of what the fix is
    offered for, decided as a check decides (`decide`): another fc input than training's, an
    error finding, or a reason the engine cannot serve the draft (its vocabulary past the
    target's, say); None when the fix mends them all."""
    want = [t.name for t in training.fc_input]
    fed = [t.name if t else None for t in fixed.fc_input]
    errors = "; ".join(f.message for f in fixed.findings if f.severity == "error")
    if fed != want or errors:
        return f"the engine feeds {fed}" + (f" ({errors})" if errors else "")
    unservable = decide(training, fixed)[3]
    if unservable:
        return f"{fixed.engine} {fixed.provenance.version} still cannot serve the draft: {unservable}"
    return None


def _solve(training: TrainingContract, serving: ServingContract, tried: list[dict], target: Target, draft: Draft,
           engine: BoundEngine, verify: bool):
    """The ids fix (a Suggestion, None) or why there is none (None, the reason): the first tried id
    list that feeds the training fc input and changes the draft config where the engine reads the
    draft's kind's ids, verified (unless `verify` is False) by a full extraction with it written
    that leaves nothing of what the check found (`fix_leaves`)."""
    want = [t.name for t in training.fc_input]
    kind = serving.draft_kind
    release = f"{serving.engine} {serving.provenance.version}"
    key = engine.ids_key(kind)
    if key is None:
        return None, f"{release} reads a {kind} draft's ids from no config key parity knows of"
    if not tried:
        bad = [t.name for t in training.fc_input if t is None or not t.is_plain_stream()]
        return None, (f"the training fc input uses {bad}, which {serving.engine} cannot capture: it captures "
                      "only residual-stream states at layer boundaries")
    fits = [c for c in tried if c.fc_input is not None and list(c.fc_input) == want and not c.error]
    if not fits:
        got = "; ".join(f"{list(c.ids)} -> {list(c.fc_input) if c.fc_input else c.error}" for c in tried)
        return None, f"no id list makes {release} feed {want}{under_layout(serving)} (tried {got})"
    match = next((c for c in fits if engine.write_ids(draft.config, list(c.ids), kind) != draft.config), None)
    if match is None:  # the engine already reads them where the fix would write them: writing them changes nothing
        return None, (f"{IDS_MEND_NOTHING}: {key} already holds {list(fits[0].ids)}, which feed {want} on the "
                      "engine's model")
    ids = list(match.ids)
    verified = False
    if verify:
        left = fix_leaves(training, _verify(target, draft, ids, engine, kind, serving))
        if left is not None:
            return None, f"ids {ids} capture {want} on the engine's model, but written in {key}, {left}"
        verified = True
    return Suggestion(engine=serving.engine, engine_version=serving.provenance.version,
                      eagle_aux_hidden_state_layer_ids=ids, config_key=key,
                      verified=verified, serving_fc_input=want), None
