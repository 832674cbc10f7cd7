"""What every probe's reply says about itself, typed once for the child that writes it and the
parent that reads it.

A probe (a child process running an engine or a trainer, parity.envs.run_module) answers with
one JSON object. Its envelope is the same whichever package it runs: the release of that
package (`release`: one field, whether the probe ran SGLang, vLLM, speculators or SpecForge),
the interpreter, and what stopped it (an error; a limit of parity's CPU harness; a failure of
parity's own code; a failure outside the inputs). The rest of a reply is the probe's own
(captured slots, findings, a family's code paths): a probe whose body is typed has its own
model, a subclass of `ProbeReply` in its engine's or trainer's folder that forbids any key it
does not name (`TypedReply`), so a key renamed on one side is an error, never a value read as
missing; `ProbeReply` itself keeps an untyped body as it came (extra keys allowed). A field that
several bodies write with one meaning is declared once here (`FamilyReply`, `FindingsReply`,
`BuiltReply`, `EngineReply`, `TrainerReply`) and inherited; one whose meaning differs for a probe
stays in that probe's model, its description saying how. `parity forward`'s sides answer with a
`ForwardReply`, each variant's record typed (`ForwardVariant`).

The child writes the envelope with `reply_header` (validated here before it is sent) and, for a
typed body, hands its handler through `TypedReply.checked` (the whole reply validated before it
is sent); the parent reads it with `ProbeReply.read` (a typed body's `read`: a reply that does
not validate is a ValidationError, parity's own failure, exit 3). The keys a stdlib-only module (parity.errors,
parity.extract.child) writes are the constants named there; tests/test_probe_reply.py holds
them equal to these fields.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from ..errors import CannotExtract, HarnessLimit, InternalError
from .models import BuiltDraft, Finding, GraphFlags, LaunchContract, TrainedDepth


class CannotExtractEntry(BaseModel):
    """A probe's `cannot_extract` entry (parity.errors.CannotExtract.entry): no family of parity
    can run the release, or the release cannot do what was asked."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    package: str = Field(description="The package the probe ran (an engine's or a trainer's distribution name).")
    version: str = Field(description="Its installed release.")
    reason: str = Field(description="Why it cannot be extracted, on one line.")
    engine_lacks: bool = Field(default=False, description="The release itself lacks what was asked (its own "
                               "answer), rather than parity lacking a family to run it.")
    unimportable: bool = Field(default=False, description="The release's code cannot be imported in the "
                               "interpreter the probe ran in (a dependency missing or too new there): "
                               "parity.extract.installed runs it in parity's environment of that release.")


class ProbeReply(BaseModel):
    """The envelope of a probe's reply: which release ran, where, and what stopped it."""

    model_config = ConfigDict(extra="allow", frozen=True)

    release: str | None = Field(
        default=None, description="The installed release of the package the probe ran (the engine's or the "
        "trainer's), as its distribution metadata states it; None only in a reply made before it was known.")
    release_declared: str | None = Field(
        default=None, description="The version the package's own code declares, where it differs from its "
        "distribution's (the speculators 0.5.0 wheel's version.py says 0.4.0).")
    engine_release: str | None = Field(
        default=None, description="A trainer that runs a serving engine for its own data generation (SpecForge "
        "runs SGLang): that engine's installed release.")
    python: str | None = Field(default=None, description="The interpreter the probe ran in (sys.executable).")
    error: str | None = Field(default=None, description="Why the probe gave no answer, on one line.")
    harness_limit: str | None = Field(
        default=None, description="A limit of parity's CPU harness met on the way (a CUDA-only path, a stand-in "
        "relied on): read as HarnessLimit, exit 2, never a verdict.")
    internal_error: str | None = Field(
        default=None, description="A failure of parity's own code met on the way (parity.extract.child.parity_fault): "
        "read as InternalError, exit 3.")
    transient: bool = Field(
        default=False, description="The probe met a failure outside its inputs (memory, a resource, a killed "
        "subprocess), decided by the child from the exception's type: the reply cache never stores it.")
    traceback: tuple[str, ...] | None = Field(
        default=None, description="The last lines of the traceback of an exception that escaped the probe (its "
        "lines as traceback.format_exc gives them, the last few kept).")
    cannot_extract: CannotExtractEntry | None = Field(
        default=None, description="No family of parity runs the release, or the release cannot do what was asked "
        "(parity.errors.CannotExtract), with the same sentence as `error`.")
    reply_cache: dict[str, str] | None = Field(
        default=None, description="Where the reply came from, noted by the parent's reply cache "
        "(parity.reply_cache.SOURCE_KEY: its status, key and why), never by the child.")

    @classmethod
    def read(cls, reply: dict[str, Any]) -> "ProbeReply":
        """The reply as the parent reads it: the envelope typed, the probe's own keys kept."""
        return cls.model_validate(reply)

    @property
    def shown_release(self) -> str:
        """The release as messages name it: '?' when the reply does not say."""
        return self.release or "?"

    def fault(self, package: str) -> InternalError | None:
        """parity's own failure the reply of `package` reports (`internal_error`), or None."""
        return InternalError(package, self.shown_release, self.internal_error) if self.internal_error else None

    def stop(self, package: str) -> "InternalError | CannotExtract | HarnessLimit | None":
        """What stopped the probe of `package` before any verdict, by type: a failure of parity's
        own code (InternalError) first, then no family to run the release, or the release lacking
        what was asked (CannotExtract), then a limit of parity's CPU harness (HarnessLimit); None
        when none did."""
        entry = self.cannot_extract
        if self.internal_error is not None:
            return self.fault(package)
        if entry is not None:
            return CannotExtract(entry.package, entry.version, entry.reason, engine_lacks=entry.engine_lacks,
                                 unimportable=entry.unimportable)
        return HarnessLimit(package, self.shown_release, self.harness_limit) if self.harness_limit else None


