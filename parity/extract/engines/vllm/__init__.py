"""The vLLM engine: what the installed vLLM captures, as a data-generation dump and as a server.

This package implements `parity.extract.engines.Engine` with its module-level names, plus
`extract_dump`: the layout of the hidden-state dump speculators' data generation makes with
vLLM (`extract_hidden_states`). Both run `probe.py` in a fresh process: of this interpreter,
with the vLLM installed here, or of parity's environment of the release a `--vllm` flag names,
or of the installed release when its code cannot be imported here (parity.extract.installed;
its model code needs the CPU platform set before import, which the probe does). Nothing here
knows a numbering rule: the ids are read by vLLM's own config classes and model runners, and
every captured state is named by numerical identity against transformers (docs/vllm.md).
"""

from __future__ import annotations

import json
import sys
from importlib import metadata
from typing import Any

from ....contract import DatagenDump, Finding, FindingKind, Provenance, ServingContract, Tap, sources
from ....envs import EnvError, display_python, find_env
from ....conventions import Convention, input_to
from ....errors import UserError
from ....inputs import Draft, LaunchRefused, Target
from ... import installed, release_option
from ...eagle3_config import eagle3_config
from .. import ServingExtractionError
from ....contract.reply import DraftFacts, stop_from_reply
from .reply import VLLMForwardReply, VLLMReply

