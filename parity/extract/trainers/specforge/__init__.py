"""SpecForge as a `Trainer` (parity.extract.trainers): what SpecForge trains the draft on, found by running it.

SpecForge (0.2) has no dump for a layout to describe: it captures the target's states itself
with its pinned SGLang release and trains on them. So its training contract comes from a
probe (`probe.py`) run in the SpecForge environment that runs SpecForge's own code end to
end on a tiny seeded model of the target's architecture and depth:

    ids (run override / draft eagle_config / SpecForge's default, resolved by SpecForge)
      --SGLang 0.5.14 capture, SpecForge's logits wrapper--> aux concat + last hidden states
      --SpecForge's normaliser--> fc input `hidden_state`, loss target `target`
      --numerical identity against transformers--> fc [h2, h16, h29], target final

The "dump layout" of the contract is that capture: the three fc states and the loss target.
`datagen_ids` is SpecForge's run override (`model.aux_hidden_state_layer_ids`, the CLI's
`--specforge-ids`): the ids are given to SpecForge, never translated by a rule of ours.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ....contract import DatagenDump, Finding, FindingKind, Tap, TargetModel, TrainingContract
from ....envs import EnvError
from ....contract.reply import ForwardReply, ProbeReply, stop_from_reply
from ....errors import UserError
from ....conventions import Convention, output_of
from ....inputs import Draft, Target, TrainingRun
from ... import installed
from .. import capturing
from ..draft import DraftError, read_draft
from .reply import SpecForgeReply

NAME = "specforge"
DIST = "specforge"  # the distribution whose installed release runs (parity.extract.installed)
FLAG = "--specforge"
TITLE = "SpecForge"
CAPTURES_STATES = True  # with its pinned SGLang: no dump to describe
IDS_FLAG = "--specforge-ids"
OWN_FLAGS = ("--specforge-ids", "--specforge")
DATAGEN_ENGINE = None
TRAINED_RUN = True  # --trained is its training output (the recorded ttt length), beside the served draft
SWEEP_FROM = "0.1.0"  # the sweep's 'all': every release on the registry (0.1.0 is a row saying why it is not built)
SWEEP_DEFAULT = "none"  # `parity sweep` runs it only when --specforge RANGE is given (it joined the sweep later)
PROBE_MODULE = "parity.extract.trainers.specforge.probe"
FORWARD_MODULE = "parity.extract.trainers.specforge.forward_side"
FORWARD_REPLY = ForwardReply  # its forward side only refuses (an error)
# SpecForge's numbering as a typed rule, for reading ids only (`parity conventions`; read through
# parity.extract.numbering): id k = output of 0-based layer k = h(k+1). It never describes a dump:
# SpecForge is run instead (--trainer specforge).
CONVENTION = Convention(
    NAME, "SpecForge: id k = output of 0-based layer k = h(k+1)", "SpecForge algorithms/model_providers.py",
    defaults=lambda n: [1, n // 2 - 1, n - 4], tap=output_of(TITLE),
    run_by=f"SpecForge is run, not typed: use --trainer {NAME} (its ids: {IDS_FLAG}), "
           "which trains on the three captured states with the model's output as the loss target")


class SpecForgeError(UserError, ValueError):
    """An input SpecForge refuses, or one this trainer cannot take (one line, exit 2)."""


ERRORS = (SpecForgeError, DraftError)


# its run's ids and its release beside --trainer, its release range on `parity sweep` (the protocol's)
IDS_HELP = ("the run's model.aux_hidden_state_layer_ids override, e.g. 1,15,28 (default: the draft's "
            "eagle_config, else SpecForge's own)")
add_options, release_from, ids_from = capturing.options(sys.modules[__name__], IDS_HELP)


def python(release: str | None) -> str:
    """The interpreter with SpecForge `release`: None is the installed release, in this
    interpreter (SpecForge pins its own SGLang: where that cannot be imported here, parity's
    environment of the release; parity.extract.installed)."""
    return installed.interpreter(sys.modules[__name__], release).python


def run_probe(target_config: dict, draft_dir: Path | None, run_ids: list[int] | None,
          release: str | None = None, seq_len: int = 8, seed: int = 0, built_from: str | None = None,
          trained_run: Path | None = None) -> dict:
    """`built_from`: what the draft directory is (the served config, or the trained checkpoint),
    to build the draft as SpecForge does (parity.contract.BuiltDraft); None builds none.
    `trained_run`: SpecForge's training output (--trained), whose recorded ttt length its own
    checkpoint reader gives (the trained depth)."""
    request = {"target_config": target_config, "run_ids": run_ids, "seq_len": seq_len, "seed": seed,
               "draft_config": str((Path(draft_dir) / "config.json").resolve()) if draft_dir else None,
               **({"built": {"from": built_from}} if built_from and draft_dir else {}),
               **({"trained_run": {"path": str(Path(trained_run).resolve()), "given": str(trained_run)}}
                  if trained_run is not None else {})}
    return installed.run(sys.modules[__name__], release, PROBE_MODULE, request)


def _ids_source(run_ids, draft) -> str:
    """Which of SpecForge's sources the resolved ids came from (the inputs it was given)."""
    if run_ids is not None:
        return "the run override model.aux_hidden_state_layer_ids"
    if draft is not None and draft.ids is not None:
        return f"the draft config's eagle_config['eagle_aux_hidden_state_layer_ids'] ({draft.ids_key})"
    return "SpecForge's default for the target's depth (no run override, no ids in the draft config)"


