"""The training side: what the installed speculators feeds the draft's fc layer, found by running it.

`extract_training` takes the dump layout (which state each slot of the dumped
hidden-state tensor holds) from the most trusted source given, runs the installed
speculators' own data path on a marked sample in that release's environment
(`probe.py`, a subprocess), and maps the slots it selected back to canonical taps:

    dump [h0, h3, h31, h59] --speculators 0.9 ArrowDataset--> fc [h0, h3, h31], target h59

Nothing about the slice is assumed here: if a release selects other slots, the
contract changes with it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ....contract.hf import draft_kind
from ....contract import (BuiltDraft, DatagenDump, Finding, FindingKind, GraphFlags, Provenance, Tap, TargetModel,
                          TrainingContract, VocabMapping, sources)
from ....conventions import CONVENTIONS, Convention, ConventionError, datagen_refusal, to_taps
from ....envs import display_python
from ....inputs import Draft, Target
from ... import installed, release_option
from ..draft import DraftConfig, DraftError, draft_ids, load_config, read_draft
from .reply import DataPath, SpeculatorsForwardReply, SpeculatorsReply
from ....contract.reply import stop_from_reply
from ....errors import UserError

# -- as a `Trainer` (parity.extract.trainers) ---------------------------------------------------


def training_contract(target: Target, dump_layout: list[Tap] | None = None, *,
                      datagen_ids: list[int] | None = None, datagen_convention: "Convention | None" = None,
                      draft: Draft | None = None, release: str | None = None,
                      data_path: str | None = None, datagen_dump: DatagenDump | None = None,
                      trained: bool = False) -> TrainingContract:
    """`extract_training` under the interface's names: the release is `release`, the target and
    draft come read (`Target`, `Draft`); the draft is interpreted as speculators reads it
    (draft.read_draft)."""
    return extract_training(target.model, dump_layout, datagen_ids=datagen_ids, datagen_convention=datagen_convention,
                            draft_dir=draft, speculators_version=release, data_path=data_path,
                            datagen_dump=datagen_dump, trained=trained)


def is_trained_draft(config: dict) -> bool:
    """A speculators-format draft config (as trained): it names its model type or its transformer layer.

    Wider than trainers.draft.is_speculators_format (which decides where the reader finds the flags):
    export and replay take a draft that names only its transformer_layer_config."""
    return "speculators_model_type" in config or "transformer_layer_config" in config


__all__ = ["DraftConfig", "DraftError", "PROBE_MODULE", "TrainingExtractionError",
           "contract_from_probe", "extract_training", "probe_training", "read_draft"]

NAME = "speculators"
DIST = "speculators"  # the distribution whose installed release runs (parity.extract.installed)
FLAG = "--speculators"
TITLE = "speculators"
CAPTURES_STATES = False  # it trains on a dump (--dump-layout, or --datagen-ids run through vLLM)
IDS_FLAG = None
OWN_FLAGS = ()  # --speculators is also where a lock of another trainer is refused its release
DATAGEN_ENGINE = "vllm"  # its data generation (speculators' launch script) runs vLLM
SWEEP_FROM = "0.3.0"  # where the sweep's 'all' starts: its first release with a data path

# The commands that take a speculators release, and what its flag means there (metavar, help).
OPTIONS = {
    "contract": ("VERSION", "run another installed release (an environment in envs.toml)"),
    "check": ("VERSION", "training under another release, in parity's environment of it (default: the installed one)"),
    "lock": ("VERSION", "the release the lock is made under (default: the installed one)"),
    "replay": ("VERSION", "replay under another installed release"),
    "matrix": ("V,V", "only these speculators releases (--trainer specforge: --specforge V,V)"),
    "can-i-deploy": ("VERSION", "the speculators release (required unless --trainer specforge, which takes --specforge)"),
    "sweep": ("RANGE", f"the speculators releases: 'all' (from {SWEEP_FROM}), 'none', or a version range"),
}


def add_options(parser, command: str) -> None:
    """--speculators, on the commands that take a speculators release."""
    release_option(parser, command, FLAG, OPTIONS)


def release_from(args) -> str | None:
    return getattr(args, "speculators", None)


def ids_from(args) -> list[int] | None:
    return None


FORWARD_MODULE = "parity.extract.trainers.speculators.forward_side"  # parity forward's training path
FORWARD_REPLY = SpeculatorsForwardReply
PROBE_MODULE = "parity.extract.trainers.speculators.probe"
DEFAULT_CONVENTION = "speculators-datagen"
PROBE_SHAPE = {"hidden_size": 8, "seq_len": 6}  # small: the markers need 7^(H-1) >= slots*T


class TrainingExtractionError(UserError, ValueError):
    """Inputs the training extractor cannot turn into a contract (one line)."""


ERRORS = (TrainingExtractionError, DraftError)  # bad input or unsupported: exit 2, one line


def _finding(kind: FindingKind, message: str, severity: str = "warning", slot: int | None = None) -> Finding:
    return Finding(kind=kind, message=message, severity=severity, slot=slot)


# -- the probe --------------------------------------------------------------------------------


def probe_python(speculators_version: str | None) -> str:
    """The interpreter whose speculators is probed: this one with the installed release (None),
    or the environment pinning that version (parity.extract.installed)."""
    return installed.interpreter(sys.modules[__name__], speculators_version).python


def probe_training(num_slots: int, speculators_version: str | None = None, draft: dict | None = None,
                   kind: str = "eagle3") -> dict:
    """Run the probe for a `num_slots` dump (its reply depends only on the installed code, the
    slot count, `draft` and `kind`: kept in the reply cache, parity.reply_cache). `draft`: {"config",
    "target", "from"} to build the draft as this release does (parity.contract.BuiltDraft); `kind`
    "dflash": the draft is a DFlash one, trained through the release's DFlash model."""
    request = {"num_slots": num_slots, **PROBE_SHAPE, **({"draft": draft} if draft else {}),
               **({"kind": kind} if kind != "eagle3" else {})}
    return installed.run(sys.modules[__name__], speculators_version, PROBE_MODULE, request)