class TypedReply(ProbeReply):
    """A probe's reply whose body is typed: the envelope plus the fields a subclass names, and no
    other key (a key the model does not name is a ValidationError on either side)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def checked(cls, handler: Callable[[dict], dict]) -> Callable[[dict], dict]:
        """The child's side: `handler` whose reply is validated against this model before it is
        sent, unchanged when it validates. One that does not is parity's own failure: the reply
        then says so under `internal_error` (read by the parent as InternalError, exit 3), with
        the release it ran."""
        def run(request: dict) -> dict:
            reply = handler(request)
            try:
                cls.model_validate(reply)
            except ValidationError as exc:
                where = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(reply)'}: {e['msg']}" for e in exc.errors()[:3])
                line = f"the probe's reply does not match {cls.__name__} ({where})"
                return {k: reply[k] for k in ("release", "python") if k in reply} | {"error": line,
                                                                                      "internal_error": line}
            return reply
        return run



# -- the fields several probes' bodies share, declared once (a probe's model inherits the ones it
# writes; one whose meaning differs for a probe stays in that probe's model) ----------------------


class Slot(BaseModel):
    """One H-wide slice of a captured concatenation (an fc slot, or the loss target), named by
    numerical identity against the transformers reference (parity.extract.identify)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tap: str | None = Field(description="The canonical state it is (a tap name); None: none, or ambiguous.")
    rel_err: float | None = Field(default=None, description="Relative error to the nearest reference state.")
    best: str | None = Field(default=None, description="The nearest reference state, matched or not.")
    runner_up: str | None = Field(default=None, description="The second nearest.")
    runner_up_err: float | None = Field(default=None, description="Its relative error.")
    max_abs: float | None = Field(default=None, description="The slice's largest magnitude (vLLM's runs).")
    why: str | None = Field(default=None, description="Why it has no name, in words (vLLM's runs).")


class RunnerCapture(BaseModel):
    """What one model runner of an engine release captured (vLLM's V1 and V2 runners)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    config_ids: list[int] | None = Field(default=None, description="The aux ids the runner's start-up resolved "
                                         "from the config (None: none, the model default).")
    capture_ids: list[int] | None = Field(default=None, description="The layer indices its capture holds.")
    slots: tuple[Slot, ...] = Field(default=(), description="What it feeds each fc slot, named.")
    error: str | None = Field(default=None, description="Why it captured nothing (what raised).")
    dump_shape: list[int] | None = Field(default=None, description="The shape of the dump it writes (data "
                                         "generation).")

    @property
    def names(self) -> list[str | None]:
        """Each slot's tap name (None: unnamed)."""
        return [s.tap for s in self.slots]