def to_contract(reply: dict, target: TargetModel, *, draft=None, run_ids=None) -> TrainingContract:
    """The TrainingContract a probe reply describes (an unidentified state is an error)."""
    stop = stop_from_reply(reply, "specforge")
    if stop is not None:  # no family can run it, or parity's CPU run cannot
        raise stop
    r = SpecForgeReply.read(reply)
    layout = capturing.named_layout(r, SpecForgeError, "specforge")
    version, sglang = r.shown_release, r.engine_release
    findings = list(r.findings)
    findings.append(Finding(kind=FindingKind.ids_resolved, severity="info", message=(
        f"SpecForge {version} resolved ids {r.ids} from {_ids_source(run_ids, draft)}; sglang "
        f"{sglang} captures at layer indices {r.capture_ids}")))
    if draft is not None:
        findings += [f for f in draft.findings]
    if r.built_error:
        findings.append(Finding(kind=FindingKind.draft_not_built, message=(
            f"specforge {version} did not build the draft: {r.built_error}; the built draft is not compared")))
    details = {"sglang": sglang, "ids": str(r.ids),
               "ids_source": _ids_source(run_ids, draft), "capture_ids": str(r.capture_ids),
               "capture_method": str(r.capture_method),
               "target_norm_evidence": str(r.target_norm_evidence),
               **{f"code_path_{k}": v for k, v in r.code_paths.items()}}
    return capturing.captured_contract(r, target, layout, name=NAME, code_path=(
        f"ids {r.ids} captured by sglang {sglang}; {r.code_paths['normalizer']}"), details=details,
        findings=findings, draft=draft)


def training_contract(target: Target, dump_layout: list[Tap] | None = None, *,
                      datagen_ids: list[int] | None = None, datagen_convention: "Convention | None" = None,
                      draft: Draft | None = None, release: str | None = None,
                      data_path: str | None = None, datagen_dump: DatagenDump | None = None,
                      trained: bool = False, trained_run: TrainingRun | None = None) -> TrainingContract:
    """The training contract SpecForge's own code gives for this target and draft, with the
    draft as SpecForge builds it (`trained`: the draft is the checkpoint SpecForge wrote, else
    the served config as SpecForge would load it). `trained_run` (--trained): SpecForge's
    training output; the trained depth is the ttt length its checkpoint records, as its own
    reader gives it (else its run default, not recorded).

    `datagen_ids` is SpecForge's run override (`--specforge-ids`); SpecForge's capture runs a
    model of the target's config. A dump layout, a convention or a data path are speculators'
    notions and are refused."""
    if dump_layout is not None:
        raise SpecForgeError("SpecForge captures the target's states itself: it takes no dump layout "
                             "(drop --dump-layout; --specforge-ids gives its run's ids)")
    if datagen_convention is not None:
        raise SpecForgeError("SpecForge reads its ids itself: --specforge-ids takes no convention")
    if datagen_dump is not None:
        raise SpecForgeError("SpecForge captures the target's states itself: it reads no data-generation dump")
    if data_path is not None:
        raise SpecForgeError("SpecForge has one offline data path: it takes no data_path")
    draft_dir = draft.path if draft is not None else None
    facts = read_draft(draft) if draft is not None else None
    try:
        built_from = (f"the trained checkpoint {draft_dir}" if trained
                      else "the served config.json, no --trained given") if draft_dir is not None else None
        reply = run_probe(target.config, draft_dir, list(datagen_ids) if datagen_ids is not None else None, release,
                          built_from=built_from, trained_run=trained_run.path if trained_run is not None else None)
    except EnvError as exc:
        raise SpecForgeError(str(exc)) from exc
    found = ProbeReply.read(reply).release
    if release is not None and found not in (None, release):
        raise SpecForgeError(f"asked for specforge {release}, but its environment has {found}")
    return to_contract(reply, target.model, draft=facts, run_ids=datagen_ids)


def is_trained_draft(config: dict) -> bool:
    """SpecForge saves its EAGLE-3 drafts in the served format (`LlamaForCausalLMEagle3`):
    there is no separate as-trained format for `parity export` to convert."""
    return False


__all__ = ["ERRORS", "FORWARD_MODULE", "FORWARD_REPLY", "NAME", "SpecForgeError", "is_trained_draft", "run_probe",
           "read_draft", "to_contract", "training_contract"]