def target_config_for_build(target: TargetModel) -> dict:
    """What the trainer's converter reads of the target (its vocabulary, width, depth)."""
    return {"architectures": [target.text_architecture or target.architecture], "model_type": target.model_type,
            "vocab_size": target.vocab_size, "hidden_size": target.hidden_size,
            "num_hidden_layers": target.num_hidden_layers}


def built_request(draft: "Draft | Path | str", target: TargetModel, trained: bool) -> dict:
    """The probe's "draft" request. A draft in speculators' own format is the checkpoint as the
    trainer wrote it (export's input), whether or not --trained named it."""
    path, config = load_config(draft)
    trained = trained or is_trained_draft(config)
    return {"config": config, "target": target_config_for_build(target),
            "from": (f"the trained checkpoint {path.parent}" if trained
                     else "the served config.json, no --trained given")}


def choose_path(r: SpeculatorsReply, data_path: str | None, layout: list[Tap]) -> DataPath:
    """The probed path the contract describes: `data_path` (qualified name or a part), else the default."""
    version = r.shown_release
    if r.error:
        raise TrainingExtractionError(f"speculators {version}: {r.error}")
    entries = r.paths
    if data_path is not None:
        entries = [e for e in entries if e.code_path == data_path
                   or data_path in e.code_path.split(".")]
    if not entries:
        failed = [e for e in r.errors if data_path is None or data_path in e.code_path]
        if failed:
            raise TrainingExtractionError(
                f"speculators {version}: {failed[0].code_path} failed on the {len(layout)}-slot dump "
                f"[{', '.join(t.name for t in layout)}]: {failed[0].error}")
        ran = sorted({e.code_path for e in r.paths})
        raise TrainingExtractionError(f"speculators {version} has no data path {data_path!r}; it has {ran}")
    return next((e for e in entries if e.default), entries[0])


