"""The contract: exactly what the draft's fc layer is fed, and how the draft graph is wired.

A `TrainingContract` is derived from the installed speculators (what the draft was
trained on); a `ServingContract` from the installed engine (what it will be fed).
Both share `Contract`'s fields so they can be diffed slot by slot (see diff.py).
Every model is frozen, every field described, and hidden states serialise as their
short names ("h0", "h31", "final") so the JSON reads like the docs.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer,
                      WithJsonSchema, field_validator, model_serializer, model_validator)

from .hf import is_wrapper, text_part
from .tap import Tap


def _coerce_tap(value: Any) -> Any:
    return Tap.parse(value) if isinstance(value, str) else value


TAP_PATTERN = r"^(h\d+(\.(delta|normed|ln))?|final)$"

# A Tap that travels as its short name in JSON.
TapName = Annotated[
    Tap,
    BeforeValidator(_coerce_tap),
    PlainSerializer(lambda t: t.name, return_type=str),
    WithJsonSchema({"type": "string", "pattern": TAP_PATTERN,
                    "description": "canonical hidden-state name: h<K>, h<K>.delta, "
                                   "h<K>.normed, h<K>.ln or final"}),
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TargetModel(_Frozen):
    """The target (verifier) model the hidden states come from."""

    # strict: a config's "hidden_size": "4096" is a broken config, not a width to coerce
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    architecture: str = Field(description="HF architecture class name, e.g. 'DeepseekV3ForCausalLM', or a "
                              "published multimodal wrapper's, e.g. 'KimiK25ForConditionalGeneration'.")
    model_type: str | None = Field(default=None, description="HF config model_type, e.g. 'deepseek_v3'.")
    text_architecture: str | None = Field(
        default=None, description="For a wrapper config: the architecture of the text model in its "
        "text_config (whose hidden states the draft reads), e.g. 'DeepseekV3ForCausalLM'; None otherwise.")
    num_hidden_layers: int = Field(ge=1, description="N: number of decoder layers; valid taps are h0..hN and final.")
    hidden_size: int | None = Field(default=None, ge=1, description="Width H of one hidden state.")
    vocab_size: int | None = Field(default=None, ge=1, description="Target vocabulary size.")
    quantization: str | None = Field(
        default=None, description="The quantisation the target's config declares (its quantization_config's or "
        "compression_config's quant_method, e.g. 'fp8', 'compressed-tensors'); None when it declares none. parity "
        "runs the target unquantised (a tiny random checkpoint), so the report says this was not checked.")

    @model_serializer(mode="wrap")
    def _omit_unset_optional_fields(self, handler):
        # A plain, unquantised causal-LM target serialises exactly as before these fields
        # existed, so its contracts and locks stay readable by earlier parity releases.
        data = handler(self)
        if isinstance(data, dict):
            for key in ("text_architecture", "quantization"):
                if data.get(key) is None:
                    data.pop(key, None)
        return data

    @classmethod
    def from_hf_config(cls, config: dict[str, Any]) -> "TargetModel":
        """From a target's config.json (already checked to have num_hidden_layers, for a
        wrapper in its text_config): depth, width and vocabulary are the text model's."""
        text = text_part(config)
        text_arch = None
        if is_wrapper(config):
            text_arch = (text.get("architectures") or [None])[0] or text.get("model_type")
        quant = next((q for q in (config.get("quantization_config"), text.get("quantization_config"),
                                   config.get("compression_config")) if isinstance(q, dict)), None)
        return cls(architecture=(config.get("architectures") or ["?"])[0],
                   model_type=config.get("model_type"), text_architecture=text_arch,
                   num_hidden_layers=text["num_hidden_layers"],
                   hidden_size=text.get("hidden_size"), vocab_size=text.get("vocab_size"),
                   quantization=(str(quant.get("quant_method") or "declared") if quant is not None else None))


class GraphFlags(_Frozen):
    """The draft-graph switches that change what the draft computes (docs/draft-graph.md).

    On a serving contract these are the values the engine actually applies, not the
    ones written in the checkpoint: a flag the engine never reads shows its
    engine-side behaviour, and a finding says it was dropped.
    """

    norm_before_fc: bool | None = Field(default=None, description="RMSNorm over the whole concatenated fc input before fc.")
    fc_norm: bool | None = Field(default=None, description="Per-chunk RMSNorm of each aux state before fc (Eagle-3.1).")
    norm_output: bool | None = Field(default=None, description="The state fed back to the next TTT step is post-norm rather than pre-norm.")
    norm_before_residual: bool | None = Field(default=None, description="Layer 0's residual is the normed hidden state rather than the raw one.")


class VocabMapping(_Frozen):
    """How draft-vocabulary logits map to target token ids."""

    draft_vocab_size: int | None = Field(default=None, ge=1, description="Rows of the draft lm_head.")
    target_vocab_size: int | None = Field(default=None, ge=1, description="Target vocabulary size.")
    d2t: Literal["offsets", "absolute", "absent", "unknown"] = Field(
        default="unknown",
        description="The draft-to-target table: 'offsets' (target = d + d2t[d], speculators' "
        "format), 'absolute' (target = d2t[d]), 'absent', or 'unknown' (no weights read).")
    t2d: Literal["present", "absent", "ignored", "unknown"] = Field(
        default="unknown", description="The target-to-draft mask: present, absent, or ignored by the engine.")
    mapping: str | None = Field(default=None, description="How a draft index becomes a target id on this side, in words.")


