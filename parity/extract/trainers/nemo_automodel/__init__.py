"""NVIDIA NeMo Automodel as a `Trainer` (parity.extract.trainers): what its EAGLE-3 recipe trains a
draft on, found by running it.

NeMo Automodel (`nemo_automodel.components.speculative.eagle`) captures the target's states
itself: its target class hooks the chosen decoder layers' outputs and concatenates them in the
order the run gives the ids. Its probe (`probe.py`), in parity's NeMo Automodel environment, runs
that class, the draft its recipe builds and one training step's forward on a tiny seeded
transformers model of the target's architecture and depth, and names what the draft's fc is
handed and what its loss target comes from.

Its recipe exports the draft's config.json with no layer ids at all, so the run's ids are not in
the served draft: `--nemo-automodel-ids` gives them (else its default is taken, said in a warning).
The ids a served config carries are a serving fact here, never read as the run's.

Its offline path (`recipe_args.cached_target_path`: the cache its `precompute_eagle3` writes) is
run with `--nemo-automodel-cache DIR`: the cache's manifest records the ids its target class took,
so they are the run's, and the probe runs the path itself (its cache sample written and read back,
handed to its trainer module).
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
from .reply import NemoAutomodelReply

NAME = "nemo-automodel"
DIST = "nemo-automodel"  # the distribution whose installed release runs (parity.extract.installed)
FLAG = "--nemo-automodel"
TITLE = "NVIDIA NeMo Automodel"
CAPTURES_STATES = True  # its own hooks on the target: no dump to describe
IDS_FLAG = "--nemo-automodel-ids"
CACHE_FLAG = "--nemo-automodel-cache"
OWN_FLAGS = ("--nemo-automodel-ids", "--nemo-automodel", CACHE_FLAG)
DATAGEN_ENGINE = None
MANIFEST = "manifest.json"  # the file of its offline cache that records the run (eagle3_cache.manifest_path)
SWEEP_FROM = "0.5.0"  # the sweep's 'all': from its first release with EAGLE-3
SWEEP_DEFAULT = "none"  # `parity sweep` runs it only when --nemo-automodel RANGE is given
PROBE_MODULE = "parity.extract.trainers.nemo_automodel.probe"
FORWARD_MODULE = "parity.extract.trainers.nemo_automodel.forward_side"
FORWARD_REPLY = ForwardReply  # its forward side only refuses (an error)
# Its numbering as a typed rule, for reading ids only (`parity conventions`): id k = the output of
# 0-based decoder layer k = h(k+1), in the order given (never sorted). NeMo Automodel is run.
CONVENTION = Convention(
    NAME, "NVIDIA NeMo Automodel: id k = output of 0-based layer k = h(k+1), in the order given",
    "nemo_automodel.components.speculative.eagle.target (HFEagle3TargetModel.generate_batch)",
    defaults=lambda n: [1, n // 2 - 1, n - 4], tap=output_of(TITLE),
    run_by=f"NeMo Automodel is run, not typed: use --trainer {NAME} (its ids: {IDS_FLAG})")


class NemoAutomodelError(UserError, ValueError):
    """An input NeMo Automodel refuses, or one this trainer cannot take (one line, exit 2)."""


ERRORS = (NemoAutomodelError, DraftError)


# its run's ids and its release beside --trainer, its release range on `parity sweep` (the protocol's)
IDS_HELP = ("the run's aux_layer_ids, in the order it gave them, e.g. 1,15,28 (its export writes none; default: "
            "its own default)")
_add_capturing_options, release_from, ids_from = capturing.options(sys.modules[__name__], IDS_HELP)


def add_options(parser, command: str) -> None:
    """The capturing trainers' options, and its offline cache beside --trainer."""
    _add_capturing_options(parser, command)
    if command == "trainer":
        parser.add_argument(CACHE_FLAG, metavar="DIR", help=f"--trainer {NAME}: the offline cache the run trained "
                            "on (recipe_args.cached_target_path, written by its precompute_eagle3): its manifest's "
                            "ids are the run's, and its offline path is run")


def data_path_from(args) -> str | None:
    """The data path the command line picks: its offline cache's directory (CACHE_FLAG), else None."""
    return getattr(args, "nemo_automodel_cache", None)


def run_probe(target_config: dict, run_ids: list[int] | None, release: str | None = None, seq_len: int = 8,
              seed: int = 0, built: bool = False, cache: Path | None = None) -> dict:
    """`built`: build the draft as its recipe does (a draft is checked); `cache`: run its offline
    path on the cache in that directory (its manifest alone is named in the request)."""
    request = {"target_config": target_config, "run_ids": run_ids, "seq_len": seq_len, "seed": seed,
               **({"built": {"from": "its recipe's config"}} if built else {}),
               **({"offline": {"manifest": str((cache / MANIFEST).resolve())}} if cache is not None else {})}
    return installed.run(sys.modules[__name__], release, PROBE_MODULE, request)


