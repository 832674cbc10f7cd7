"""NVIDIA ModelOpt as a `Trainer` (parity.extract.trainers): what ModelOpt trains an EAGLE-3 draft
on, found by running it.

ModelOpt (`modelopt.torch.speculative`, its HF path) captures the target's states itself: its
conversion hooks the base model's decoder layers and trains the draft on what they output. So
its training contract comes from a probe (`probe.py`) run in the ModelOpt environment, on a tiny
seeded transformers model of the target's architecture and depth:

    ids (run override / the ids the draft's config records / ModelOpt's default)
      --ModelOpt's conversion, its forward hooks--> the draft's fc input
      --the base model's own lm_head--> the loss target's logits
      --numerical identity against transformers--> fc [h2, h16, h29], target final

The "dump layout" of the contract is that capture: the fc states and the loss target. Its
exporter writes the served draft (`LlamaForCausalLMEagle3`, ids as the run gave them); the
served draft is what `--draft` names, read as exported.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ....contract import DatagenDump, Finding, FindingKind, Tap, TargetModel, TrainingContract
from ....contract.reply import ForwardReply, ProbeReply, stop_from_reply
from ....conventions import Convention, output_of
from ....envs import EnvError
from ....errors import UserError
from ....inputs import Draft, Target
from ... import installed
from .. import capturing
from ..draft import DraftError, read_draft
from .reply import ModelOptReply

NAME = "modelopt"
DIST = "nvidia-modelopt"  # the distribution whose installed release runs (parity.extract.installed)
FLAG = "--modelopt"
TITLE = "NVIDIA ModelOpt"
CAPTURES_STATES = True  # its own hooks on the target: no dump to describe
IDS_FLAG = "--modelopt-ids"
OWN_FLAGS = ("--modelopt-ids", "--modelopt")
DATAGEN_ENGINE = None
SWEEP_FROM = "0.35.0"  # the sweep's 'all': from its first release with HF EAGLE-3
SWEEP_DEFAULT = "none"  # `parity sweep` runs it only when --modelopt RANGE is given
PROBE_MODULE = "parity.extract.trainers.modelopt.probe"
FORWARD_MODULE = "parity.extract.trainers.modelopt.forward_side"
FORWARD_REPLY = ForwardReply  # its forward side only refuses (an error)
# ModelOpt's numbering as a typed rule, for reading ids only (`parity conventions`): id k = the output
# of 0-based decoder layer k = h(k+1) (its hooks' `output`). It never describes a dump: ModelOpt is run.
CONVENTION = Convention(
    NAME, "NVIDIA ModelOpt: id k = output of 0-based layer k = h(k+1)",
    "modelopt.torch.speculative.plugins.hf_eagle (_collect_aux_hidden_states_forward_hook)",
    defaults=lambda n: sorted({1, max(0, n // 2 - 1), max(0, n - 4)}), tap=output_of(TITLE), sorts=True,
    run_by=f"ModelOpt is run, not typed: use --trainer {NAME} (its ids: {IDS_FLAG})")


class ModelOptError(UserError, ValueError):
    """An input ModelOpt refuses, or one this trainer cannot take (one line, exit 2)."""


ERRORS = (ModelOptError, DraftError)


# its run's ids and its release beside --trainer, its release range on `parity sweep` (the protocol's)
IDS_HELP = ("the run's eagle_aux_hidden_state_layer_ids, e.g. 1,15,28 (default: the ids the draft's eagle_config "
            "records, else ModelOpt's own)")
add_options, release_from, ids_from = capturing.options(sys.modules[__name__], IDS_HELP)


def run_probe(target_config: dict, draft_dir: Path | None, run_ids: list[int] | None,
              release: str | None = None, seq_len: int = 8, seed: int = 0, built_from: str | None = None) -> dict:
    """`built_from`: what the draft directory is, to build the draft as ModelOpt does (None: none)."""
    request = {"target_config": target_config, "run_ids": run_ids, "seq_len": seq_len, "seed": seed,
               "draft_config": str((Path(draft_dir) / "config.json").resolve()) if draft_dir else None,
               **({"built": {"from": built_from}} if built_from and draft_dir else {})}
    return installed.run(sys.modules[__name__], release, PROBE_MODULE, request)


def _ids_source(run_ids, draft, r: ModelOptReply) -> str:
    if run_ids is not None:
        return "the run's eagle_aux_hidden_state_layer_ids (--modelopt-ids)"
    if draft is not None and draft.ids is not None:
        return f"the ids the draft's config records ({draft.ids_key}), as ModelOpt's export writes the run's"
    return "ModelOpt's default for the target's depth (what its conversion takes given no ids)"


def order_findings(r: ModelOptReply, fc: list[Tap]) -> list[Finding]:
    """Whether the fc slots follow the order the run gave the ids in, as measured: ModelOpt's hooks
    fire in layer order, and its export writes the ids as given."""
    ids = list(r.ids or ())
    if ids == sorted(ids):
        return []
    layers = [t.layer for t in fc]
    order = "layer order" if layers == sorted(layers) else "another order"
    return [Finding(kind=FindingKind.ids_not_ascending, severity="warning", message=(
        f"ModelOpt {r.shown_release} took ids {ids}, not ascending: its fc was trained on "
        f"[{', '.join(t.name for t in fc)}] ({order}, as measured)"
        + (f", and its export writes the ids {ids} as given" if r.exported is not None else "")
        + ": the config order is not the slot order"))]


def rope_findings(r: ModelOptReply, served: dict | None) -> list[Finding]:
    """The served config's rope_scaling, where it is what ModelOpt's exporter writes over a
    default-rope training (as its exporter, run by the probe, wrote it)."""
    written = r.exported.rope_scaling if r.exported is not None and r.exported.rope_overrides else None
    if written is None or served is None or served.get("rope_scaling") != written:
        return []
    return [Finding(kind=FindingKind.export_rewrites, severity="warning", message=(
        f"the draft's rope_scaling {written} is what ModelOpt {r.shown_release}'s exporter writes over a draft "
        "trained with the default rope (its eagle_export_rope_scaling, run here): the draft was trained without "
        "it, and an engine that honours it computes another rope (export with eagle_export_rope_scaling={} to "
        "keep the trained one)"))]


def to_contract(reply: dict, target: TargetModel, *, draft=None, run_ids=None, config: dict | None = None
                ) -> TrainingContract:
    """The TrainingContract a probe reply describes (an unidentified state is an error)."""
    stop = stop_from_reply(reply, DIST)
    if stop is not None:  # no family can run it, or parity's CPU run cannot
        raise stop
    r = ModelOptReply.read(reply)
    layout = capturing.named_layout(r, ModelOptError, "modelopt")
    findings = [*r.findings, Finding(kind=FindingKind.ids_resolved, severity="info", message=(
        f"ModelOpt {r.shown_release} took ids {r.ids} from {_ids_source(run_ids, draft, r)}"))]
    findings += order_findings(r, list(layout[:-1]))
    findings += rope_findings(r, config)
    if draft is not None:
        findings += list(draft.findings)
    if r.built_error:
        findings.append(Finding(kind=FindingKind.draft_not_built, message=(
            f"modelopt {r.shown_release} did not build the draft: {r.built_error}; the built draft is not compared")))
    details = {"ids": str(r.ids), "ids_source": _ids_source(run_ids, draft, r),
               **({"exported_ids": str(r.exported.ids)} if r.exported else {}),
               **{f"code_path_{k}": v for k, v in r.code_paths.items()}}
    return capturing.captured_contract(r, target, layout, name=NAME, code_path=f"ids {r.ids}; "
                                       f"{r.code_paths.get('capture')}", details=details, findings=findings,
                                       draft=draft)


def training_contract(target: Target, dump_layout: list[Tap] | None = None, *,
                      datagen_ids: list[int] | None = None, datagen_convention: "Convention | None" = None,
                      draft: Draft | None = None, release: str | None = None,
                      data_path: str | None = None, datagen_dump: DatagenDump | None = None,
                      trained: bool = False) -> TrainingContract:
    """The training contract ModelOpt's own code gives for this target and draft. `datagen_ids` is
    the run's ids (`--modelopt-ids`). A dump layout, a convention or a data path are speculators'
    notions and are refused."""
    if dump_layout is not None or datagen_dump is not None:
        raise ModelOptError("ModelOpt captures the target's states itself: it takes no dump layout "
                            "(drop --dump-layout; --modelopt-ids gives its run's ids)")
    if datagen_convention is not None:
        raise ModelOptError("ModelOpt reads its ids itself: --modelopt-ids takes no convention")
    if data_path is not None:
        raise ModelOptError("ModelOpt has one data path (its own hooks): it takes no data_path")
    draft_dir = draft.path if draft is not None else None
    facts = read_draft(draft) if draft is not None else None
    built_from = (f"the trained checkpoint {draft_dir}" if trained else "the served config.json, no --trained "
                  "given") if draft_dir is not None else None
    try:
        reply = run_probe(target.config, draft_dir, list(datagen_ids) if datagen_ids is not None else None, release,
                          built_from=built_from)
    except EnvError as exc:
        raise ModelOptError(str(exc)) from exc
    found = ProbeReply.read(reply).release
    if release is not None and found not in (None, release):
        raise ModelOptError(f"asked for nvidia-modelopt {release}, but its environment has {found}")
    return to_contract(reply, target.model, draft=facts, run_ids=datagen_ids,
                       config=draft.config if draft is not None else None)


def is_trained_draft(config: dict) -> bool:
    """ModelOpt exports its EAGLE-3 drafts in the served format (`LlamaForCausalLMEagle3`): there is
    no separate as-trained format for `parity export` to convert."""
    return False


__all__ = ["ERRORS", "FORWARD_MODULE", "FORWARD_REPLY", "NAME", "ModelOptError", "is_trained_draft", "read_draft",
           "run_probe", "to_contract", "training_contract"]