class _JudgedFields:
    """BuiltDraft.JUDGED: read on the class, the judged fields every draft has (a tuple); read on a
    built draft, those and the fields of its kind (a DFlash draft's block size, context features
    and mask token)."""

    def __init__(self, common: tuple[str, ...], **by_kind: tuple[str, ...]):
        self.common, self.by_kind = common, by_kind

    def __get__(self, built, owner=None) -> tuple[str, ...]:
        if built is None:
            return self.common
        return self.common + self.by_kind.get(built.draft_kind, ())


class AssumedSize(_Frozen):
    """A size a trainer's converter filled in for a key the draft's config does not set, other than
    the EAGLE-3 draft classes' common default: the converter's own guess for a draft in another
    trainer's format, not what the trainer that wrote the config built (docs/built-draft.md)."""

    key: str = Field(description="The config key the draft's config.json does not set, e.g. 'draft_vocab_size'.")
    assumed: int | float = Field(description="The value the converter gave it (e.g. speculators' 32000).")
    common: int | float = Field(description="The value the EAGLE-3 draft classes' common default gives it (e.g. "
                                "vocab_size for draft_vocab_size), which the engines and the other trainers take.")


class BuiltDraft(_Frozen):
    """The draft as one side's own code builds it (docs/built-draft.md): sizes as that side's
    config class reads them, and what the math depends on read off the modules it builds.

    The modules are built at tiny widths (the same shrink on both sides), so the rotary
    frequencies are measured at that head width: a different base or scaling shows in them
    on both sides alike. None: this side does not say."""

    built_by: str = Field(description="The code that built it, e.g. 'sglang 0.5.23 LlamaForCausalLMEagle3 (ModelConfig "
                          "+ model class)' or 'speculators 0.9.0 Eagle3DraftModel (Eagle3SpeculatorConfig)'.")
    config_from: str = Field(description="Which config the side was built from: the served draft's config.json, the "
                             "trained checkpoint's, or the served config as the trainer's converter loads it.")
    vocab_size: int | None = Field(default=None, description="Rows of the draft's own token embedding (the input "
                                   "vocabulary: the target's token ids).")
    draft_vocab_size: int | None = Field(default=None, description="Rows of the draft's lm_head (its output vocabulary).")
    hidden_size: int | None = Field(default=None, description="The draft's width.")
    target_hidden_size: int | None = Field(default=None, description="The width of one target state the fc reads "
                                           "(fc input = number of aux states x this).")
    num_hidden_layers: int | None = Field(default=None, description="Decoder layers the draft builds.")
    layers_built: int | None = Field(
        default=None, ge=1, exclude_if=lambda v: v is None,
        description="Decoder layers in the module tree this side's own code built (counted on the built draft, not "
        "read from its config).")
    later_layer_input_norms: tuple[str, ...] | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="For each decoder layer after the first (a multi-layer draft), in order: the norm module of that "
        "layer whose output its attention reads, found by value on one forward of the built draft (e.g. "
        "'input_layernorm', 'hidden_norm'; 'none' when no norm of the layer produced it): which checkpoint tensor, "
        "layers.<i>.<name>.weight, scales that layer's input. Empty for a one-layer draft.")
    num_attention_heads: int | None = Field(default=None, description="Attention heads.")
    num_key_value_heads: int | None = Field(default=None, description="Key/value heads.")
    head_dim: int | None = Field(default=None, description="Width of one attention head.")
    intermediate_size: int | None = Field(default=None, description="The MLP's inner width.")
    hidden_act: str | None = Field(default=None, description="The MLP's activation, as the built module computes it "
                                   "(e.g. 'silu').")
    rms_norm_eps: float | None = Field(default=None, description="The eps of the built RMSNorms (every one agrees, "
                                       "or the first one's).")
    rope_frequencies: tuple[float, ...] | None = Field(
        default=None, description="The rotary frequencies the built attention applies (radians per position, from its "
        "rotary table at position 1; 6 significant digits): base, scaling type and factors, as computed.")
    rope_scale: float | None = Field(default=None, description="The magnitude the rotary table applies (YaRN's "
                                     "mscale; 1.0 for none).")
    rope_theta: float | None = Field(default=None, description="The rotary base as the side's config holds it (shown; "
                                     "the frequencies are what is compared).")
    rope_scaling: dict[str, Any] | None = Field(default=None, description="The rope scaling parameters as the side's "
                                                "config holds them (shown; the frequencies are compared).")
    max_position_embeddings: int | None = Field(default=None, description="The positions the side's config declares "
                                                "(shown: the engine's start-up check uses it).")
    lm_head_tied: bool | None = Field(default=None, description="The built lm_head is the draft's own token embedding "
                                      "(tie_word_embeddings honoured).")
    dtype: str | None = Field(default=None, description="The dtype the side resolves for the draft (shown, not "
                              "judged: a checkpoint does not record the dtype it was trained in).")
    max_token_id: int | None = Field(default=None, description="The largest target token id the draft can emit "
                                     "(draft_vocab_size - 1, or the d2t table's largest target id).")
    draft_kind: Literal["eagle3", "dflash"] = Field(
        default="eagle3", exclude_if=lambda v: v == "eagle3",
        description="The kind of draft this side built ('eagle3', the default, not written; 'dflash': its DFlash "
        "fields below are judged too).")
    block_size: int | None = Field(
        default=None, ge=1, exclude_if=lambda v: v is None,
        description="A DFlash draft: the block size of the built draft model (the anchor and its mask slots), as "
        "this side's own code sets it on the model it built from the draft config (SGLang's "
        "DFlashDraftModel.block_size, speculators' DFlashDraftModel.block_size from its DFlashSpeculatorConfig). "
        "The block an engine serves is its launch's draft-token count, which may differ (the report says it "
        "was not checked).")
    num_context_features: int | None = Field(
        default=None, ge=1, exclude_if=lambda v: v is None,
        description="A DFlash draft: the target states the built fc projects (its input width over the target "
        "width), as this side's own code sized it from the draft config's target_layer_ids (or aux ids).")
    mask_token_id: int | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="A DFlash draft: the token id whose embedding fills the mask slots of a block, as this side's "
        "own config reader holds it (None: this side does not say, or the draft config names none).")
    config_keys_read: tuple[str, ...] | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="The keys of the config.json this side built from that its own code read while building the "
        "draft (its config reader, converter and draft class; a nested transformer_layer_config's keys spelled "
        "bare, as the served form writes them), sorted. None: not recorded.")
    config_keys_unread: tuple[str, ...] | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="The keys that config.json sets and this side never read while building the draft, sorted. "
        "None: not recorded.")
    config_keys_default: tuple[str, ...] | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="The keys that config.json sets to their default: this side's config class, built again "
        "without the key, holds the same values (an engine that never reads such a key builds as if it were "
        "absent, as the class takes it), sorted. None: not recorded.")

    converter_assumed: tuple[AssumedSize, ...] | None = Field(
        default=None, exclude_if=lambda v: not v,
        description="The sizes this side's converter assumed for keys the draft's config does not set (a draft in "
        "another trainer's format): each such field is None here, not compared, and the report says so. None or "
        "empty: none assumed.")

    config_keys_training_only: tuple[str, ...] | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="Of the keys this side read, off their default, those read for training only: the draft its own "
        "code builds without the key, given the same weights, computes exactly the same on the same inputs (its own "
        "forward, every module's output; docs/built-draft.md, 'Config keys read'): initialisation, the padding row "
        "of an embedding the checkpoint holds, dropout. Decided by running, on the training side, sorted. None: not "
        "decided (every key read counts as building the draft).")

    @field_validator("config_keys_read", "config_keys_unread", "config_keys_default", "config_keys_training_only")
    @classmethod
    def _sorted_keys(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is not None and list(v) != sorted(set(v)):
            raise ValueError("config keys are listed sorted, each once")
        return v

    @model_validator(mode="after")
    def _one_norm_per_later_layer(self) -> "BuiltDraft":
        norms, built = self.later_layer_input_norms, self.layers_built
        if norms is not None and built is not None and len(norms) != built - 1:
            raise ValueError(f"later_layer_input_norms names {len(norms)} layer(s), but {built} were built "
                             "(one per layer after the first)")
        return self

    @model_validator(mode="after")
    def _read_or_unread(self) -> "BuiltDraft":
        both = set(self.config_keys_read or ()) & set(self.config_keys_unread or ())
        if both:
            raise ValueError(f"config keys both read and unread: {sorted(both)}")
        unread = set(self.config_keys_training_only or ()) - set(self.config_keys_read or ())
        if unread:
            raise ValueError(f"config keys read for training only but not read: {sorted(unread)}")
        return self

    # What the draft's math depends on: compared trained-as-built vs served-as-built. The rest
    # is shown beside them (docs/built-draft.md says why each is or is not judged).
    # A DFlash draft's are judged beside them (on a built draft of that kind: `JUDGED` read on the
    # instance; on the class, EAGLE-3's), so an EAGLE-3 draft's report counts the fields it did.
    JUDGED: ClassVar[tuple[str, ...]] = _JudgedFields(
        ("vocab_size", "draft_vocab_size", "hidden_size", "target_hidden_size", "num_hidden_layers",
         "layers_built", "later_layer_input_norms", "num_attention_heads", "num_key_value_heads", "head_dim",
         "intermediate_size", "hidden_act",
         "rms_norm_eps", "rope_frequencies", "rope_scale", "lm_head_tied"),
        dflash=("block_size", "num_context_features", "mask_token_id"))
    SHOWN: ClassVar[tuple[str, ...]] = ("rope_theta", "rope_scaling", "max_position_embeddings", "dtype")
    # Judged fields no config key sets: the draft class's own wiring of its layers (no config edit fixes them).
    WIRING: ClassVar[tuple[str, ...]] = ("layers_built", "later_layer_input_norms")


class CachedReply(_Frozen):
    """Whether the extraction's reply was served by the reply cache (parity.reply_cache), which
    serves one only while every file the extraction read is unchanged."""

    status: Literal["hit", "stored", "not stored", "off"] = Field(
        description="'hit': served from the cache, no extraction ran; 'stored': ran now and kept; "
        "'not stored': ran now, not kept (see why); 'off': ran now, PARITY_NO_CACHE set.")
    key: str | None = Field(default=None, description="The sha256 of the cache key (the request, the "
                            "interpreter, parity's source, the environment); the entry also records "
                            "every file the extraction read.")
    why: str | None = Field(default=None, description="Why the reply was not stored, or why it ran.")


class Provenance(_Frozen):
    """Where a contract came from: which installed code produced it."""

    package: str = Field(description="The package whose code was run, e.g. 'speculators' or 'sglang'.")
    version: str = Field(description="Its installed version.")
    code_path: str = Field(description="The function(s) or code path that were run to derive the contract.")
    python: str | None = Field(default=None, description="The interpreter it ran under (an isolated environment for other releases). "
                               "Never written into a lock (a lock is portable).")
    source: Literal["installed", "environment", "flag"] | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="Where the release came from and ran: 'installed' (the release installed where parity runs, run "
        "in that interpreter), 'environment' (the installed release, run in parity's environment of it: its code "
        "cannot be imported there), 'flag' (the release a flag such as --vllm named, in parity's environment of it).")
    environment: str | None = Field(default=None, exclude_if=lambda v: v is None,
                                    description="The parity environment it ran in (e.g. 'vllm-0.34.0'); absent: "
                                    "the interpreter parity runs in.")
    details: dict[str, str] = Field(default_factory=dict, description="Other facts: model class, config keys read, etc.")
    family: str | None = Field(default=None, exclude_if=lambda v: v is None,
                               description="The release family whose adapter ran (e.g. '0.5.23'), where the "
                               "side has release families.")
    release_note: str | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="Set when the release is not one parity has verified: the sentence every report prints "
        "(e.g. 'sglang 0.5.24 is newer than any release parity has verified; extracted with the "
        "0.5.23-family adapter').")
    reply_cache: CachedReply | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="Whether the extraction ran now or its reply came from the reply cache (absent: "
        "not asked of the cache). Never written into a lock.")