def ids_findings(r: NemoAutomodelReply, fc: list[Tap], run_ids, draft) -> list[Finding]:
    """Where the run's ids came from, whether the slots follow the order given (as measured), and
    that the served config cannot say the run's ids (its export writes none)."""
    version, ids = r.shown_release, list(r.ids or ())
    known = run_ids is not None or r.cache_ids is not None
    source = (f"the run's aux_layer_ids ({IDS_FLAG})" if run_ids is not None else
              f"its offline cache's manifest ({CACHE_FLAG}; its precompute records the ids it took), the states "
              f"cached in {r.cache_dtype}" if r.cache_ids is not None else
              f"its default for the target's depth ({r.default_ids}): its export writes no ids, so the run's are not "
              f"in the draft; give {IDS_FLAG} if the run set others")
    out = [Finding(kind=FindingKind.ids_resolved if known else FindingKind.default_layer_ids,
                   severity="info" if known else "warning",
                   message=f"NeMo Automodel {version} took ids {ids} from {source}")]
    layers = [t.layer for t in fc]
    if layers != sorted(layers):
        out.append(Finding(kind=FindingKind.ids_not_ascending, message=(
            f"NeMo Automodel {version} concatenates the captured states in the order the run gave the ids {ids} "
            f"(as measured: [{', '.join(t.name for t in fc)}]); an engine that captures in layer order feeds them "
            "sorted, which no ids written in the draft's config can change: retrain with ascending ids")))
    if draft is not None and draft.ids is None:
        out.append(Finding(kind=FindingKind.ids_not_exported, message=(
            f"the draft's config records no layer ids (NeMo Automodel {version}'s export writes none): every engine "
            "serves its own default layers, whatever the run trained on")))
    return out


def to_contract(reply: dict, target: TargetModel, *, draft=None, run_ids=None) -> TrainingContract:
    """The TrainingContract a probe reply describes (an unidentified state is an error)."""
    stop = stop_from_reply(reply, DIST)
    if stop is not None:  # no family can run it, or parity's CPU run cannot
        raise stop
    r = NemoAutomodelReply.read(reply)
    if run_ids is not None and r.cache_ids is not None and list(run_ids) != r.cache_ids:
        raise NemoAutomodelError(f"{IDS_FLAG} {','.join(map(str, run_ids))} is not what the offline cache was made "
                                 f"with: its manifest records aux_layer_ids {r.cache_ids} (drop {IDS_FLAG})")
    layout = capturing.named_layout(r, NemoAutomodelError, "nemo-automodel")
    findings = [*r.findings, *ids_findings(r, list(layout[:-1]), run_ids, draft), *(draft.findings if draft else ())]
    if r.built_error:
        findings.append(Finding(kind=FindingKind.draft_not_built, message=(
            f"nemo-automodel {r.shown_release} did not build the draft: {r.built_error}; the built draft is not "
            "compared")))
    details = {"ids": str(r.ids), "default_ids": str(r.default_ids),
               "data_path": "offline: its cache (precompute_eagle3 -> CachedEagle3Dataset)" if r.cache_ids is not None
               else "online: its target co-located",
               **{f"code_path_{k}": v for k, v in r.code_paths.items()}}
    return capturing.captured_contract(r, target, layout, name=NAME, code_path=f"ids {r.ids}; "
                                       f"{r.code_paths.get('capture')}", details=details, findings=findings,
                                       draft=draft)


def training_contract(target: Target, dump_layout: list[Tap] | None = None, *,
                      datagen_ids: list[int] | None = None, datagen_convention: "Convention | None" = None,
                      draft: Draft | None = None, release: str | None = None,
                      data_path: str | None = None, datagen_dump: DatagenDump | None = None,
                      trained: bool = False) -> TrainingContract:
    """The training contract NeMo Automodel's own code gives for this target. `datagen_ids` is the
    run's ids (`--nemo-automodel-ids`), in the order the run gave them; `data_path` its offline
    cache's directory (its offline path is run, the ids its manifest records). A dump layout or a
    convention are speculators' notions and are refused."""
    if dump_layout is not None or datagen_dump is not None:
        raise NemoAutomodelError("NeMo Automodel captures the target's states itself: it takes no dump layout "
                                 f"(drop --dump-layout; {IDS_FLAG} gives its run's ids)")
    if datagen_convention is not None:
        raise NemoAutomodelError(f"NeMo Automodel reads its ids itself: {IDS_FLAG} takes no convention")
    cache = Path(data_path) if data_path is not None else None
    if cache is not None and not (cache / MANIFEST).is_file():
        raise NemoAutomodelError(f"{CACHE_FLAG} {data_path}: no {MANIFEST} there (the directory its precompute_eagle3 "
                                 "wrote, recipe_args.cached_target_path)")
    facts = read_draft(draft) if draft is not None else None
    try:
        reply = run_probe(target.config, list(datagen_ids) if datagen_ids is not None else None, release,
                          built=draft is not None, cache=cache)
    except EnvError as exc:
        raise NemoAutomodelError(str(exc)) from exc
    found = ProbeReply.read(reply).release
    if release is not None and found not in (None, release):
        raise NemoAutomodelError(f"asked for nemo-automodel {release}, but its environment has {found}")
    return to_contract(reply, target.model, draft=facts, run_ids=datagen_ids)


def is_trained_draft(config: dict) -> bool:
    """Its recipe writes the draft in an HF form (`LlamaEagle3DraftModel`), which its own serve
    scripts rewrite for the engines: no as-trained format for `parity export` to convert."""
    return False


__all__ = ["ERRORS", "FORWARD_MODULE", "FORWARD_REPLY", "NAME", "NemoAutomodelError", "is_trained_draft",
           "read_draft", "run_probe", "to_contract", "training_contract"]