# -- the dump layout ----------------------------------------------------------------------------


def _convention_taps(convention: Convention, ids: list[int] | None, n: int, what: str) -> list[Tap]:
    try:
        return to_taps(convention.name, ids, n, {convention.name: convention})
    except ConventionError as exc:
        raise TrainingExtractionError(f"{what}: {exc}") from None


def _ascending(ids, what: str, sorts: bool) -> list[Finding]:
    if ids is None or all(a < b for a, b in zip(ids, ids[1:])):
        return []
    then = ("the system sorts them, so fc chunk order is not the written order" if sorts
            else "slots follow the written order")
    return [_finding(FindingKind.ids_not_ascending, f"{what} {list(ids)} are not ascending: {then}")]


def resolve_layout(target: TargetModel, dump_layout, datagen_ids, datagen_convention,
                   draft_dir, datagen_dump: DatagenDump | None = None) -> tuple[list[Tap], str, list[Finding]]:
    """(layout, source, findings) from the most trusted source given: a manifest, the dump the
    data-generation engine was run to make (`datagen_dump`), typed-rule ids, the draft's ids."""
    n = target.num_hidden_layers
    if dump_layout is not None:
        layout = [Tap.parse(t) if isinstance(t, str) else t for t in dump_layout]
        bad = [t.name for t in layout if not t.in_range(n)]
        if bad:
            raise TrainingExtractionError(
                f"dump layout names {bad}, beyond the target's {n} layers (h0..h{n})")
        layers = [n + 1 if t.kind == "final" else t.layer for t in layout]
        findings = [] if all(a < b for a, b in zip(layers, layers[1:])) else [_finding(
            FindingKind.ids_not_ascending, f"the dump layout [{', '.join(t.name for t in layout)}] is not in "
            "ascending layer order")]
        return layout, "manifest", findings
    if datagen_dump is not None:
        bad = [t.name for t in datagen_dump.layout if not t.in_range(n)]
        if bad:
            raise TrainingExtractionError(f"the {datagen_dump.engine} dump holds {bad}, beyond the target's {n} layers")
        return list(datagen_dump.layout), "datagen_run", list(datagen_dump.findings)
    if datagen_ids is not None:
        convention, findings = datagen_convention, []
        if convention is None:
            convention = CONVENTIONS[DEFAULT_CONVENTION]
            findings.append(_finding(FindingKind.convention_assumed, f"no convention given for data-generation ids "
                                     f"{list(datagen_ids)}: read as {convention.name!r}", "info"))
        refusal = datagen_refusal(convention.name, {convention.name: convention})
        if refusal:
            raise TrainingExtractionError(f"--datagen-convention {convention.name}: {refusal}")
        layout = _convention_taps(convention, list(datagen_ids), n, "data-generation ids")
        findings.append(_finding(FindingKind.typed_rule_not_run, f"the dump layout [{', '.join(t.name for t in layout)}] "
                                 f"is data-generation ids {list(datagen_ids)} read by the typed rule {convention.name!r} "
                                 "(typed rule, not run): no data-generation engine was run to make it"))
        findings += _ascending(list(datagen_ids), "data-generation ids", convention.sorts)
        return layout, "datagen_ids", findings
    if draft_dir is not None:
        ids, key = draft_ids(draft_dir)
        findings = _ascending(ids, f"draft config ids ({key})", CONVENTIONS[DEFAULT_CONVENTION].sorts)
        if ids is None:
            findings.append(_finding(FindingKind.default_layer_ids, "the draft config has no eagle_aux_hidden_state_"
                                     "layer_ids: speculators falls back to its default layers"))
        layout = _convention_taps(CONVENTIONS[DEFAULT_CONVENTION], list(ids) if ids is not None else None, n,
                                  f"draft config {key or 'default'} ids")
        return layout, "draft_config", findings
    raise TrainingExtractionError("no dump layout: give dump_layout (a manifest), datagen_ids with their "
                                  "convention, or a draft_dir whose config names the ids")