NAME = "vllm"
DIST = "vllm"  # the distribution whose installed release runs (parity.extract.installed)
PROBE = "parity.extract.engines.vllm.probe"
FORWARD_MODULE = "parity.extract.engines.vllm.forward_side"
FORWARD_REPLY = VLLMForwardReply
TOP_LEVEL_IDS = "eagle_aux_hidden_state_layer_ids"  # read first by both model runners, whatever the draft's kind
# Where vLLM's id reader (get_eagle3_aux_layers_from_config, V1's _get_eagle3_aux_layers_from_config)
# reads each draft kind's ids: an EAGLE-3 draft's at the top level; a DFlash draft's in its own
# dflash_config (+1), which SGLang reads too, read when no top-level ids come first.
IDS_KEYS = {"eagle3": TOP_LEVEL_IDS, "dflash": "dflash_config.target_layer_ids"}
FLAG = "--vllm"
RELEASE_NOUN = "a vLLM release"
# Its forward side serves the rows past the draft's declared positions: with positions, its config
# serves the target's own context (vLLM's default max_model_len), so vLLM's config classes treat the
# draft's max_position_embeddings as in a deployment (forward_side.py, docs/forward.md).
FORWARD_LONG_POSITIONS = True
SWEEP_FROM = "0.8.5"  # where the sweep's 'all' starts: its first release with EAGLE-3
# How vLLM numbers the aux ids, as a typed rule (`parity conventions`, `--datagen-convention vllm`;
# parity.extract.numbering reads it): id k = hk, id N = hN pre-norm; sorted and de-duplicated.
CONVENTION = Convention(
    NAME, "vLLM aux ids: id k = hk, id N = hN pre-norm; sorted and de-duplicated",
    "vllm models/interfaces.py EagleModelMixin._maybe_add_hidden_state (after PR #36063)",
    defaults=lambda n: [2, n // 2, n - 3], tap=input_to(NAME), sorts=True)
# The sweep's seed launch (SGLang's SEED_LAUNCH: the serve command the project was born from) as
# vLLM spells the same request, in its one knob: `num_speculative_tokens` 15 (16 draft tokens: 15
# proposed plus the one verified, as SGLang counts them).
SEED_LAUNCH = ("--speculative-config", '{"method": "eagle3", "num_speculative_tokens": 15}')

# The commands that take a vLLM release, and what its flag means there (metavar, help): the
# dump description's flag ("datagen") names the release whose data generation makes the dump.
OPTIONS = {
    "datagen": ("VERSION", "the vLLM release that makes the dump from --datagen-ids (default: the installed one)"),
    "contract": ("VERSION", "with --engine vllm: another release, in parity's environment of it (default: the "
                            "installed one)"),
    "lock": ("VERSION", "with --engine vllm: the release the lock is made under (default: the installed one)"),
    "matrix": ("V,V", "only these vLLM releases (serving by vLLM)"),
    "can-i-deploy": ("VERSION", "served by this vLLM release"),
    "forward": ("VERSION", "with --engine vllm: another release (default: the installed one)"),
    "sweep": ("RANGE", f"the vLLM releases: 'all' (from {SWEEP_FROM}, the oldest parity has a family for), "
                       "'none', or a version range (which may reach older releases)"),
}


def add_options(parser, command: str) -> None:
    """--vllm, on the commands that take a vLLM release."""
    release_option(parser, command, FLAG, OPTIONS)


def release_from(args) -> str | None:
    return getattr(args, "vllm", None)


def forward_refusal(steps: int) -> str | None:
    if steps != 1:
        return ("vLLM's draft steps after the first attend over its paged KV cache, which parity's CPU kernel "
                "stand-in does not compute; use --steps 1")
    return None


class DatagenError(UserError, RuntimeError):
    """vLLM's data-generation capture could not be run or named for this target (one line)."""


def python(version: str | None) -> str:
    """The interpreter that runs vllm `version` (None: the installed release, in this interpreter;
    parity.extract.installed)."""
    return installed.interpreter(sys.modules[__name__], version).python


def run_probe(request: dict, vllm_version: str | None) -> dict[str, Any]:
    return installed.run(sys.modules[__name__], vllm_version, PROBE, {"seq_len": 8, "seed": 0, **request})


# -- the data-generation dump ------------------------------------------------------------------


def launch_ids(datagen_ids: list[int] | None, n: int) -> list[int]:
    """The ids speculators' launch script (scripts/launch_vllm.py, 0.5-0.9; not in the wheel)
    hands vLLM: `--target-layer-ids` plus the last layer N, or by default [2, N//2, N-3, N]."""
    if datagen_ids is None:
        return [2, n // 2, n - 3, n]
    return list(datagen_ids) + ([] if n in datagen_ids else [n])


def extract_dump(target: Target, datagen_ids: list[int] | None, vllm_version: str | None = None) -> DatagenDump:
    """What vLLM's `extract_hidden_states` capture dumps for these data-generation ids (None:
    the launch default), every slot named against transformers. A slot vLLM fills with
    anything that is not a state of the reference is a DatagenError, never a layout."""
    n = target.layers
    ids = launch_ids(datagen_ids, n)
    try:
        reply = run_probe({"mode": "dump", "target_config": target.config, "launch_ids": ids}, vllm_version)
    except EnvError as exc:
        raise DatagenError(str(exc)) from exc
    stop = stop_from_reply(reply, "vllm")
    if stop is not None:  # no family can run it, or parity's CPU run cannot
        raise stop
    r = VLLMReply.read(reply)
    version = r.shown_release
    if r.error is not None:
        raise DatagenError(f"vllm {version} data generation on {target.model.architecture}: {r.error}")
    runner = r.gpu_default_runner
    runs = r.runners
    chosen = runs[runner]
    method = r.dump_method or "extract_hidden_states"
    where = f"vllm {version} {method} ({runner} runner) with ids {ids}"
    if chosen.error:
        raise DatagenError(f"{where}: {chosen.error}")
    bad = [f"slot {k} {s.why}" for k, s in enumerate(chosen.slots) if s.tap is None]
    if bad:
        raise DatagenError(f"{where}: " + "; ".join(bad))
    layout = tuple(Tap.parse(s.tap) for s in chosen.slots)
    findings = []
    for other, run in runs.items():
        taps = run.names
        if other != runner and (run.error or taps != [t.name for t in layout]):
            findings.append(Finding(kind=FindingKind.runners_differ, message=(
                f"vllm {version}'s {other} runner dumps {run.error or taps}, the {runner} runner "
                f"(the GPU default) {[t.name for t in layout]}")))
    if len(layout) != len(ids):
        findings.append(Finding(kind=FindingKind.dump_slots_differ, message=dump_slots_message(ids, layout, n, version,
                                                                                   chosen.capture_ids)))
    return DatagenDump(engine=NAME, version=version, ids_given=tuple(datagen_ids) if datagen_ids is not None else None,
                       launch_ids=tuple(ids), layout=layout, runner=runner, method=method,
                       code_path="; ".join(r.code_paths.values()),
                       python=display_python(r.python), findings=tuple(findings))


def dump_slots_message(ids: list[int], layout, n: int, version: str, capture_ids) -> str:
    """Why the launch ids gave fewer slots than ids: repeats are captured once, and an id the
    model's loop over its n layers never reaches is dropped (said only when the slot count shows it)."""
    why = []
    if len(set(ids)) != len(ids):
        why.append("each layer is captured once, in layer order")
    beyond = sorted(i for i in set(ids) if i >= n)
    if beyond and len(layout) == len(set(ids)) - len(beyond):
        why.append(f"id(s) {beyond} captured nothing: vllm {version}'s capture runs before each of its {n} "
                   f"layers, so an id of {n} or more is never reached (dropped, silently)")
    return (f"the launch ids {ids} give a {len(layout)}-slot dump ({'; '.join(why) or 'capture ' + str(capture_ids)}), "
            f"so the last slot, which speculators trains the draft to predict, is {layout[-1].name}")


# -- serving ----------------------------------------------------------------------------------


def preflight(target: Target, vllm_version: str | None = None) -> None:
    """Nothing to refuse before the probe: vLLM's own registry decides the architecture there (a
    refusal is exit 2)."""


def write_ids(config: dict, ids: list[int], kind: str = "eagle3") -> dict:
    """The draft config with `ids` where vLLM reads a `kind` draft's ids (IDS_KEYS): an EAGLE-3
    draft's at the top level, the key both model runners read first; a DFlash draft's in its
    dflash_config, without top-level ids, which both would read first. Either way without nested
    `eagle_config` ids, which the V1 runner would let override them."""
    cfg = json.loads(json.dumps(config))
    if kind == "dflash":
        cfg.pop(TOP_LEVEL_IDS, None)
        dflash = cfg.get("dflash_config") if isinstance(cfg.get("dflash_config"), dict) else {}
        cfg["dflash_config"] = {**dflash, "target_layer_ids": list(ids)}
    else:
        cfg[TOP_LEVEL_IDS] = list(ids)
    eagle = cfg.get("eagle_config")
    if isinstance(eagle, dict):
        eagle.pop("eagle_aux_hidden_state_layer_ids", None)
    return cfg


def served_config(spec: dict, ids: list[int], release: str | None = None) -> dict:
    """The draft config vLLM `release` (None: the newest installed) serves, with the ids written by
    `write_ids`: a speculators-format config loads natively where the release's code has a
    speculators-format loader (vLLM copies its top-level ids into the draft's config), so it is
    `spec`; a release without one (0.8.5: transformers' AutoConfig refuses a config with no
    `model_type`) serves the EAGLE-3 format (parity.extract.eagle3_config)."""
    if loads_speculators_format(release):
        return write_ids(spec, ids)
    return write_ids(eagle3_config(spec, ids), ids)


SPECULATORS_LOADER = "vllm/transformers_utils/configs/speculators/__init__.py"


def loads_speculators_format(version: str | None) -> bool:
    """Whether vLLM `version`'s code (None: the installed release's) has a speculators-format
    config loader (its `transformers_utils/configs/speculators` package, from the release's files:
    nothing is imported)."""
    if version is None:
        installed.release(sys.modules[__name__], None)  # none installed: the one-line refusal
        return metadata.distribution(DIST).locate_file(SPECULATORS_LOADER).is_file()
    env = find_env("vllm", version)
    return any(env.path.glob(f"lib/python*/site-packages/{SPECULATORS_LOADER}"))


def real_sizes(r: VLLMReply, target: Target) -> dict[str, int | None]:
    """The vocabulary sizes vLLM serves with, from the real config files (parity.contract.sources):
    the draft's as vLLM's config reader and draft class take them from the draft directory
    (`Adapter.real_draft_sizes`, run in the probe), the target's as `ModelConfig.get_vocab_size()`
    reads it, the vocab_size of the target's (text) config, here from the config as given."""
    return {"draft_vocab_size": r.draft_sizes.draft_vocab_size if r.draft_sizes else None,
            "target_vocab_size": target.model.vocab_size}


def runner_findings(r: VLLMReply, details: dict[str, str]) -> list[Finding]:
    """What each model runner fed (into `details`, the provenance), its unnamed states and errors,
    runners feeding the draft different states (a drift for one of them whatever was trained), and
    the GPU-default runner serving the model's default ids."""
    version, runner = r.shown_release, r.gpu_default_runner
    runs = r.runners
    chosen = runs[runner]
    findings: list[Finding] = []
    for name, run in runs.items():
        details[f"{name}_ids"] = str(run.config_ids or f"none in the config: default {r.default_ids}")
        details[f"{name}_fc_input"] = str(run.error or run.names)
        for k, slot in enumerate(run.slots):
            if slot.tap is None:
                findings.append(Finding(kind=FindingKind.unidentified_state, severity="error", slot=k,
                                        message=f"{name} runner: captured slot {k} {slot.why}"))
        if run.error:
            findings.append(Finding(kind=FindingKind.engine_error, severity="error", message=f"{name} runner: {run.error}"))
    others = {n: r for n, r in runs.items() if n != runner and r.names != chosen.names}
    for name, run in others.items():
        # The same draft is fed other states depending on which runner a deployment gets (V2 on a
        # GPU with Triton, V1 otherwise): a drift for one of them whatever was trained.
        findings.append(Finding(kind=FindingKind.runners_differ, severity="error", message=(
            f"vllm {version}'s model runners feed this draft different states: the {name} runner "
            f"{run.names} (ids {run.config_ids or 'default'}), the {runner} runner {chosen.names} "
            f"(ids {chosen.config_ids or 'default'}); a GPU deployment uses {runner} by default")))
    if not chosen.config_ids:
        findings.append(Finding(kind=FindingKind.default_layers_fallback, message=(
            f"vllm {version}'s {runner} runner found no ids it reads in the draft config and serves "
            f"the model default {r.default_ids}"
            + (" (its EAGLE-3 default, also for this DFlash draft: SGLang's DFlash default differs)"
               if r.draft_kind == "dflash" else ""))))
    return findings


def to_contract(r: VLLMReply, target: Target) -> ServingContract:
    """The contract of the GPU-default runner. Each runner's ids and fc input are kept in the
    provenance; runners feeding different states is an error finding (a drift for one of them)."""
    version = r.shown_release
    if r.draft_refused is not None:  # nothing captured: the engine refuses the draft as written
        return ServingContract(
            target_model=target.model, fc_input=(None,), engine=NAME, draft_kind=r.draft_kind,
            findings=(Finding(kind=FindingKind.draft_unloadable, severity="error", message=r.draft_refused),),
            provenance=Provenance(package="vllm", version=version, code_path=next(iter(r.code_paths.values()), "?"),
                                  python=display_python(r.python), details={}, family=r.family,
                                  release_note=r.release_note, reply_cache=r.reply_cache),
            requested_ids=None, ids_source="none: vLLM's config classes refuse the draft", launch=r.launch)
    runner = r.gpu_default_runner
    runs = r.runners
    chosen = runs[runner]
    findings: list[Finding] = []
    details = {"model_class": r.model_class if "model_class" in r.model_fields_set else "?",
               "gpu_default_runner": runner, "kernel_standins": "; ".join(r.kernel_standins)}
    findings += runner_findings(r, details)
    launched = (r.launch.effective if r.launch else {}).get("method")
    if r.launch and launched != r.method:  # parity's limit, said: not the engine's capture
        findings.append(Finding(kind=FindingKind.capture_not_launched, message=(
            f"the serve arguments resolve to method {launched!r} on vllm {version}; parity captured under "
            f"{r.method!r} (it runs no other method's set-up), so the slot table is not the serve "
            "command's: the launch verdict on the method is")))
    if r.dflash_refusal:  # the engine's own refusal of the captured states, quoted
        findings.append(Finding(kind=FindingKind.engine_error, severity="error", message=r.dflash_refusal))
    details.update((r.dflash_draft.details() if r.dflash_draft else {}))
    draft = r.draft or DraftFacts()
    if r.draft_error:
        findings.append(Finding(kind=FindingKind.draft_facts_unread, message=r.draft_error))
    if r.draft_unloadable:  # vLLM's own loader refused the checkpoint: unservable as written
        findings.append(Finding(kind=FindingKind.draft_unloadable, severity="error", message=r.draft_unloadable))
    if r.draft_sizes_error:
        findings.append(Finding(kind=FindingKind.draft_sizes_unread, message=r.draft_sizes_error))
    if r.built_error:
        findings.append(Finding(kind=FindingKind.draft_not_built, message=f"{r.built_error}; its built draft is not "
                                "compared"))
    if draft.draft_class:
        details["draft_class"] = draft.draft_class
    slots = tuple(Tap.parse(s) if s else None for s in chosen.names) or (None,)
    provenance = Provenance(package="vllm", version=version, code_path=r.code_paths[runner],
                            python=display_python(r.python), details=details,
                            family=r.family, release_note=r.release_note, reply_cache=r.reply_cache)
    ids = chosen.config_ids
    return ServingContract(
        target_model=target.model, fc_input=slots,
        graph=draft.graph,
        vocab=sources.vocab(draft.vocab, real_sizes(r, target)),
        embedding=draft.embedding, provenance=provenance, findings=tuple(findings),
        draft=r.built, engine=NAME,
        draft_kind=r.draft_kind, requested_ids=tuple(ids) if ids else None,
        ids_source=f"{runner} runner: " + ("the draft config" if ids else "engine default"),
        capture_ids=tuple(chosen.capture_ids) if chosen.capture_ids is not None else None,
        runners={name: tuple(Tap.parse(s) if s else None for s in run.names) or (None,)
                 for name, run in runs.items()} if len(runs) > 1 else {},
        launch=r.launch)


def probe_serving(target: Target, draft: Draft, vllm_version: str | None = None,
                  candidates: list[list[int]] | None = None, *,
                  serve_args: tuple[str, ...] | None = None) -> tuple[ServingContract, list[dict]]:
    """The serving contract, plus what vLLM would capture for each candidate id list; with
    `serve_args`, the launch contract: those arguments (after `vllm serve MODEL`) as the release
    parses and resolves them (parity.extract.engines.vllm.launch)."""
    launch = {} if serve_args is None else {"serve_args": list(serve_args)}
    r = serving_reply({"mode": "serving", "target_config": target.config, "draft_dir": str(draft.path.resolve()),
                       "names": {"draft": draft.name, "target": target.name},
                       "candidates": candidates or [], **launch}, vllm_version, serve_args)
    return to_contract(r, target), list(r.candidates)


def serving_reply(request: dict, vllm_version: str | None, serve_args: tuple[str, ...] | None) -> VLLMReply:
    """The serving probe's reply to `request`; what stopped it raised: parity's limit or failure,
    the release refusing the serve arguments (LaunchRefused, its words), or its error."""
    try:
        reply = run_probe(request, vllm_version)
    except EnvError as exc:
        raise ServingExtractionError(str(exc)) from exc
    limit = stop_from_reply(reply, "vllm")
    if limit is not None:
        raise limit
    r = VLLMReply.read(reply)
    if r.launch_refused:  # the engine's own words: bad input, one line
        raise LaunchRefused(f"--serve-args: vllm {r.shown_release}'s {r.launch_refused}",
                            unresolved=r.launch_unresolved, argv=serve_args or ())
    if r.error is not None:
        raise ServingExtractionError(f"vllm {r.shown_release}: {r.error}")
    return r


def refuse_launch(target: Target, draft: Draft, vllm_version: str | None = None, *,
                  serve_args: tuple[str, ...]) -> None:
    """Refuse (LaunchRefused) serve arguments the release's own parser or resolution refuses,
    before any model is built: the probe stops after the launch contract."""
    serving_reply({"mode": "serving", "target_config": target.config, "draft_dir": str(draft.path.resolve()),
                   "names": {"draft": draft.name, "target": target.name},
                   "serve_args": list(serve_args), "launch_only": True}, vllm_version, serve_args)


def extract_serving(target: Target, draft: Draft, vllm_version: str | None = None, *,
                    serve_args: tuple[str, ...] | None = None) -> ServingContract:
    return probe_serving(target, draft, vllm_version, serve_args=serve_args)[0]


__all__ = ["FLAG", "FORWARD_LONG_POSITIONS", "FORWARD_MODULE", "IDS_KEYS", "NAME", "OPTIONS", "RELEASE_NOUN",
           "SEED_LAUNCH", "SWEEP_FROM", "TOP_LEVEL_IDS", "DatagenError", "ServingExtractionError", "add_options", "forward_refusal", "release_from",
           "extract_dump", "extract_serving", "launch_ids", "refuse_launch", "preflight", "probe_serving",
           "python", "served_config", "to_contract", "write_ids"]