class Whose(StrEnum):
    """Whose doing an error finding reports, so a sweep's cell stopped by it is the side's or
    parity's (parity.sweep.outcome)."""

    side = "side"  # the engine's or trainer's own behaviour: it raised, refused the draft, fed other states
    parity = "parity"  # parity could not name, read or run what the side did, or assumed it: parity's limit


BLOCKS = True  # a FindingKind's third value: the engine cannot run the draft at all (verdict 'unservable')


class FindingKind(StrEnum):
    """Every kind of finding an extractor reports (`parity schema` lists them). A reply naming
    another kind is refused when the contract is built: a typo cannot slip past the gate.

    Each kind is declared with what it means: `whose` (a Whose: the side's own behaviour or
    parity's limit) and `blocks_serving` (BLOCKS: the engine cannot run this draft, so no slot
    table describes what it would be fed: the verdict is 'unservable', this reason first). A kind
    declared without its Whose does not import."""

    whose: Whose
    blocks_serving: bool

    def __new__(cls, value: str, whose: Whose, blocks_serving: bool = False):
        member = str.__new__(cls, value)
        member._value_ = value
        member.whose = Whose(whose)
        member.blocks_serving = blocks_serving
        return member

    # serving: the engine
    engine_error = "engine_error", Whose.side, BLOCKS  # the engine raised while capturing: no slot table describes what it feeds
    target_config_misread = "target_config_misread", Whose.side  # the engine builds the target with another value than its config gives: another model, on any hardware
    draft_unloadable = "draft_unloadable", Whose.side, BLOCKS  # the engine cannot load the draft as written
    default_layers_fallback = "default_layers_fallback", Whose.side  # the engine found no ids and captures its defaults
    runners_differ = "runners_differ", Whose.side  # two model runners of one release feed different states
    dump_slots_differ = "dump_slots_differ", Whose.side  # the data-generation dump holds other states than asked
    not_captured = "not_captured", Whose.side  # a requested slot the engine never fills
    stage_not_captured = "stage_not_captured", Whose.side  # under pipeline parallelism, a stage holding a requested layer never captures it for the draft
    unidentified_state = "unidentified_state", Whose.parity  # a captured tensor matches no canonical state
    draft_facts_unread = "draft_facts_unread", Whose.parity  # the engine's draft class could not be read
    draft_sizes_unread = "draft_sizes_unread", Whose.parity  # the engine's config reader refused the draft's sizes
    draft_forward_failed = "draft_forward_failed", Whose.side  # the engine's draft forward raised
    flag_dropped = "flag_dropped", Whose.side  # a graph flag the draft config sets and the engine never reads
    t2d_ignored = "t2d_ignored", Whose.side  # the engine ignores the draft's t2d table
    d2t_missing = "d2t_missing", Whose.side  # a smaller draft vocabulary with no d2t table
    tensors_dropped = "tensors_dropped", Whose.side  # checkpoint tensors the engine's load_weights skips
    params_unfilled = "params_unfilled", Whose.side  # draft parameters the checkpoint never fills
    release_note = "release_note", Whose.parity  # a release parity has not verified, run by a family's adapter
    capture_not_launched = "capture_not_launched", Whose.parity  # the capture shown was not run under the serve command's resolved algorithm
    draft_not_built = "draft_not_built", Whose.parity  # this side's own code did not build the draft: its fields are not compared
    positions_short = "positions_short", Whose.side  # the draft declares fewer positions than the served context
    config_key_unread = "config_key_unread", Whose.side  # a served config key training built the draft with, never read by the engine
    # training: the trainer and the dump
    convention_assumed = "convention_assumed", Whose.parity  # the dump layout derived from a typed numbering rule
    typed_rule_not_run = "typed_rule_not_run", Whose.parity  # that rule was not run against the data-generation engine
    default_layer_ids = "default_layer_ids", Whose.parity  # the data generation's default ids were assumed
    ids_not_ascending = "ids_not_ascending", Whose.side  # ids not in ascending order (an engine may sort them)
    ids_resolved = "ids_resolved", Whose.side  # how the trainer resolved its capture ids
    draft_ids_disagree = "draft_ids_disagree", Whose.side  # the draft's ids disagree with the dump's
    dump_width_mismatch = "dump_width_mismatch", Whose.side  # the dump's slot count disagrees with the draft's fc
    data_path_failed = "data_path_failed", Whose.side  # one of the trainer's data paths raised
    data_paths_disagree = "data_paths_disagree", Whose.side  # two data paths of one release select other slots
    lossy_data_path = "lossy_data_path", Whose.side  # the data path's transfer is lossy (FP8)
    target_not_final_layer = "target_not_final_layer", Whose.side  # the loss target is not the model's last layer
    target_norm_unknown = "target_norm_unknown", Whose.parity  # whether the trainer norms the loss target is unknown
    target_double_normed = "target_double_normed", Whose.side  # a post-norm target normed again by the trainer
    depth_unread = "depth_unread", Whose.parity  # the trainer's classes could not read the draft's trained depth
    # the draft's config
    not_speculators_format = "not_speculators_format", Whose.side  # read as an EAGLE-format config
    no_config_class = "no_config_class", Whose.parity  # speculators is not importable: class defaults unknown
    unknown_config_key = "unknown_config_key", Whose.side  # a key the installed config class does not know
    unmapped_flag_field = "unmapped_flag_field", Whose.parity  # a switch of the config class parity does not map
    flag_default = "flag_default", Whose.side  # a flag absent from config.json takes the class default
    d2t_ambiguous = "d2t_ambiguous", Whose.parity  # whether d2t holds offsets or absolute ids is undecidable
    vocab_mapping_missing = "vocab_mapping_missing", Whose.side  # a smaller draft vocabulary with no mapping table
    converter_assumed = "converter_assumed", Whose.parity  # a size the trainer's converter guessed for a key the config does not set: not compared
    export_rewrites = "export_rewrites", Whose.side  # the trainer's exporter writes a value the draft was not trained with
    ids_not_exported = "ids_not_exported", Whose.side  # the trainer's export writes no layer ids: engines serve their defaults