# -- findings -----------------------------------------------------------------------------------


def target_findings(target: TargetModel, loss_target: Tap, slot: int, normed: bool | None) -> list[Finding]:
    n = target.num_hidden_layers
    out = []
    if loss_target not in (Tap.stream(n), Tap.final()):
        out.append(_finding(FindingKind.target_not_final_layer,
                            f"the loss target is {loss_target.name} (dump slot {slot}), not h{n}, the last "
                            f"of the target's {n} layers: the draft is trained to predict the LM head on "
                            f"{loss_target.name}, not on the model's real output", slot=slot))
    if normed and (loss_target.kind == "final" or loss_target.norm.value == "final"):
        out.append(_finding(FindingKind.target_double_normed,
                            f"the loss target {loss_target.name} is already post-final-norm and training "
                            "applies the verifier norm again before the LM head", slot=slot))
    if normed is None:
        out.append(_finding(FindingKind.target_norm_unknown, "could not tell whether training applies the "
                            "verifier's final norm to the loss target", "info"))
    return out


def width_findings(layout: list[Tap], fc_slots: list[int], draft: DraftConfig | None) -> list[Finding]:
    fc_width = draft.num_aux if draft is not None and draft.num_aux else len(fc_slots)
    whose = "the draft's fc (len(eagle_aux_hidden_state_layer_ids))" if draft and draft.num_aux else \
        "the data path's fc input"
    if len(layout) == fc_width + 1:
        return []
    return [_finding(FindingKind.dump_width_mismatch,
                     f"the dump has {len(layout)} slots but {whose} takes {fc_width} states plus the "
                     f"loss target ({fc_width + 1} slots)")]


def draft_layout_findings(draft: DraftConfig | None, layout: list[Tap], source: str, n: int) -> list[Finding]:
    if draft is None or source == "draft_config" or draft.ids is None:
        return []
    if not draft.speculators_format:
        # Ids in an engine-format config (eagle_config) are in the engine's own numbering: what
        # they feed is the serving contract, compared slot by slot; never read them as
        # speculators' data-generation ids.
        return []
    try:
        implied = to_taps(DEFAULT_CONVENTION, list(draft.ids), n)
    except ConventionError as exc:
        return [_finding(FindingKind.draft_ids_disagree, f"draft config ids {list(draft.ids)}: {exc}")]
    if implied == layout:
        return []
    return [_finding(FindingKind.draft_ids_disagree,
                     f"the draft config's ids {list(draft.ids)} ({draft.ids_key}) read as speculators "
                     f"data-generation ids mean [{', '.join(t.name for t in implied)}], but the "
                     f"{source} layout is [{', '.join(t.name for t in layout)}]")]


def path_findings(r: SpeculatorsReply, chosen: DataPath) -> list[Finding]:
    out = []
    for other in r.paths:
        if other is chosen:
            continue
        for key in ("fc_slots", "target_slot", "alignment"):
            if getattr(other, key) != getattr(chosen, key):
                where = other.code_path + (f" [{other.backend}]" if other.backend else "")
                out.append(_finding(FindingKind.data_paths_disagree, f"{where} gives {key} {getattr(other, key)}, "
                                    f"the contract's path gives {getattr(chosen, key)}"))
    if chosen.lossy:
        out.append(_finding(FindingKind.lossy_data_path, f"the data path alters hidden-state values: "
                            f"{chosen.lossy_reason}", "info"))
    for err in r.errors:
        out.append(_finding(FindingKind.data_path_failed, f"{err.code_path} failed: {err.error}", "info"))
    return out


# -- the contract -------------------------------------------------------------------------------


