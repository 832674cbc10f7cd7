"""Replay a trained draft on its dumps under each wiring: training's, serving's, and every candidate.

    replay(draft, data, verifier=..., dump_layout=[...]) -> ReplayResult

1. inputs: the speculators draft (config + weights), the verifier (the target checkpoint:
   its norm and lm_head give the loss target), the dumps (speculators' format); each is
   checked before anything runs, and a dump whose width cannot fit the draft is refused;
2. the training contract from the installed speculators (which slots its data path feeds);
3. the serving contract from the installed SGLang, for the served form of the draft;
4. the probe (`parity.replay.probe`, in the speculators environment) scores every wiring
   with speculators' own data path, model and metrics;
5. ranking and verdict.
"""

from __future__ import annotations

import json
import tempfile
import time
from math import perm
from pathlib import Path

from ..contract import FindingKind
from ..contract.reply import ProbeReply
from ..contract.tap import Tap
from ..envs import find_env, run_module
from ..extract.engines import BoundEngine, engine as default_engine
from ..extract.trainers import trainer
from ..extract import numbering
from ..inputs import Draft, InputError, Target, check_steps, read_config, safetensors_shapes
from .reply import ReplayReply
from .result import AMBIGUOUS_POINTS, ReplayResult, ReplayVerdict, WiringScore
from .wiring import missing_taps, reorderings, search_space, slots_of

PROBE = "parity.replay.probe"


# -- 1. inputs ------------------------------------------------------------------------------


def read_speculators_draft(draft: Path) -> dict:
    spec = read_config(draft / "config.json", "draft config") if draft.is_dir() else None
    if spec is None:
        raise InputError(f"draft {draft}: not a directory")
    if not trainer().is_trained_draft(spec):
        raise InputError(f"draft {draft}: not a speculators draft (its config.json has no "
                         "speculators_model_type/transformer_layer_config); replay runs the draft as "
                         "trained, and takes the served SGLang config as --served")
    if not (draft / "model.safetensors").exists():
        raise InputError(f"draft {draft}: no model.safetensors (replay runs the trained weights)")
    return spec


def fc_slots_of_weights(draft: Path, hidden: int) -> int:
    """k, the states the draft's fc reads: its in-features / H, from the checkpoint header."""
    shapes = safetensors_shapes(draft / "model.safetensors", "draft weights")
    if "fc.weight" not in shapes:
        raise InputError(f"draft {draft}: model.safetensors has no fc.weight (not an EAGLE-3 draft)")
    out_features, in_features = shapes["fc.weight"]
    if in_features % hidden:
        raise InputError(f"draft {draft}: fc.weight takes {in_features} features, not a multiple of the "
                         f"target hidden size {hidden}")
    return in_features // hidden


def resolve_verifier(draft: Path, spec: dict, verifier: Path | None) -> Path:
    """--verifier, else the draft config's verifier path (as written, or next to the draft)."""
    if verifier is None:
        named = ((spec.get("speculators_config") or {}).get("verifier") or {}).get("name_or_path")
        candidates = [Path(named), draft.parent / named] if named else []
        verifier = next((c for c in candidates if (c / "config.json").exists()), None)
        if verifier is None:
            raise InputError(f"draft {draft}: its verifier {named!r} is not a local checkpoint; pass "
                             "--verifier DIR (the target: its norm and lm_head give the loss target)")
    verifier = Path(verifier)
    read_config(verifier / "config.json", "verifier config")
    if not list(verifier.glob("*.safetensors")):
        raise InputError(f"verifier {verifier}: no *.safetensors (replay needs the target's norm, lm_head "
                         "and embedding weights)")
    return verifier


def dump_shape(data: Path) -> tuple[int, int, int]:
    """(samples, L, H) of a speculators dump directory, read from file headers only."""
    if not data.is_dir():
        raise InputError(f"data {data}: not a directory")
    if not (data / "state.json").exists():
        raise InputError(f"data {data}: no state.json: not an arrow dataset written by speculators' data "
                         "generation (save_to_disk)")
    files = sorted((data / "hidden_states").glob("hs_*.safetensors"))
    if not files:
        raise InputError(f"data {data}: no hidden_states/hs_*.safetensors: the hidden-state dumps are "
                         "missing (generate them, or point --data at the directory that holds them)")
    widths = set()
    for file in files:  # headers only: a truncated or foreign dump is refused before anything runs
        shapes = safetensors_shapes(file, "dump")
        shape = shapes.get("hidden_states")
        if shape is None:
            raise InputError(f"dump {file}: no 'hidden_states' tensor (has {sorted(shapes)})")
        if len(shape) != 3:
            raise InputError(f"dump {file}: hidden_states has shape {shape}, expected [T, L, H]")
        widths.add(tuple(shape[1:]))
        if len(widths) > 1:
            raise InputError(f"dump {file}: hidden_states is [T, {shape[1]}, {shape[2]}], other dumps in "
                             f"{data} are [T, {widths.pop()[0]}, ...]: not one dataset")
    num_slots, hidden = widths.pop()
    return len(files), num_slots, hidden