class Finding(_Frozen):
    """Something an extractor noticed that a user must know: never swallowed."""

    kind: FindingKind = Field(description="Machine-readable kind (FindingKind), e.g. 'default_layers_fallback'.")
    message: str = Field(description="One human sentence: what was found and why it matters.")
    severity: Literal["info", "warning", "error"] = Field(default="warning", description="'error' means the contract could not be fully derived.")
    slot: int | None = Field(default=None, ge=0, description="The fc slot it concerns, if any.")


class Contract(_Frozen):
    """What both sides share: the ordered fc input and the draft graph around it."""

    side: Literal["training", "serving"] = Field(description="Which side of the train/serve boundary this describes.")
    target_model: TargetModel = Field(description="The target (verifier) model the states are taken from.")
    fc_input: tuple[TapName | None, ...] = Field(
        description="The hidden states concatenated, in this order, along the feature axis to "
        "form the draft's fc input. None marks a slot that was expected but not captured.")
    graph: GraphFlags = Field(default_factory=GraphFlags, description="Draft graph flags in effect.")
    vocab: VocabMapping = Field(default_factory=VocabMapping, description="Draft-to-target vocabulary mapping.")
    embedding: Literal["draft", "target", "unknown"] = Field(
        default="unknown", description="Whose token embedding the draft's first layer uses.")
    draft: BuiltDraft | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="The draft as this side's own code builds it; absent where the side does not build it (each "
        "report says which sides did).")
    draft_kind: Literal["eagle3", "dflash"] = Field(
        default="eagle3", exclude_if=lambda v: v == "eagle3",
        description="The kind of draft this side feeds: 'eagle3' (the default, not written) or 'dflash' (a "
        "DFlash-family block drafter: its fc takes the ordered target states of fc_input, which become the context "
        "of every draft layer). Serving: by the speculative algorithm the engine ran; training: by the draft model "
        "class the trainer ran. fc_input means the same for both.")
    provenance: Provenance = Field(description="Installed code this contract was derived from.")
    findings: tuple[Finding, ...] = Field(default=(), description="Everything noticed on the way, in order.")

    @property
    def has_errors(self) -> bool:
        """An error finding: the contract could not be fully derived, or the side will not be
        fed what its config asks (a draft the engine cannot load, a slot it never captures)."""
        return any(f.severity == "error" for f in self.findings)

    @field_validator("fc_input")
    @classmethod
    def _non_empty(cls, v: tuple) -> tuple:
        if len(v) == 0:
            raise ValueError("fc_input must name at least one hidden state")
        return v

    @model_validator(mode="after")
    def _taps_in_range(self) -> "Contract":
        n = self.target_model.num_hidden_layers
        for i, tap in enumerate(self.fc_input):
            if tap is not None and not tap.in_range(n):
                raise ValueError(f"fc slot {i} is {tap.name}, beyond the target's {n} layers")
        return self

    def to_json(self, **kw) -> str:
        return self.model_dump_json(indent=2, **kw)