def provenance(r: SpeculatorsReply, chosen: DataPath, datagen_dump: DatagenDump | None = None) -> Provenance:
    keys = ("transfer", "backend", "via", "writer", "lossy_reason")
    details = {k: str(getattr(chosen, k)) for k in keys if getattr(chosen, k)}
    if r.dflash:  # the DFlash model run on the path's states: its fc's chunk order
        details.update({"dflash_model": r.dflash.model,
                        "dflash_fc_chunk_order": json.dumps(r.dflash.fc_chunk_order)})
    details.update({
        "preprocess": str(r.preprocess), "default_path": str(r.default_path),
        "default_path_reason": str(r.default_path_reason),
        "offsets": json.dumps(chosen.offsets), "lossy": str(chosen.lossy).lower(),
        "train_transform": str(r.train_transform),
        "target_norm_evidence": str(r.target_norm_evidence),
        "looked_for": ", ".join(r.looked_for),
    })
    declared = r.release_declared
    if declared:
        details["version_py"] = declared
    if datagen_dump is not None:
        details["dump"] = datagen_dump.describe()
        details["dump_engine"] = f"{datagen_dump.engine} {datagen_dump.version}"
        details["dump_code_path"] = datagen_dump.code_path
        details["dump_python"] = str(datagen_dump.python)
    return Provenance(package="speculators", version=r.shown_release,
                      code_path=chosen.code_path, python=display_python(r.python), details=details,
                      family=r.family, release_note=r.release_note, reply_cache=r.reply_cache)


def settle_assumed(built: BuiltDraft | None, draft: DraftConfig | None, converter: str
                   ) -> tuple[BuiltDraft | None, list[Finding]]:
    """The sizes `converter` assumed for keys the draft's config does not set
    (BuiltDraft.converter_assumed) settled where the checkpoint decides (draft_vocab_size: its
    lm_head's rows), else left out of the comparison: the built draft, and a finding for each."""
    findings = []
    assumed = built.converter_assumed if built is not None else None
    for a in assumed or ():
        rows = draft.lm_head_rows if draft is not None and a.key == "draft_vocab_size" else None
        said = (f"{a.key}: the draft's config does not set it; {converter} assumes {a.assumed}, where the EAGLE-3 "
                f"draft classes take {a.common}")
        if rows is not None:
            built = built.model_copy(update={a.key: rows})
            findings.append(_finding(FindingKind.converter_assumed, f"{said}: the checkpoint's lm_head has {rows} "
                                     f"rows, the {a.key} it was trained with, and that is what is compared", "info"))
        else:
            findings.append(_finding(FindingKind.converter_assumed, f"{said}: what the draft was trained with is not "
                                     f"known from its config (its checkpoint's lm_head decides, and there is none "
                                     f"here), so {a.key} is not compared"))
    return built, findings