class DraftFacts(BaseModel):
    """The draft as the engine's draft class builds it (its family's draft facts): the graph
    flags it runs with, how it maps draft tokens to target ids, whose embedding it uses, what its
    load_weights does with the checkpoint, and the built draft."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    model_class: str | None = Field(default=None, description="The draft class built (`module.Class`; SGLang).")
    draft_class: str | None = Field(default=None, alias="class", description="The draft class built "
                                    "(`module.Class`; vLLM).")
    built: BuiltDraft | None = Field(default=None, description="The draft as the engine builds it.")
    graph: GraphFlags = Field(default_factory=GraphFlags, description="The graph flags the built draft runs with.")
    vocab: dict[str, str] = Field(default_factory=dict, description="How it maps a draft token to a target id, "
                                  "as run: d2t, t2d and the mapping in words (VocabMapping's run fields).")
    embedding: str = Field(default="unknown", description="Whose token embedding it uses: 'draft', 'target' "
                           "or 'unknown'.")
    sizes: dict[str, int | None] = Field(default_factory=dict, description="The vocabulary sizes of the real "
                                         "draft config (SGLang).")
    num_aux_hidden_states: int | None = Field(default=None, description="The aux states its fc takes (SGLang).")
    lm_head_from_target: bool | None = Field(default=None, description="It loads its lm_head from the target.")
    has_weights: bool | None = Field(default=None, description="The draft directory holds a checkpoint.")
    dropped_tensors: list[str] = Field(default_factory=list, description="Checkpoint tensors its load_weights "
                                       "ignores.")
    checkpoint_renames: dict[str, str] = Field(default_factory=dict, description="Tensor names its load_weights "
                                               "takes under other names (parity export writes them so).")
    checkpoint_zero_biases: list[str] = Field(default_factory=list, description="Biases it has and the "
                                              "checkpoint lacks (zero ones make it the bias-free layer trained).")


class DFlashDraft(BaseModel):
    """What the engine's DFlash draft class makes of the draft: the class, and where the engine
    says, how many target states its fc takes and how wide its projection of them comes out."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_class: str = Field(description="The DFlash draft class built (`module.Class`).")
    num_context_features: int | None = Field(default=None, description="The target states its fc takes (SGLang).")
    num_hidden_layers: int | None = Field(default=None, description="The decoder layers it built (SGLang).")
    projected_width: int | None = Field(default=None, description="The width its own projection of the captured "
                                        "states comes out at (None: nothing was captured, or it refused them).")

    def details(self) -> dict[str, str]:
        """What it says, as a contract's provenance details ('dflash_draft.<field>')."""
        return {f"dflash_draft.{k}": str(v) for k, v in self.model_dump(exclude_none=True).items()}


class Candidate(BaseModel):
    """What the engine captures with one candidate id list written in the draft config (the fix
    search): the slots it then feeds, named, or why it could not."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ids: tuple[int, ...] = Field(description="The id list written where the engine reads the draft's ids.")
    fc_input: tuple[str | None, ...] | None = Field(description="What the engine then feeds each fc slot: a tap "
                                                    "name, or None where the state is no state parity names; "
                                                    "None when it captured nothing.")
    capture_ids: tuple[int, ...] | None = Field(default=None, exclude_if=lambda v: v is None,
                                                description="The layer indices the engine's capture then holds.")
    error: str | None = Field(default=None, description="Why this id list could not be tried, or what the "
                              "engine raised or failed to name with it.")


class FamilyReply(TypedReply):
    """A probe that ran its release through one of parity's release families (families/)."""

    family: str | None = Field(default=None, description="The release family (the engine's or trainer's "
                               "families/) that ran the release.")
    release_note: str | None = Field(default=None, description="Why a family outside whose range the release lies "
                                     "ran it (the newest whose code paths are all in the installed source).")


class FindingsReply(TypedReply):
    """A probe that reports findings of its own."""

    findings: tuple[Finding, ...] = Field(default=(), description="What the run noticed that a user must know (a "
                                          "fallback to default layers, an engine error, an unread depth, an "
                                          "unidentified state).")


class BuiltReply(TypedReply):
    """A probe that builds the draft with the release's own classes."""

    built: BuiltDraft | None = Field(default=None, description="The draft as the release builds it.")
    built_error: str | None = Field(default=None, description="Why the release did not build the draft (its built "
                                    "draft is then not compared).")


class TargetClassReply(TypedReply):
    """A probe that built the target with the engine's own model class."""

    model_class: str | None = Field(default=None, description="The engine's model class of the target "
                                    "(`module.Class`).")