class TrainedDepth(_Frozen):
    """The draft steps training unrolled, where the trainer's output or its loader says (docs/launch.md)."""

    steps: int = Field(ge=1, description="Draft steps per position in training: speculators' "
                       "speculators_config.proposal_methods[default].speculative_tokens (its trainer writes its "
                       "ttt_steps there), SpecForge's ttt_length.")
    recorded: bool = Field(description="True when the trained checkpoint records it; False when it is the "
                           "trainer's own default for a config that records none (the served EAGLE-3 form).")
    source: str = Field(description="Where it was read, in words: the config key or the trainer's class and default.")


class TrainingContract(Contract):
    """What the draft was trained on, derived by running the installed speculators' data path."""

    side: Literal["training"] = "training"
    dump_layout: tuple[TapName, ...] = Field(description="Which state each slot of the dumped hidden-state tensor holds, in slot order.")
    dump_layout_source: Literal["manifest", "datagen_run", "datagen_ids", "draft_config", "trainer_capture"] = Field(
        description="Where the dump layout came from, in order of trust: an explicit manifest, "
        "the data-generation engine run on the target (e.g. vLLM's extract_hidden_states capture), "
        "data-generation ids read by a typed convention (not run), or the draft config's ids; "
        "'trainer_capture' for a trainer that captures the states itself (SpecForge): its own "
        "capture, identified.")
    fc_slots: tuple[int, ...] = Field(description="The dump slots that form the fc input, in fc order (what the data path selected).")
    target: TapName = Field(description="The loss-target state: its LM-head output is what the draft learns to predict (verifier_last_hidden_states).")
    target_slot: int = Field(ge=0, description="The dump slot used as the loss target.")
    target_normed_by_trainer: bool | None = Field(
        default=None, description="True when training applies the verifier's final norm to the loss target before the LM head.")
    alignment: str = Field(description="How positions are aligned between inputs, hidden states and targets (shift_batch).")
    trained_depth: TrainedDepth | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="How many draft steps deep training unrolled the draft (it saw its own outputs that deep), as the "
        "trainer's own config classes read it; absent where no draft was given (docs/launch.md).")

    @model_validator(mode="after")
    def _slots_match_layout(self) -> "TrainingContract":
        n = len(self.dump_layout)
        bad = [s for s in (*self.fc_slots, self.target_slot) if not 0 <= s < n]
        if bad:
            raise ValueError(f"slot(s) {bad} outside a dump of {n} slots")
        if len(self.fc_slots) != len(self.fc_input):
            raise ValueError("fc_slots and fc_input differ in length")
        for i, slot in enumerate(self.fc_slots):
            if self.fc_input[i] != self.dump_layout[slot]:
                raise ValueError(f"fc slot {i} is {self.fc_input[i]}, but dump slot {slot} holds "
                                 f"{self.dump_layout[slot].name}")
        if self.target != self.dump_layout[self.target_slot]:
            raise ValueError(f"loss target {self.target.name} is not dump slot {self.target_slot}")
        beyond = [t.name for t in self.dump_layout if not t.in_range(self.target_model.num_hidden_layers)]
        if beyond:
            raise ValueError(f"dump layout names {beyond}, beyond the target's "
                             f"{self.target_model.num_hidden_layers} layers")
        return self