def contract_from_probe(target: TargetModel, layout: list[Tap], source: str, reply: dict, *,
                        draft: DraftConfig | None = None, data_path: str | None = None,
                        findings: list[Finding] | None = None,
                        datagen_dump: DatagenDump | None = None) -> TrainingContract:
    """Map a probe reply's slots through the layout into a TrainingContract (`datagen_dump`: the
    data-generation run the layout came from, named in the provenance)."""
    stop = stop_from_reply(reply, "speculators")
    if stop is not None:  # no family can run it, or parity's CPU run cannot
        raise stop
    r = SpeculatorsReply.read(reply)
    chosen = choose_path(r, data_path, layout)
    fc_slots, target_slot = list(chosen.fc_slots), chosen.target_slot
    if not fc_slots or max(fc_slots + [target_slot]) >= len(layout):
        raise TrainingExtractionError(f"the {len(layout)}-slot dump layout is too short for "
                                      f"{chosen.code_path} (it selected slots {fc_slots} + {target_slot})")
    loss_target = layout[target_slot]
    normed = r.target_normed_by_trainer
    all_findings = list(findings or [])
    all_findings += target_findings(target, loss_target, target_slot, normed)
    all_findings += width_findings(layout, fc_slots, draft)
    all_findings += draft_layout_findings(draft, layout, source, target.num_hidden_layers)
    all_findings += path_findings(r, chosen)
    if draft is not None and not r.dflash:
        all_findings += draft.findings  # (read as an EAGLE-3 config: its flag findings say nothing of a DFlash one)
    if r.dflash:
        all_findings.append(_finding(FindingKind.draft_not_built, f"a DFlash draft: speculators "
                                     f"{r.release}'s {r.dflash.model} was run for "
                                     "which states its fc reads, in which order; of its built draft only the "
                                     "DFlash fields (block size, context features, mask token) are compared"
                                     if r.built else
                                     f"a DFlash draft: speculators {r.release}'s {r.dflash.model} was run for "
                                     "which states its fc reads, in which order; its built draft is not compared",
                                     "info"))
    built, assumed = settle_assumed(r.built, draft, f"speculators {r.release}'s converter")
    all_findings += assumed
    if r.built_error:
        all_findings.append(_finding(FindingKind.draft_not_built, f"speculators {r.release} "
                                     f"did not build the draft: {r.built_error}; the built draft is not "
                                     "compared", "warning"))
    if r.trained_depth_error:
        all_findings.append(_finding(FindingKind.depth_unread, f"speculators {r.release} did "
                                     f"not read the draft's trained depth: {r.trained_depth_error}; the "
                                     "served steps are not compared with it", "warning"))
    return TrainingContract(
        draft_kind="dflash" if r.dflash else "eagle3",
        target_model=target, fc_input=tuple(layout[s] for s in fc_slots),
        graph=draft.flags if draft else GraphFlags(),
        vocab=sources.vocab(draft.vocab, draft.sizes) if draft else VocabMapping(),
        embedding=draft.embedding if draft else "unknown", provenance=provenance(r, chosen, datagen_dump),
        draft=built,
        findings=tuple(all_findings), dump_layout=tuple(layout), dump_layout_source=source,
        fc_slots=tuple(fc_slots), target=loss_target, target_slot=target_slot,
        target_normed_by_trainer=normed, alignment=chosen.alignment,
        trained_depth=r.trained_depth)


def extract_training(target: TargetModel, dump_layout: list[Tap] | None = None, *,
                     datagen_ids: list[int] | None = None, datagen_convention: "Convention | None" = None,
                     draft_dir: "Path | Draft | None" = None, speculators_version: str | None = None,
                     data_path: str | None = None, datagen_dump: DatagenDump | None = None,
                     trained: bool = False) -> TrainingContract:
    """Derive the training contract by running the installed speculators' data path.
    `draft_dir`: the draft directory, or the draft already read (parity.inputs.Draft).

    The dump layout comes from, in order of trust: `dump_layout` (a manifest), `datagen_ids`
    read in `datagen_convention` (a typed rule; default "speculators-datagen", with an info finding), or the
    draft config's ids read as speculators data-generation ids (vLLM ids + appended N).
    `speculators_version` None probes this interpreter's speculators, otherwise the env
    pinning that version. `data_path` picks a path other than the release's default
    (e.g. "standardize_data_v1"). `trained`: `draft_dir` is the checkpoint as the trainer wrote
    it (--trained), not the served draft (then built as the trainer would load it)."""
    if draft_dir is not None:
        draft_ids(draft_dir)  # a malformed draft config fails now, before the probe runs
    layout, source, findings = resolve_layout(target, dump_layout, datagen_ids, datagen_convention, draft_dir,
                                              datagen_dump)
    built = built_request(draft_dir, target, trained) if draft_dir is not None else None
    kind = draft_kind(built["config"]) if built is not None else "eagle3"
    reply = probe_training(len(layout), speculators_version, built, kind)
    r = SpeculatorsReply.read(reply)
    found = r.release
    if speculators_version is not None and found is not None and found != speculators_version:
        raise TrainingExtractionError(f"asked for speculators {speculators_version}, but its environment "
                                      f"({r.python}) has {found} installed")
    draft = read_draft(draft_dir, schema=r.config_schema) if draft_dir is not None else None
    return contract_from_probe(target, layout, source, reply, draft=draft, data_path=data_path,
                               findings=findings, datagen_dump=datagen_dump)