# -- 3. the served form ---------------------------------------------------------------------


def as_written_served(spec: dict, work: Path, engine: BoundEngine) -> tuple[Path, str]:
    """The draft's own ids in SGLang's format: what serving it as written gives."""
    ids = spec.get("eagle_aux_hidden_state_layer_ids")
    out = work / "served-as-written"
    out.mkdir(parents=True)
    (out / "config.json").write_text(json.dumps(engine.served_config(spec, list(ids or [])), indent=1))
    if ids is None:
        return out, "the draft served as written: its config names no ids, so SGLang's default layers"
    return out, f"the draft served as written: its ids {list(ids)} in SGLang's eagle_config"


# -- 4. the probe ---------------------------------------------------------------------------


def probe(speculators_version: str | None, request: dict) -> ReplayReply:
    import sys

    python = sys.executable if speculators_version is None else find_env("speculators", speculators_version).python
    # its reply depends only on the installed code and the request (the draft, verifier and dump
    # folders, named by their contents in the key; the seeded steps): the reply cache keeps it
    raw = run_module(python, PROBE, request, cache=True)
    fault = ProbeReply.read(raw).fault("speculators")  # parity's own failure in the probe: exit 3
    if fault is not None:
        raise fault
    reply = ReplayReply.read(raw)
    if reply.error is not None:
        raise InputError(f"speculators could not replay this draft on these dumps: {reply.error}")
    return reply


# -- the whole replay -----------------------------------------------------------------------