LaunchValue = bool | int | float | str | list | None  # a ServerArgs value as the engine holds it (plain JSON)


class LaunchOverride(_Frozen):
    """A launch field the user gave that the engine's resolution changed, silently or with a log line."""

    field: str = Field(description="The engine's own field name, e.g. 'speculative_num_draft_tokens'.")
    requested: LaunchValue = Field(description="The value the user's arguments set (as the engine parsed it).")
    effective: LaunchValue = Field(description="The value the engine runs with after its resolution.")
    by: str = Field(description="The engine function that changed it (e.g. '_handle_eagle_family'), '?' if unknown.")


class LaunchFix(_Frozen):
    """Serve arguments that give what was asked, verified by resolving them again."""

    argv: tuple[str, ...] = Field(description="The user's arguments with the fix applied.")
    effective: dict[str, LaunchValue] = Field(description="The launch fields the engine resolves from them.")


class NameDecided(_Frozen):
    """A launch field the engine resolved from the paths' names: under the names the user gave
    the folders (LaunchContract.names) it resolves `named`, under names that say nothing
    `neutral` (both run)."""

    field: str = Field(description="The engine's own field name, e.g. 'method'.")
    named: LaunchValue = Field(description="The value the engine resolves under the user's name (what it runs).")
    neutral: LaunchValue = Field(description="The value it resolves under a name that says nothing (None: it "
                                 "refused them there, see neutral_refused).")
    neutral_refused: str | None = Field(default=None, exclude_if=lambda v: v is None,
                                        description="The engine's refusal under the neutral name, if it refused.")