class EngineReply(FamilyReply, TargetClassReply):
    """A serving engine's probe: the engine code it ran, the serve arguments as the release reads
    them, the target class, the draft as the engine's draft class reads it."""

    code_paths: dict[str, str] = Field(default_factory=dict, description="The engine code the family runs, by role "
                                       "(vLLM: by runner and role), `module.function` or `path:function`, as the "
                                       "provenance names it.")
    launch: LaunchContract | None = Field(default=None, description="The serve arguments as the release's parser and "
                                          "resolution read them, with verified fixes (asked with serve_args).")
    launch_only: bool = Field(default=False, description="The probe stopped after the launch contract, as asked "
                              "(a request with launch_only: the release's parser and resolution accepted the serve "
                              "arguments; nothing was built).")
    launch_refused: str | None = Field(default=None, description="The release's parser or resolution refused the "
                                       "serve arguments (or its family resolves none): its words (bad input, exit 2).")
    draft_kind: Literal["eagle3", "dflash"] = Field(default="eagle3", description="The kind of draft the engine "
                                                    "serves under the speculative method it resolved.")
    candidates: tuple[Candidate, ...] = Field(default=(), description="What the engine captures with each "
                                              "candidate id list written in the draft config (the fix search).")
    dflash_draft: DFlashDraft | None = Field(default=None, description="What the engine's DFlash draft class reads "
                                                "of the draft (a DFlash draft), and, where it says, what it does with "
                                                "the captured states.")
    draft: DraftFacts | None = Field(default=None, description="The draft as the engine's draft class builds it "
                                         "(the family's draft facts): class, graph flags, vocab mapping, sizes, "
                                         "embedding, and where the engine says, the built draft and checkpoint "
                                         "renames.")


class TrainerReply(BuiltReply):
    """A trainer's probe: whether training norms the loss target, the depth it unrolls the draft
    to, the draft as the trainer builds it."""

    target_normed_by_trainer: bool | None = Field(default=None, description="Whether the trainer applies the "
                                                  "target's final norm to the loss target (None: not decided).")
    target_norm_evidence: str | None = Field(default=None, description="What decided it, in words.")
    trained_depth: TrainedDepth | None = Field(default=None, description="The depth training unrolls the draft "
                                               "to.")