def replay(draft: Path, data: Path, *, verifier: Path | None = None, target_config: Path | None = None,
           dump_layout: list[Tap] | None = None, datagen_ids: list[int] | None = None,
           datagen_convention: str | None = None, serving: bool = True, served: Path | None = None,
           engine: BoundEngine | None = None, speculators_version: str | None = None,
           wirings: list[list[Tap]] = (), search: bool = True, steps: int = 3,
           samples: int | None = None) -> ReplayResult:
    """Score `draft` on the dumps in `data` under the training contract's wiring, the served
    form's (`served`, else the draft's own ids as SGLang reads them; `serving=False` skips it),
    each of `wirings`, and (`search`) every ordered choice of dump slots. `engine`: the serving
    engine bound to its release (default: the default engine, installed)."""
    started = time.perf_counter()
    wall: dict[str, float] = {}
    draft, data = Path(draft), Path(data)
    check_steps(steps)
    if samples is not None and samples < 1:
        raise InputError(f"--samples {samples}: must be at least 1")
    spec = read_speculators_draft(draft)
    verifier = resolve_verifier(draft, spec, verifier)
    target = Target.read(Path(target_config) if target_config else verifier / "config.json")
    n_files, num_slots, hidden = dump_shape(data)
    if target.model.hidden_size is not None and hidden != target.model.hidden_size:
        raise InputError(f"dump width: hs files hold states of width {hidden}, the target's hidden_size "
                         f"is {target.model.hidden_size}")
    k = fc_slots_of_weights(draft, hidden)
    if dump_layout is not None and len(dump_layout) != num_slots:
        raise InputError(f"dump width: the dumps hold {num_slots} states per token, the dump layout names "
                         f"{len(dump_layout)} ([{', '.join(t.name for t in dump_layout)}])")

    # 2. the training contract: which of the L slots speculators' data path feeds the fc
    t0 = time.perf_counter()
    training = trainer("speculators", speculators_version).training_contract(
        target, dump_layout, datagen_ids=datagen_ids,
        datagen_convention=numbering.convention(datagen_convention) if datagen_convention is not None else None,
        draft=Draft(path=draft, config=spec))
    wall["training_contract_s"] = time.perf_counter() - t0
    layout = list(training.dump_layout)
    if len(layout) != num_slots:
        raise InputError(f"dump width: the dumps hold {num_slots} states per token, the dump layout names "
                         f"{len(layout)} ([{', '.join(t.name for t in layout)}])")
    if len(training.fc_slots) != k:
        raise InputError(f"dump width: speculators' data path feeds the fc {len(training.fc_slots)} of the "
                         f"{num_slots} dumped states, but the draft's fc takes {k} (fc.weight in "
                         f"{draft / 'model.safetensors'}): these dumps were not made for this draft")
    trained_slots = tuple(training.fc_slots)
    notes: list[str] = [f"training: {f.message}" for f in training.findings
                        if f.kind in (FindingKind.target_not_final_layer, FindingKind.draft_ids_disagree)]
    if training.dump_layout_source != "manifest":
        notes.append(f"the dump layout [{', '.join(t.name for t in layout)}] was inferred from the "
                     f"{training.dump_layout_source.replace('_', ' ')}; every wiring is named through it, so "
                     "pass --dump-layout if the dumps hold other states")

    asked: list[tuple[int, ...]] = []
    for taps in wirings:
        slots = slots_of(list(taps), layout)
        if slots is None:
            raise InputError(f"--wiring {','.join(t.name for t in taps)}: the dump holds only "
                             f"[{', '.join(t.name for t in layout)}]")
        if len(slots) != k:
            raise InputError(f"--wiring {','.join(t.name for t in taps)}: the draft's fc takes {k} states")
        asked.append(slots)

    # 3. the serving contract for the served form
    served_taps = served_form = unscored = sglang = None
    served_slots = None
    if serving:
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="parity-replay-") as work:
            if served is None:
                served_dir, served_form = as_written_served(spec, Path(work), engine or default_engine())
            else:
                served_dir, served_form = Path(served), f"the served config {served}"
            contract = (engine or default_engine()).extract_serving(target, Draft.read(served_dir))
        wall["serving_contract_s"] = time.perf_counter() - t0
        sglang = contract.provenance.version
        served_taps = tuple(t.name if t is not None else None for t in contract.fc_input)
        served_slots = slots_of(list(contract.fc_input), layout)
        uncaptured = [i for i, t in enumerate(contract.fc_input) if t is None]
        if uncaptured:
            unscored = f"the engine captures no state for fc slot(s) {uncaptured}"
        elif served_slots is None:
            unscored = (f"it needs {', '.join(missing_taps(list(contract.fc_input), layout))}, which the dump "
                        f"[{', '.join(t.name for t in layout)}] does not hold")
        elif len(served_slots) != k:
            unscored = f"it feeds {len(served_slots)} states to an fc that takes {k}"
            served_slots = None
        for f in contract.findings:
            if f.severity == "error" or f.kind == FindingKind.default_layers_fallback:
                notes.append(f"serving: {f.message}")

    # 4. score: the named wirings, then the search
    named = list(dict.fromkeys([trained_slots] + ([served_slots] if served_slots else []) + asked))
    space = search_space(num_slots, k) if search else []
    mode = "none" if not search else "exhaustive" if len(space) == perm(num_slots, k) else "subsets+reorder"
    request = {"draft_dir": str(draft.resolve()), "verifier_dir": str(verifier.resolve()),
               "data_dir": str(data.resolve()), "steps": steps, "samples": samples}
    order = list(dict.fromkeys(named + space))
    t0 = time.perf_counter()
    reply = probe(speculators_version, {**request, "wirings": [list(w) for w in order]})
    raw = {tuple(s.slots): s for s in reply.scores}
    if mode == "subsets+reorder":
        top = sorted(space, key=lambda w: -raw[w].full_acc[0])
        more = [w for w in reorderings(top) if w not in raw]
        if more:
            extra = probe(speculators_version, {**request, "wirings": [list(w) for w in more]})
            raw.update({tuple(s.slots): s for s in extra.scores})
    wall["replay_s"] = time.perf_counter() - t0

    def roles(w):
        out = ["training"] if w == trained_slots else []
        out += ["served"] if w == served_slots else []
        out += ["asked"] if w in asked else []
        return tuple(out or ["search"])

    scores = sorted((WiringScore(taps=tuple(layout[s].name for s in w), slots=w, roles=roles(w),
                                 full_acc=tuple(r.full_acc), cond_acc=tuple(r.cond_acc),
                                 positions=r.positions[0]) for w, r in raw.items()),
                    key=lambda s: (-s.full_acc[0], -s.accept_length, s.slots))
    trained = next(s for s in scores if s.slots == trained_slots)
    best = scores[0]
    suspect = best.slots != trained_slots and (best.step0 - trained.step0) * 100 > AMBIGUOUS_POINTS
    if suspect:
        verdict = ReplayVerdict.suspect
    elif serving and (served_slots != trained_slots):
        verdict = ReplayVerdict.drift
    else:
        verdict = ReplayVerdict.parity
    if reply.samples < n_files and samples is None:
        notes.append(f"speculators' dataset lists {reply.samples} samples; {n_files} hs files are present")
    wall["total_s"] = time.perf_counter() - started
    return ReplayResult(
        verdict=verdict, draft=str(draft), data=str(data), dump_layout=tuple(t.name for t in layout),
        samples=reply.samples, steps=steps, scores=tuple(scores),
        training=tuple(layout[s].name for s in trained_slots), target=training.target.name, served=served_taps, served_form=served_form,
        served_unscored=unscored, search=mode, speculators_version=reply.shown_release,
        sglang_version=sglang, notes=tuple(notes), wall_s={k_: round(v, 2) for k_, v in wall.items()})