class LayoutStage(_Frozen):
    """One pipeline stage of the capture's run: the decoder layers its model holds (the engine's own
    partition) and the layer indices its model captures at after the engine's start-up set them."""

    stage: int = Field(ge=0, description="The pipeline rank (0 first).")
    layers: tuple[int, int] = Field(description="The decoder layers this stage holds, [start, end) (the engine's "
                                    "own partition, e.g. SGLang's make_pp_layers).")
    capture: tuple[int, ...] | None = Field(default=None, description="The layer indices this stage's model "
                                            "captures at, as the engine's start-up left them (None: the model holds "
                                            "no such list).")


class LayoutRun(_Frozen):
    """How the capture was run under the parallel layout: as many CPU processes as ranks
    (torch.distributed over gloo), each building its part of the tiny target with the engine's own
    partition and parallel state; the states that reach the draft are the last stage's."""

    ranks: int = Field(ge=1, description="The CPU processes the capture ran on (tp x pp).")
    tp: int = Field(ge=1, description="The tensor-parallel degree run.")
    pp: int = Field(ge=1, description="The pipeline stages run.")
    stages: tuple[LayoutStage, ...] = Field(default=(), description="Each stage's layers and capture.")
    stands_for: tuple[str, ...] = Field(default=(), description="Where the run's layout is smaller than the one "
                                        "resolved, what stood for what (e.g. 'tp_size 8 run as 2 ranks').")


class ParallelLayout(_Frozen):
    """The parallel layout the serve command resolves to, by the engine's own parser and resolution
    (docs/launch.md, "The parallel layout"): its own fields, their values read as degrees, and how
    the capture was run under it."""

    fields: dict[str, LaunchValue] = Field(description="The engine's own layout fields at their effective values "
                                           "(SGLang: tp_size, pp_size, dp_size, attn_dp_size, ep_size...; vLLM: "
                                           "parallel_config.tensor_parallel_size, ...).")
    tp: int = Field(default=1, ge=1, description="Tensor-parallel degree of the target.")
    pp: int = Field(default=1, ge=1, description="Pipeline stages of the target.")
    dp: int = Field(default=1, ge=1, description="Data-parallel replicas of the whole layout (not attention DP).")
    attention_dp: int = Field(default=1, ge=1, description="Data-parallel attention degree (SGLang's "
                              "attn_dp_size, vLLM's data parallel size of an MoE target).")
    ep: int = Field(default=1, ge=1, description="Expert-parallel degree.")
    draft_tp: int | None = Field(default=None, description="The draft's own tensor-parallel size where the engine "
                                 "resolves one (vLLM's draft_tensor_parallel_size); None where it has no such "
                                 "field (SGLang runs the draft in the target's attention TP group).")
    run: LayoutRun | None = Field(default=None, description="How the capture was run under it (None: one process, "
                                  "the layout being one rank).")
    not_run: tuple[str, ...] = Field(default=(), description="Parts of the layout the capture did not run, each "
                                     "said (the report's 'Not checked').")

    @property
    def ranks(self) -> int:
        return self.tp * self.pp

    def said(self) -> str:
        """The layout in words: `tp 2, pp 2` (the degrees above 1), or `one rank`."""
        parts = [f"{name} {value}" for name, value in (("tp", self.tp), ("pp", self.pp), ("dp", self.dp),
                                                        ("attention dp", self.attention_dp), ("ep", self.ep))
                 if value > 1]
        if self.draft_tp is not None and self.draft_tp != 1:
            parts.append(f"draft tp {self.draft_tp}")
        return ", ".join(parts) or "one rank"


