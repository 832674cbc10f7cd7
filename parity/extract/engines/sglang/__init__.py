"""The SGLang engine: what the installed SGLang actually feeds the draft's fc layer.

This package implements `parity.extract.engines.Engine` with its module-level names.

`extract_serving(target, draft)` runs `probe.py` in a fresh process of
the environment that has the requested SGLang release and turns its reply into a
`ServingContract`. Nothing here knows a numbering rule: the ids are resolved by the
engine's start-up code and every captured tensor is named by numerical identity.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ....contract import Finding, FindingKind, Provenance, ServingContract, Tap, sources
from ....envs import EnvError, display_python, find_env
from ....inputs import Draft, InputError, LaunchRefused, Target
from ... import installed, release_option
from .. import ServingExtractionError
from ....contract.reply import DraftFacts, stop_from_reply
from .reply import SGLangForwardReply, SGLangReply
from .served import served_config

NAME = "sglang"
DIST = "sglang"  # the distribution whose installed release runs (parity.extract.installed)
PROBE = "parity.extract.engines.sglang.probe"
FORWARD_MODULE = "parity.extract.engines.sglang.forward_side"
FORWARD_REPLY = SGLangForwardReply
# Where SGLang reads each draft kind's ids: an EAGLE-3 draft's in eagle_config (the draft's
# resolve_spec_aux_hidden_state_config), a DFlash draft's in dflash_config (parse_dflash_draft_config
# reads it there before a top-level target_layer_ids, and never reads eagle_config's).
IDS_KEYS = {"eagle3": "eagle_config.eagle_aux_hidden_state_layer_ids", "dflash": "dflash_config.target_layer_ids"}
FLAG = "--sglang"
RELEASE_NOUN = "an SGLang release"
FORWARD_LONG_POSITIONS = True  # its forward side serves the rows past the draft's declared positions
# Where the sweep's 'all' starts: its two releases before the first with EAGLE-3, 0.4.4.post2, say so
# in one line each.
SWEEP_FROM = "0.4.4"
# The fixed seed launch the sweep has each release resolve with its own parser and resolution code
# (the launch contract, docs/launch.md), on the first serving case's target and draft: the serve
# command the project was born from, its speculative flags (one step, top-k 1, 16 draft tokens).
# Paths are parity's own (the launch contract replaces them).
SEED_LAUNCH = ("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
               "--speculative-num-draft-tokens", "16")

# The commands that take an SGLang release, and what its flag means there (metavar, help).
OPTIONS = {
    "contract": ("VERSION", "run another installed release"),
    "check": ("VERSION", "check under another release, in parity's environment of it (default: the installed one)"),
    "lock": ("VERSION", "the release the lock is made under (default: the installed one)"),
    "export": ("VERSION", "export for another installed SGLang release"),
    "replay": ("VERSION", "the serving contract under another installed release"),
    "matrix": ("V,V", "only these sglang releases (default: all in envs.toml)"),
    "can-i-deploy": ("VERSION", "served by this SGLang release"),
    "forward": ("VERSION", "run the serving path under another installed release (its environment)"),
    "sweep": ("RANGE", f"the SGLang releases: 'all' (from {SWEEP_FROM}; 0.4.4.post2 is the first with EAGLE-3), "
                       "'none', or a version range such as '>=0.5.11,<0.5.20'"),
}


def add_options(parser, command: str) -> None:
    """--sglang, on the commands that take an SGLang release."""
    release_option(parser, command, FLAG, OPTIONS)


def release_from(args) -> str | None:
    return getattr(args, "sglang", None)


def forward_refusal(steps: int) -> str | None:
    return None  # its draft steps run on the CPU, every one


def write_ids(config: dict, ids: list[int], kind: str = "eagle3") -> dict:
    """The draft config with `ids` where SGLang reads a `kind` draft's ids (IDS_KEYS): in
    eagle_config for an EAGLE-3 draft, in dflash_config for a DFlash one, the rest of it kept."""
    outer, key = IDS_KEYS[kind].split(".")
    inner = config.get(outer) if isinstance(config.get(outer), dict) else {}
    return {**config, outer: {**inner, key: list(ids)}}


def python(version: str | None) -> str:
    """The interpreter that runs sglang `version` (None: the installed release, in this
    interpreter; parity.extract.installed)."""
    return installed.interpreter(sys.modules[__name__], version).python


def run_probe(target_config: dict, draft_dir: Path | None, sglang_version: str | None = None,
              seq_len: int = 8, seed: int = 0, **extra) -> dict[str, Any]:
    request = {"target_config": target_config, "draft_dir": str(draft_dir) if draft_dir else None,
               "seq_len": seq_len, "seed": seed, **extra}
    return installed.run(sys.modules[__name__], sglang_version, PROBE, request)


def to_contract(r: SGLangReply, target: Target) -> ServingContract:
    """Build the contract from a probe reply (an engine refusal becomes an error finding)."""
    findings = list(r.findings)
    provenance = Provenance(
        package="sglang", version=r.shown_release,
        code_path="; ".join(r.code_paths.values()) or "n/a",
        python=display_python(r.python),
        details={**{k: str(getattr(r, k)) for k in ("model_class", "capture_ids", "algorithm")
                    if k in r.model_fields_set},
                 **(r.dflash_draft.details() if r.dflash_draft else {})},
        family=r.family, release_note=r.release_note,
        reply_cache=r.reply_cache)
    draft = r.draft or DraftFacts()
    if r.error is not None:
        findings.append(Finding(kind=FindingKind.draft_unloadable if r.draft_unloadable else FindingKind.engine_error,
                                message=r.error, severity="error"))
        slots = [None] * max(1, r.expected_slots or 3)
    else:
        slots = [Tap.parse(s.tap) if s.tap else None for s in r.slots]
    ids = r.requested_ids
    return ServingContract(
        target_model=target.model, fc_input=tuple(slots) or (None,),
        graph=draft.graph,
        vocab=sources.vocab(draft.vocab, draft.sizes),
        embedding=draft.embedding, provenance=provenance,
        draft=draft.built,
        findings=tuple(findings), engine="sglang", draft_kind=r.draft_kind,
        requested_ids=tuple(ids) if isinstance(ids, list) and all(isinstance(i, int) for i in ids) else None,
        ids_source=r.ids_source,
        capture_ids=tuple(r.capture_ids) if r.capture_ids is not None else None,
        checkpoint_renames=draft.checkpoint_renames,
        checkpoint_zero_biases=tuple(draft.checkpoint_zero_biases),
        launch=r.launch,
    )


def extract_serving(target: Target, draft: Draft, sglang_version: str | None = None, *,
                    serve_args: tuple[str, ...] | None = None) -> ServingContract:
    """The serving contract for this target and draft under the installed (or named) SGLang."""
    return probe_serving(target, draft, sglang_version, serve_args=serve_args)[0]


def _models_dir(sglang_version: str | None) -> Path | None:
    """The installed SGLang's model-code folder (sglang/srt/models), found without importing it."""
    import importlib.util

    if sglang_version is None:
        spec = importlib.util.find_spec("sglang")
        roots = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    else:
        roots = sorted(find_env("sglang", sglang_version).path.glob("lib/python*/site-packages/sglang"))
    return next((r / "srt" / "models" for r in roots if (r / "srt" / "models").is_dir()), None)


