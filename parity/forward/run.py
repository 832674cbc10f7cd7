"""Run both paths for a set of cases and compare them: `forward_parity(...)`.

The training side (speculators) and the serving side (the engine's forward module, run
by the interpreter that has the requested engine release) each run in one fresh process
for all cases (an engine's runtime is process-global; each process gets its own gloo
port), the two concurrently. They exchange JSON on stdin/stdout and stage tensors
through a safetensors file each; the comparison runs here.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from ..contract.reply import ForwardReply, ForwardVariant, ProbeReply
from ..envs import EnvError, run_module
from ..extract.trainers import trainer
from ..extract.engines import BoundEngine, engine
from ..workspace import kill_children
from ..extract.shrink import shrink_config
from .cases import Case, seeded_tokens
from .compare import ForwardResult, compare
from .positions import PositionPlan, plan, spans
from .tolerances import for_dtype
from ..verdict import Verdict
from ..inputs import text_part

TRAINING = trainer()
TRAINING_MODULE = TRAINING.FORWARD_MODULE


def run_side(module: str, request: dict, python: str | None = None, timeout: float = 600) -> dict:
    """`python -m module` with the request on stdin; its JSON reply (last stdout line)."""
    return run_module(python or sys.executable, module, request, timeout)


def run_both(training_req: dict, serving_req: dict, *, parallel: bool = True,
             python: str | None = None, serving: BoundEngine | None = None) -> tuple[dict, dict, dict[str, float]]:
    """Both sides (concurrently unless parallel=False); their replies and wall times. The
    serving side runs the engine's forward module under the interpreter of its bound release
    (by default the default engine installed here): `python`, by default this one, where that is
    this interpreter (an engine not installed here, e.g. vLLM, runs in its own environment)."""
    serving = serving or engine()
    own = serving.python()
    serving_python = python if own == sys.executable else own
    results: dict[str, Any] = {}
    walls: dict[str, float] = {}

    def go(key, module, req, interpreter):
        started = time.perf_counter()
        try:
            results[key] = run_side(module, req, interpreter)
        except Exception as exc:  # noqa: BLE001 - re-raised in the caller's thread
            results[key] = exc
        walls[key] = time.perf_counter() - started

    jobs = [("training", TRAINING_MODULE, training_req, python),
            ("serving", serving.FORWARD_MODULE, serving_req, serving_python)]
    if parallel:
        threads = [threading.Thread(target=go, args=job) for job in jobs]
        for t in threads:
            t.start()
        try:
            for t in threads:
                t.join()
        except BaseException:  # Ctrl-C lands here, not in the threads: end their children too
            kill_children()
            raise
    else:
        for job in jobs:
            go(*job)
    for key in ("training", "serving"):
        if isinstance(results[key], Exception):
            raise results[key]
    return results["training"], results["serving"], walls


def _split(tensors: dict[str, torch.Tensor], name: str) -> dict[str, torch.Tensor]:
    prefix = name + "/"
    return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}


def _notes(case: Case, tmeta: ForwardVariant, smeta: ForwardVariant, extra: list[str]) -> list[str]:
    notes = list(case.notes) + list(extra)
    if smeta.unsolved:
        notes.append(f"served with the ids as written: {smeta.unsolved}")
    ti, si = tmeta.input_ids, smeta.input_ids
    if ti is not None and si is not None:
        if si[:len(ti)] == ti:
            notes.append(f"rows aligned: row t = (input_ids[t+1], aux[t]) on both sides; {len(ti)} "
                         f"training rows, serving adds row {len(si) - 1} (the target's next token "
                         f"{smeta.next_token}), not compared")
        else:
            notes.append(f"ROW ALIGNMENT BROKEN: training rows read {ti}, serving {si[:len(ti)]}")
    if tmeta.position_ids and smeta.positions:
        tp, sp = tmeta.position_ids, smeta.positions
        notes.append(f"positions: serving {spans(sp)}, training {spans(tp)} (its shift_batch numbers "
                     "a row one higher; rope sees position differences)")
    if case.plan is not None:
        notes += [f"positions: {n}" for n in case.plan.notes]
    return notes


def results_for(cases: list[Case], treply: ForwardReply, sreply: ForwardReply, ttensors: dict,
                stensors: dict, steps: int, dtype: str) -> list[ForwardResult]:
    """Each case's comparison, from the two sides' typed replies (their records, as the child wrote
    them, go into the result) and the tensors they staged."""
    tol = for_dtype(dtype)
    out = []
    for case in cases:
        tmeta, smeta = treply.record(case.name), sreply.record(case.name)
        common = dict(name=case.name, dtype=dtype, tolerances=tol.__dict__, training=tmeta.as_written(),
                      serving=smeta.as_written())
        errors = [f"{side}: {m.error}" for side, m in (("training", tmeta), ("serving", smeta)) if m.error]
        if errors:
            out.append(ForwardResult(verdict=Verdict.error, error="; ".join(errors), notes=list(case.notes),
                                     **common))
            continue
        if smeta.unservable:  # the engine cannot load the served draft: nothing to compare
            out.append(ForwardResult(verdict=Verdict.unservable, error=f"serving: {smeta.unservable}",
                                     notes=list(case.notes), **common))
            continue
        stages, first = compare(case.name, _split(ttensors, case.name), _split(stensors, case.name),
                                steps, tol, case.plan)
        out.append(ForwardResult(verdict="drift" if first else "parity", first_divergence=first,
                                 stages=stages, notes=_notes(case, tmeta, smeta, treply.notes),
                                 **common))
    return out


def forward_parity(target_config: dict, cases: list[Case], *, steps: int = 3, seq_len: int = 16,
                   seed: int = 0, dtype: str = "float32", device: str = "cpu", parallel: bool = True,
                   bare: bool = False, python: str | None = None,
                   serving: BoundEngine | None = None, long_positions: bool = True) -> dict[str, Any]:
    """Run and compare; returns {"results": [ForwardResult], "training": reply, "serving": reply,
    "wall": {...}}. `long_positions` (default) places the draft's last rows past each position it
    declares (parity.forward.positions); without it the rows run at 0..seq_len-1. `bare` runs the same models and forwards without hooks, outputs or
    comparison (the benchmark's baseline). `serving`: the engine whose forward is compared, bound to
    the installed release it runs under (its environment), as `parity check --sglang` does; by
    default the default engine installed here."""
    for_dtype(dtype)  # unknown dtypes fail before anything runs
    with tempfile.TemporaryDirectory(prefix="parity-forward-") as work:
        return _forward_parity(target_config, cases, Path(work), steps=steps, seq_len=seq_len,
                               seed=seed, dtype=dtype, device=device, parallel=parallel, bare=bare,
                               python=python, serving=serving or engine(),
                               long_positions=long_positions)


def position_plan(case: Case, target_config: dict, seq_len: int, steps: int) -> PositionPlan:
    """The case's draft rows placed past the positions its trained and served configs declare,
    within the target's context (parity.forward.positions)."""
    import json


    spec = json.loads((Path(case.draft_dir) / "config.json").read_text())
    served = json.loads((Path(case.served_dir) / "config.json").read_text())
    context = text_part(target_config).get("max_position_embeddings")
    return plan(seq_len, steps, spec.get("transformer_layer_config") or {}, served,
                context if isinstance(context, int) else None)


def _forward_parity(target_config, cases, work: Path, *, steps, seq_len, seed, dtype, device,
                    parallel, bare, python, serving, long_positions) -> dict[str, Any]:

    for case in cases:
        long = long_positions and serving.FORWARD_LONG_POSITIONS  # an engine says why not, where not
        case.plan = position_plan(case, target_config, seq_len, steps) if long else None
        case.positions = case.plan.positions if case.plan is not None else None
        if long_positions and not long:
            case.notes.append(f"positions: 0..{seq_len - 1} only (rows past the draft's declared positions "
                              f"are fed to SGLang's draft, not yet to {serving.name}'s)")
    vocab = text_part(shrink_config(target_config))["vocab_size"]  # the tiny target both sides build
    tokens = seeded_tokens(vocab, seq_len, seed)
    common = {"target_config": target_config, "tokens": tokens, "steps": steps, "seed": seed,
              "dtype": dtype, "device": device, "bare": bare}
    treq = {**common, "out": str(work / "training.safetensors"),
            "variants": [c.training_request() for c in cases]}
    sreq = {**common, "out": str(work / "serving.safetensors"),
            "variants": [c.serving_request() for c in cases]}
    started = time.perf_counter()
    treply, sreply, walls = run_both(treq, sreq, parallel=parallel, python=python,
                                     serving=serving)
    walls["sides"] = time.perf_counter() - started
    for raw, package in ((treply, TRAINING.name), (sreply, serving.name)):
        fault = ProbeReply.read(raw).fault(package)  # parity's own failure in a side: exit 3
        if fault is not None:
            raise fault
    typed = {"training": TRAINING.FORWARD_REPLY.read(treply), "serving": serving.FORWARD_REPLY.read(sreply)}
    for side, reply in typed.items():
        if reply.error:
            raise EnvError(f"the {side} path could not run: {reply.error}")
    if bare:
        return {"results": [], "training": treply, "serving": sreply, "wall": walls}
    t0 = time.perf_counter()
    ttensors = load_file(treq["out"])
    stensors = load_file(sreq["out"])
    results = results_for(cases, typed["training"], typed["serving"], ttensors, stensors, steps, dtype)
    walls["compare"] = time.perf_counter() - t0
    walls["total"] = time.perf_counter() - started
    return {"results": results, "training": treply, "serving": sreply, "wall": walls}