class ForwardVariant(BaseModel):
    """One variant's record in the reply of a forward side (a child of `parity forward`, one per
    engine or trainer): what it ran the variant with and how, the tensors themselves staged in
    the request's safetensors file. A side's own record (its folder's reply module) adds its
    keys; no other key. Kept in the order the child wrote its keys (`as_written`): the report
    prints the record so."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    _written: tuple[str, ...] = PrivateAttr(default=())

    error: str | None = Field(default=None, description="Why the variant did not run (the exception that "
                              "stopped it, `Type: message`); the other variants still ran.")
    traceback: list[str] | None = Field(default=None, description="The last lines of that exception's "
                                        "traceback.")
    embedding: str | None = Field(default=None, description="Whose token embedding the draft ran with: "
                                  "'target' (the target's, shared) or 'draft' (its own).")
    forward_s: float | None = Field(default=None, ge=0, description="Seconds the draft's forward took (all "
                                    "its steps), hooks included.")
    input_ids: list[int] | None = Field(default=None, description="The token ids the draft's rows read, row "
                                        "by row (row t reads token t+1 beside the target's state at t).")

    @model_validator(mode="wrap")
    @classmethod
    def _keep_written_order(cls, data: Any, handler: Any) -> "ForwardVariant":
        record = handler(data)
        if isinstance(data, dict):
            record._written = tuple(data)
        return record

    def as_written(self) -> dict[str, Any]:
        """The record as the child wrote it: its keys, in its order."""
        dumped = self.model_dump(exclude_unset=True)
        return {key: dumped[key] for key in self._written} if self._written else dumped


class ServedVariant(ForwardVariant):
    """A variant's record on a serving engine's forward side: what its own start-up resolved
    and what its draft class built (parity.extract.forward_variants.serve_variants)."""

    device: str | None = Field(default=None, description="The device both models ran on.")
    attention: dict[str, str] | None = Field(default=None, description="The attention each model ran with, "
                                             "by model ('target', 'draft'), in words.")
    unsolved: str | None = Field(default=None, description="Why no id list makes the engine capture the taps "
                                 "asked for: the draft is served with the ids as written.")
    solved_ids: list[int] | None = Field(default=None, description="The aux ids parity's fix search wrote "
                                         "into the served config (parity's export form).")
    requested_ids: list[int] | None = Field(default=None, description="The aux ids the engine's start-up read "
                                            "from the served config; None when it took its own default.")
    capture_ids: list[int] | None = Field(default=None, description="The layer indices the built target "
                                          "captures, as the engine holds them.")
    next_token: int | None = Field(default=None, description="The target's next token after the prompt: the "
                                   "serving side's last row reads it (not compared).")
    draft_positions: str | None = Field(default=None, description="What the engine's config classes made of "
                                        "the positions the draft declares (asked with long positions), in words.")
    graph: dict[str, bool] | None = Field(default=None, description="The draft graph's norm flags as the "
                                          "engine's draft class built them.")
    engine: str | None = Field(default=None, description="The engine that served the draft (its name).")
    draft_class: str | None = Field(default=None, description="The engine's draft class that was built.")
    vocab_mapping: str | None = Field(default=None, description="How the engine maps a draft index to a target "
                                      "token id, in words.")
    positions: list[int] | None = Field(default=None, description="The position of each draft row the engine "
                                        "ran (its first step).")
    unservable: str | None = Field(default=None, description="Why the engine cannot serve this draft (its own "
                                   "refusal): nothing is compared, the verdict is UNSERVABLE.")


Record = TypeVar("Record", bound=ForwardVariant)
Served = TypeVar("Served", bound=ServedVariant)


class ForwardReply(TypedReply, Generic[Record]):
    """A forward side's reply: the envelope, each variant's record, the side's timings. A side's
    own reply (its folder's reply module) is this one parametrized with its record
    (`ForwardReply[ItsVariant]`); a side with no forward path answers with this one (an error)."""

    variants: dict[str, Record] | None = Field(default=None, description="Each variant's record, by the variant's "
                                               "name (parity.forward.cases), of the side's own record type.")
    timings: dict[str, float] | None = Field(default=None, description="Seconds each phase of the side took, by "
                                             "phase (import, target build, ..., total).")
    notes: list[str] = Field(default_factory=list, description="What the report must say about how the side ran "
                             "(speculators': the target its states came from), one line each.")

    @model_validator(mode="after")
    def _variants_unless_stopped(self) -> "ForwardReply":
        if self.variants is None and self.error is None:
            raise ValueError("a forward reply with no error names its variants' records")
        return self

    def record(self, name: str) -> ForwardVariant:
        """Variant `name`'s record; where the reply has none, one that says why (the reply's error,
        else 'no reply')."""
        found = (self.variants or {}).get(name)
        return found if found is not None else self.record_type().model_validate({"error": self.error or "no reply"})

    @classmethod
    def record_type(cls) -> type[ForwardVariant]:
        """The record its variants are: the type the reply is parametrized with (where it is not,
        the bound of its type variable)."""
        for klass in cls.__mro__:
            args = getattr(klass, "__pydantic_generic_metadata__", {}).get("args") or ()
            if args:
                return args[0] if isinstance(args[0], type) else args[0].__bound__
        return ForwardVariant


class ServedForwardReply(ForwardReply[Served], TargetClassReply, Generic[Served]):
    """A serving engine's forward reply (`ServedForwardReply[ItsVariant]`): the target class it
    built, each variant as the engine served it."""


def reply_header(release: str | None, **fields: Any) -> dict[str, Any]:
    """The start of a probe's reply (the child's side): `release`, the interpreter, and any other
    envelope `fields`, validated against ProbeReply; the probe adds its own keys to it."""
    header = ProbeReply(release=release, python=sys.executable, **fields)
    return header.model_dump(mode="json", exclude_defaults=True)


__all__ = ["BuiltReply", "CannotExtractEntry", "EngineReply", "FamilyReply", "FindingsReply", "ForwardReply",
           "ForwardVariant", "ProbeReply", "ServedForwardReply", "ServedVariant", "TargetClassReply", "TrainerReply",
           "TypedReply", "reply_header"]


def stop_from_reply(reply: dict[str, Any], package: str) -> "InternalError | CannotExtract | HarnessLimit | None":
    """What a probe's reply of `package` says stopped it before any verdict (ProbeReply.stop)."""
    return ProbeReply.read(reply).stop(package)