class LaunchContract(_Frozen):
    """The serve command as the installed engine parses and resolves it (its own parser and
    resolution code, run on CPU: device-bound choices are not part of it; docs/launch.md)."""

    argv: tuple[str, ...] = Field(description="The arguments as the user gave them (after `python -m "
                                  "sglang.launch_server`, or after `vllm serve MODEL`).")
    replaced: dict[str, str] = Field(default_factory=dict, description="Fields parity set to its own values "
                                     "(its files for the target's config and the draft it checks, remote code off, "
                                     "a GPU's device or memory for the resolution only), and what stands there.")
    requested: dict[str, LaunchValue] = Field(description="The launch fields the user gave, as the engine's parser "
                                              "read them (its field names).")
    effective: dict[str, LaunchValue] = Field(description="The launch fields after the engine's resolution, given "
                                              "or not (defaults are reported, not judged).")
    overrides: tuple[LaunchOverride, ...] = Field(default=(), description="Given fields the engine changed: each a "
                                                  "drift.")
    fixes: tuple[LaunchFix, ...] = Field(default=(), description="Verified arguments that keep what was asked.")
    names: dict[str, str] = Field(default_factory=dict, exclude_if=lambda v: not v,
                                  description="The name the engine was shown for each path field parity set to its "
                                  "own files (field -> the path as the user wrote it: the serve command's, else "
                                  "--draft's or the target config's folder): engines read names (parity.extract.named).")
    from_names: tuple[NameDecided, ...] = Field(default=(), exclude_if=lambda v: not v,
                                                description="Fields the engine resolved from a path's name: "
                                                "otherwise under a name that says nothing.")
    algorithm_is_eagle3: bool | None = Field(default=None, description="The engine's own answer: does the resolved "
                                             "algorithm capture the target's aux hidden states (EAGLE-3)? None: unknown.")
    algorithm_field: str = Field(default="speculative_algorithm", exclude_if=lambda v: v == "speculative_algorithm",
                                 description="The engine's field that names the speculative algorithm: "
                                 "SGLang's 'speculative_algorithm' (the default, not written), vLLM's 'method'.")
    algorithm_answer: str | None = Field(default=None, exclude_if=lambda v: v is None,
                                         description="Where algorithm_is_eagle3 comes from, when not SGLang's "
                                         "SpeculativeAlgorithm.is_eagle3() (e.g. vLLM's "
                                         "'SpeculativeConfig.uses_aux_hidden_states'), or why it is False; "
                                         "for a DFlash draft, the method algorithm_is_dflash comes from "
                                         "(SGLang's 'its is_dflash()' on 0.5.12-0.5.15).")
    draft_kind: Literal["eagle3", "dflash"] = Field(
        default="eagle3", exclude_if=lambda v: v == "eagle3",
        description="The kind the draft is written for, by its own config (parity.contract.hf.draft_kind): the "
        "algorithm must serve that kind ('eagle3', the default, not written; 'dflash').")
    algorithm_is_dflash: bool | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="The engine's own answer for a DFlash draft: is the resolved algorithm of its DFlash family "
        "(SGLang's SpeculativeAlgorithm.is_dflash_family(), or is_dflash() on a release without the family; "
        "algorithm_answer names the method asked)? None: not asked (an EAGLE-3 draft) or unknown.")
    layout: ParallelLayout | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="The parallel layout the arguments resolve to, and how the capture was run under it (None: a "
        "contract written before the field).")

    @property
    def serves_the_draft(self) -> bool | None:
        """The engine's own answer for the draft's kind: does the resolved algorithm feed it the
        target states it is built on? None: unknown."""
        return self.algorithm_is_dflash if self.draft_kind == "dflash" else self.algorithm_is_eagle3

    @property
    def kind_named(self) -> str:
        """The draft's kind as the verdicts name it."""
        return "DFlash" if self.draft_kind == "dflash" else "EAGLE-3"


class ServingContract(Contract):
    """What the engine will feed the draft, derived by running the installed engine's code."""

    side: Literal["serving"] = "serving"
    engine: str = Field(description="The serving engine, e.g. 'sglang'.")
    requested_ids: tuple[int, ...] | None = Field(
        description="The layer ids the engine resolved from the draft config, in its own "
        "convention; None when it fell back to its defaults.")
    ids_source: str = Field(description="Where the engine took the ids from, e.g. \"eagle_config['eagle_aux_hidden_state_layer_ids']\" or 'engine default'.")
    capture_ids: tuple[int, ...] | None = Field(
        default=None, description="The layer indices the engine's model actually captures at (after its own +1 rules).")
    checkpoint_renames: dict[str, str] = Field(
        default_factory=dict, description="Checkpoint tensor-name prefixes the engine's draft class loads under "
        "another name (speculators' 'layers.0.' -> 'midlayer.' before SGLang 0.5.11), each verified by feeding "
        "the renamed names through its load_weights; empty when every tensor loads as written "
        "(parity/checkpoint.py applies them).")
    checkpoint_zero_biases: tuple[str, ...] = Field(
        default=(), description="Biases the engine's draft class has and no checkpoint tensor fills (its fc's "
        "in SGLang 0.4.8.post1: served, they keep random initial values), named as its load_weights reads them; "
        "written as zeros they are exactly the bias-free layer training ran (parity/checkpoint.py).")
    runners: dict[str, tuple[TapName | None, ...]] = Field(
        default_factory=dict, description="What each model runner feeds the fc, for an engine with several "
        "(vLLM 0.33: 'v1' and 'v2'); fc_input is the GPU-default runner's. Empty for an engine with one. "
        "A slot is None where that runner's capture failed or named nothing.")
    launch: LaunchContract | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="The serve arguments as the engine resolves them (--serve-args); absent when none were given.")


def contract_json_schema() -> dict[str, Any]:
    """JSON Schema of both contract kinds, for users who validate contracts elsewhere."""
    from pydantic.json_schema import models_json_schema

    # One shared $defs, so every "#/$defs/..." reference resolves from this document's root.
    _, top = models_json_schema([(TrainingContract, "serialization"),
                                 (ServingContract, "serialization")])
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "parity contracts",
        "oneOf": [{"$ref": "#/$defs/TrainingContract"}, {"$ref": "#/$defs/ServingContract"}],
        "$defs": top["$defs"],
    }


def load_contract(text: str) -> TrainingContract | ServingContract:
    """Parse a contract from JSON, choosing the class by its `side`."""
    from pydantic import TypeAdapter

    adapter = TypeAdapter(Annotated[TrainingContract | ServingContract, Field(discriminator="side")])
    return adapter.validate_json(text)