_CLASSES: dict[Path, frozenset[str]] = {}


def engine_model_classes(sglang_version: str | None = None) -> frozenset[str] | None:
    """Every class the installed SGLang's model code defines (read from its source, in about
    half a second); None when the folder cannot be found (then the probe decides)."""
    import re

    folder = _models_dir(sglang_version)
    if folder is None:
        return None
    if folder not in _CLASSES:
        names: set[str] = set()
        for f in folder.rglob("*.py"):
            names.update(re.findall(r"^class (\w+)\(", f.read_text(errors="ignore"), re.M))
        _CLASSES[folder] = frozenset(names)
    return _CLASSES[folder]


def preflight(target: Target, sglang_version: str | None = None) -> None:
    """Refuse, before any extraction starts, a target architecture the installed SGLang has no
    model class for (the probe would only find that out after seconds of imports)."""
    try:
        classes = engine_model_classes(sglang_version)
    except EnvError:
        return  # the missing environment is reported, with its remedy, by the extraction itself
    if classes is not None and target.model.architecture not in classes:
        raise InputError(f"target config {target.path}: architecture {target.model.architecture} is not "
                         f"supported: the installed sglang defines no model class of that name")


def probe_serving(target: Target, draft: Draft, sglang_version: str | None = None,
                  candidates: list[list[int]] | None = None, *,
                  serve_args: tuple[str, ...] | None = None) -> tuple[ServingContract, list[dict]]:
    """The serving contract, plus what the engine would capture for each candidate id list
    (each {"ids", "fc_input": [names or None], "error"}), from one engine process; with
    `serve_args`, the launch contract: those arguments as the release parses and resolves them."""
    preflight(target, sglang_version)
    launch = {} if serve_args is None else {"serve_args": list(serve_args)}
    r = serving_reply(target, draft, sglang_version, serve_args, candidates=candidates or [], **launch)
    return to_contract(r, target), list(r.candidates)


def serving_reply(target: Target, draft: Draft, sglang_version: str | None, argv: tuple[str, ...] | None,
                  **request) -> SGLangReply:
    """The serving probe's reply to `request`; what stopped it raised: parity's limit or failure,
    the release refusing the serve arguments `argv` (LaunchRefused, its words), or the target it
    cannot build."""
    try:
        reply = run_probe(target.config, draft.path.resolve(), sglang_version,
                          names={"draft": draft.name, "target": target.name}, **request)
    except EnvError as exc:
        raise ServingExtractionError(str(exc)) from exc
    unsupported = stop_from_reply(reply, "sglang")
    if unsupported is not None:  # parity's own failure, no family to run it, or its CPU run cannot: one loud line
        raise unsupported
    r = SGLangReply.read(reply)
    if r.launch_refused:  # the engine's own words: bad input, one line
        raise LaunchRefused(f"--serve-args: sglang {r.shown_release}'s {r.launch_refused}", argv=argv)
    if r.error is not None and (r.release is None or r.unsupported):
        raise ServingExtractionError(f"target config {target.path}: {r.error}" if r.unsupported else r.error)
    return r


def refuse_launch(target: Target, draft: Draft, sglang_version: str | None = None, *,
                  serve_args: tuple[str, ...]) -> None:
    """Refuse (LaunchRefused) serve arguments the release's own parser or resolution refuses,
    before any model is built: the probe stops after the launch contract."""
    preflight(target, sglang_version)
    serving_reply(target, draft, sglang_version, serve_args, serve_args=list(serve_args), launch_only=True)


__all__ = ["FLAG", "FORWARD_LONG_POSITIONS", "FORWARD_MODULE", "IDS_KEYS", "NAME", "OPTIONS", "RELEASE_NOUN",
           "SEED_LAUNCH", "SWEEP_FROM", "ServingExtractionError", "add_options", "extract_serving", "forward_refusal", "preflight",
           "release_from",
           "probe_serving", "python", "refuse_launch", "run_probe", "served_config", "to_contract", "write_ids"]
