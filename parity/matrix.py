"""The version matrix: one draft's contract under every installed release of both sides.

`build_matrix` runs the training extraction under each installed speculators release and
the gate (serving extraction, diff, engine-verified fix) under each installed SGLang
release, each in a subprocess of that release's environment (envs.toml), several at a
time. Nothing is looked up in a table: every cell is computed by the release's own code.

Rows are releases in version order; a serving cell holds the fc states the release feeds,
its verdict against each training contract and the fix the gate finds on that release.
Cells that changed between adjacent releases carry what changed. A release that cannot
be run (no environment, no adapter, a code path that moved) is a loud "cannot extract
under X: <what was looked for>" cell, never a pass.

`can_i_deploy` answers for one (sglang, speculators) pair from the same computation.
"""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .contract import TrainingContract, diff
from .envs import EnvError, environments
from .home import setup_command
from .workspace import kill_children

CANNOT = "cannot extract under"

# One training extraction per release at a time in this process: concurrent matrices (a test
# file, a bench) then reuse the first one's probe reply (parity.extract.trainers.speculators caches it)
# instead of running the same probe side by side.
_TRAINING_LOCKS: dict[str, threading.Lock] = {}
_TRAINING_LOCKS_GUARD = threading.Lock()


def _training_lock(version: str) -> threading.Lock:
    with _TRAINING_LOCKS_GUARD:
        return _TRAINING_LOCKS.setdefault(version, threading.Lock())


# -- releases ---------------------------------------------------------------------------------

def version_key(version: str):
    try:
        from packaging.version import Version

        return (0, Version(version))
    except Exception:  # an unparsable version sorts last, as text
        return (1, version)


@dataclass(frozen=True)
class Release:
    package: str
    version: str
    env: str | None  # the envs.toml section
    problem: str | None = None  # why it cannot be run (not built, not declared)


def releases(package: str, wanted: list[str] | None = None) -> list[Release]:
    """The releases of `package` that envs.toml pins (or the `wanted` ones), oldest first."""
    found: dict[str, Release] = {}
    for env in environments():
        v = env.packages.get(package)
        if v is None or v in found:
            continue
        problem = None if env.built else (f"its environment {env.name!r} ({env.path}) is not built: "
                                          f"run `{setup_command(env.name)}`")
        found[v] = Release(package, v, env.name, problem)
    if wanted:
        out = []
        for v in wanted:
            out.append(found.get(v) or Release(package, v, None, (
                f"no environment pins {package}=={v} (envs.toml has {sorted(found, key=version_key)}); "
                "add a section for it to envs.toml")))
        return sorted(out, key=lambda r: version_key(r.version))
    return sorted(found.values(), key=lambda r: version_key(r.version))


# -- cells ------------------------------------------------------------------------------------

@dataclass
class TrainingRow:
    version: str
    fc_input: list[str] | None = None
    target: str | None = None
    code_path: str | None = None
    error: str | None = None
    lock_drift: list[str] = field(default_factory=list)  # --contract: how it differs from the lock
    changed: list[str] = field(default_factory=list)  # vs the previous (older) release
    contract: TrainingContract | None = field(default=None, repr=False)

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("contract")
        return d


@dataclass
class Verdict:
    """One serving release against one training contract (a speculators release, or the lock)."""

    against: str  # "speculators 0.9.0" or "lock"
    verdict: str  # parity | drift | unservable | error
    differences: list[str] = field(default_factory=list)
    fix: list[int] | None = None
    fix_verified: bool = False
    unfixable: str | None = None


@dataclass
class ServingRow:
    version: str
    fc_input: list[str | None] | None = None
    requested_ids: list[int] | None = None
    ids_source: str | None = None
    capture_ids: list[int] | None = None
    engine_errors: list[str] = field(default_factory=list)
    error: str | None = None  # "cannot extract under sglang X: ..."
    verdicts: list[Verdict] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    code_path: str | None = None

    @property
    def fix_text(self) -> str:
        return fix_text(self)

    def to_json(self) -> dict:
        d = asdict(self)
        d["fix"] = fix_text(self, long=True)
        return d


@dataclass
class Matrix:
    target: str
    num_layers: int
    draft: str
    dump_layout: list[str]
    contract: str | None
    training: list[TrainingRow]
    serving: list[ServingRow]
    wall_s: float = 0.0
    timings: list[dict] = field(default_factory=list)  # each extraction task: what, start_s, seconds

    @property
    def ok(self) -> bool:
        return (all(r.error is None and not r.lock_drift for r in self.training)
                and all(r.error is None and r.verdicts and all(v.verdict == "parity" for v in r.verdicts)
                        for r in self.serving))

    def cell(self, sglang: str, speculators: str | None = None) -> tuple[ServingRow, Verdict | None]:
        row = next(r for r in self.serving if r.version == sglang)
        if speculators is None or self.contract:
            return row, (row.verdicts[0] if row.verdicts else None)
        return row, next((v for v in row.verdicts if v.against == f"speculators {speculators}"), None)

    def to_json_dict(self) -> dict[str, Any]:
        return {"target": self.target, "num_hidden_layers": self.num_layers, "draft": self.draft,
                "dump_layout": self.dump_layout, "contract": self.contract, "ok": self.ok,
                "wall_s": round(self.wall_s, 1), "timings": self.timings,
                "training": [r.to_json() for r in self.training],
                "serving": [r.to_json() for r in self.serving]}


def fix_text(row: ServingRow, long: bool = False) -> str:
    """The fix the gate found on this release, per training contract (one text when all agree)."""
    if row.error:
        return "-"
    texts = []
    for v in row.verdicts:
        if v.verdict == "parity":
            t = "none needed"
        elif v.fix is not None:
            t = f"write {v.fix}" + ("" if v.fix_verified else " (unverified)")
        elif v.verdict == "error":
            t = "-"
        else:
            t = f"none: {v.unfixable or 'no fix found'}" if long else "none on this release"
        texts.append(t)
    uniq = list(dict.fromkeys(texts))
    return uniq[0] if len(uniq) == 1 else "; ".join(f"{v.against}: {t}" for v, t in zip(row.verdicts, texts))


# -- computing it ------------------------------------------------------------------------------

# Extraction subprocesses running at once in this process, across concurrent matrices: more
# than the CPUs only makes each slower (and multiplies memory).
_SLOTS = threading.BoundedSemaphore(max(1, os.cpu_count() or 1))


@contextmanager
def _no_slot():
    yield


def _training_key(c: TrainingContract) -> str:
    """Training contracts that the gate would judge identically share one serving check."""
    d = json.loads(c.to_json())
    for k in ("provenance", "findings"):
        d.pop(k, None)
    d["errors"] = sorted(f.message for f in c.findings if f.severity == "error")
    return json.dumps(d, sort_keys=True)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _serving_error(release: Release, result=None, exc: BaseException | None = None) -> str | None:
    if release.problem:
        return f"{CANNOT} sglang {release.version}: {release.problem}"
    if exc is not None:
        msg = _first_line(exc)
        return msg if msg.startswith(CANNOT) else f"{CANNOT} sglang {release.version}: {msg}"
    for f in result.serving.findings:
        if f.message.startswith(CANNOT):
            return f.message
    found = result.serving.provenance.version
    if found != release.version:
        return (f"{CANNOT} sglang {release.version}: its environment ran sglang {found} "
                f"(looked for {release.version})")
    return None


def _verdict(result, training: TrainingContract, against: str) -> Verdict:
    """The gate's decision for `training` from a check run against an equivalent contract."""
    from .gate import decide

    verdict, _, diffs, unservable = decide(training, result.serving)
    s = result.suggestion
    bad = verdict != "parity"
    return Verdict(against=against, verdict=verdict,
                   differences=[unservable] if unservable else [x.message for x in diffs],
                   fix=list(s.eagle_aux_hidden_state_layer_ids) if s and bad else None,
                   fix_verified=bool(s and s.verified),
                   unfixable=(unservable or result.unfixable) if bad else None)


def build_matrix(target_config: Path | str | None = None, draft: Path | str | None = None,
                 dump_layout: list[str] | None = None, *,
                 contract: Path | str | None = None, sglang: list[str] | None = None,
                 speculators: list[str] | None = None, workers: int | None = None,
                 verify: bool = True, serving_probe: str | None = None,
                 training_probe: str | None = None) -> Matrix:
    """Extract both sides under every (or each named) installed release; see the module doc.

    `contract`: a lock file; its inputs replace the first three and serving is judged against
    the locked training contract (each speculators release must still reproduce it)."""
    import time

    from .lock import extract_for_lock, read_lock, target_model

    t0 = time.monotonic()
    locked = None
    if contract is not None:
        lock = read_lock(Path(contract))
        base = Path(contract).parent.resolve()
        target_config, draft = lock.resolve(base, lock.target_config), lock.resolve(base, lock.draft)
        dump_layout, locked = list(lock.dump_layout), lock.training
    if target_config is None or draft is None:
        from .inputs import InputError
        raise InputError("the matrix needs the target config and the draft (--target-config/--draft) "
                         "or a locked contract (--contract)")
    target_config, draft = Path(target_config), Path(draft)
    if not dump_layout:
        from .inputs import InputError
        raise InputError("the matrix needs the dump layout (--dump-layout) or a locked contract (--contract)")
    from .inputs import check_inputs
    check_inputs(target_config, draft)
    model = target_model(target_config)
    srels, trels = releases("sglang", sglang), releases("speculators", speculators)
    if not srels or not trels:
        from .inputs import InputError
        raise InputError(f"envs.toml declares no {'sglang' if not srels else 'speculators'} release")

    workers = workers or max(1, min(os.cpu_count() or 1, 4))
    lock_ = threading.Lock()
    training_rows = {r.version: TrainingRow(r.version) for r in trels}
    serving_rows = {r.version: ServingRow(r.version) for r in srels}
    checks: dict[tuple[str, str], Future] = {}  # (sglang version, training key) -> check result
    groups: dict[str, TrainingContract] = {}
    timings: list[dict] = []

    def timed(what: str, fn, *a, slot: bool = True):
        with (_SLOTS if slot else _no_slot()):
            start = time.monotonic()
            try:
                return fn(*a)
            finally:
                timings.append({"what": what, "start_s": round(start - t0, 2),
                                "seconds": round(time.monotonic() - start, 2)})

    def run_check(release: Release, training: TrainingContract):
        if release.problem:
            return None, None
        from .gate import check
        from .errors import USER_ERRORS
        try:
            return check(training, target_config, draft, sglang_version=release.version, verify=verify,
                         serving_probe=serving_probe), None
        except (*USER_ERRORS, EnvError) as exc:
            return None, exc

    def submit_checks(pool: ThreadPoolExecutor, training: TrainingContract) -> None:
        key = _training_key(training)
        with lock_:
            if key in groups:
                return
            groups[key] = training
            for r in srels:
                checks[(r.version, key)] = pool.submit(timed, f"serving check under sglang {r.version}",
                                                       run_check, r, training)

    def run_training(pool: ThreadPoolExecutor, release: Release) -> None:
        row = training_rows[release.version]
        if release.problem:
            row.error = f"{CANNOT} speculators {release.version}: {release.problem}"
            return
        from .errors import USER_ERRORS
        try:
            kw = {"probe_module": training_probe} if training_probe else {}
            with _training_lock(release.version), _SLOTS:  # the lock first: a waiter holds no CPU slot
                c = extract_for_lock(target_config, draft, dump_layout, speculators_version=release.version,
                                     **kw)
        except (*USER_ERRORS, EnvError) as exc:
            msg = _first_line(exc)
            row.error = msg if msg.startswith(CANNOT) else f"{CANNOT} speculators {release.version}: {msg}"
            return
        row.contract, row.fc_input = c, [t.name for t in c.fc_input]
        row.target, row.code_path = c.target.name, c.provenance.code_path
        if locked is not None:
            moved = diff(locked, c)
            row.lock_drift = [f"slot {s.slot}: lock {s.expected.name if s.expected else '-'}, now "
                              f"{s.actual.name if s.actual else '-'} ({s.why})" for s in moved.mismatched_slots]
            row.lock_drift += [f"{f.field}: lock {f.expected}, now {f.actual}" for f in moved.fields]
        else:
            submit_checks(pool, c)

    with ThreadPoolExecutor(max_workers=workers) as pool:  # one torch thread each: envs.run_module
        try:
            if locked is not None:  # serving does not wait for training
                submit_checks(pool, locked)
            training_futs = [pool.submit(timed, f"training under speculators {r.version}", run_training,
                                         pool, r, slot=False) for r in trels]
            for f in training_futs:
                f.result()
            results = {k: f.result() for k, f in list(checks.items())}
        except BaseException:  # Ctrl-C: start nothing more, end what runs (the pool waits for it)
            pool.shutdown(wait=False, cancel_futures=True)
            kill_children()
            raise

    # -- rows
    for r in srels:
        row = serving_rows[r.version]
        against = ([("lock", locked)] if locked is not None else
                   [(f"speculators {t.version}", training_rows[t.version].contract) for t in trels])
        first = None
        if r.problem:
            row.error = _serving_error(r)
            continue
        for name, training in against:
            if training is None:  # that training release could not be extracted
                row.verdicts.append(Verdict(against=name, verdict="error",
                                            differences=[training_rows[name.split()[-1]].error or "no training contract"]))
                continue
            result, exc = results[(r.version, _training_key(training))]
            err = _serving_error(r, result, exc)
            if err:
                row.error, row.verdicts = err, []
                break
            first = first or result
            row.verdicts.append(_verdict(result, training, name))
        if first is not None and not row.error:
            s = first.serving
            row.fc_input = [t.name if t else None for t in s.fc_input]
            row.requested_ids = list(s.requested_ids) if s.requested_ids is not None else None
            row.ids_source, row.code_path = s.ids_source, s.provenance.code_path
            row.capture_ids = list(s.capture_ids) if s.capture_ids is not None else None
            row.engine_errors = [f.message for f in s.findings
                                 if f.severity == "error" and f.kind in ("engine_error", "not_captured")]
    training_list = [training_rows[r.version] for r in trels]
    serving_list = [serving_rows[r.version] for r in srels]
    _mark_changes(training_list, _training_cells)
    _mark_changes(serving_list, _serving_cells)
    return Matrix(target=model.architecture, num_layers=model.num_hidden_layers, draft=str(draft),
                  dump_layout=list(dump_layout), contract=str(contract) if contract else None,
                  training=training_list, serving=serving_list, wall_s=time.monotonic() - t0,
                  timings=sorted(timings, key=lambda t: t["start_s"]))


# -- what changed between adjacent releases ----------------------------------------------------

def _slot_changes(a: list | None, b: list | None) -> list[str]:
    if a is None or b is None:
        return [] if a == b else [f"fc {a} -> {b}"]
    out = [f"slot {i}: {x or '-'} -> {y or '-'}" for i, (x, y) in enumerate(zip(a, b)) if x != y]
    if len(a) != len(b):
        out.append(f"{len(a)} -> {len(b)} slots")
    return out


def _training_cells(row: TrainingRow) -> dict[str, Any]:
    return {"fc": row.fc_input, "target": row.target, "error": row.error, "lock": row.lock_drift}


def _serving_cells(row: ServingRow) -> dict[str, Any]:
    return {"fc": row.fc_input, "capture": row.capture_ids, "error": row.error,
            "verdict": [v.verdict for v in row.verdicts], "fix": fix_text(row)}


def _mark_changes(rows: list, cells) -> None:
    for prev, row in zip(rows, rows[1:]):
        a, b = cells(prev), cells(row)
        changed = []
        if a["error"] != b["error"]:
            changed.append("now cannot be extracted" if b["error"] else "extractable again")
        if not (a["error"] or b["error"]):
            changed += _slot_changes(a["fc"], b["fc"])
            for k in b:
                if k not in ("fc", "error") and a[k] != b[k]:
                    changed.append(f"{k} {_short(a[k])} -> {_short(b[k])}")
        row.changed = changed


def _short(v: Any) -> str:
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        return "/".join(v)
    return str(v)


# -- rendering ---------------------------------------------------------------------------------

def _fc(fc: list | None) -> str:
    return "-" if fc is None else "[" + ", ".join(x or "<none>" for x in fc) + "]"


def _against_names(m: Matrix) -> list[str]:
    return ["lock"] if m.contract else [f"speculators {r.version}" for r in m.training]


def _verdict_cell(row: ServingRow, against: str) -> str:
    if row.error:
        return "CANNOT EXTRACT"
    v = next((v for v in row.verdicts if v.against == against), None)
    return "?" if v is None else v.verdict.upper()


def render_text(m: Matrix) -> str:
    lines = [f"parity matrix: {m.target} ({m.num_layers} layers), draft {m.draft}, "
             f"dump [{', '.join(m.dump_layout)}]" + (f", lock {m.contract}" if m.contract else ""), ""]
    lines.append(f"  {'training (speculators)':24s} {'fc input':22s} loss target")
    for r in m.training:
        mark = "*" if r.changed else " "
        if r.error:
            lines.append(f"{mark} {r.version:24s} {r.error}")
        else:
            lock = ("  (= lock)" if m.contract and not r.lock_drift else
                    f"  DIFFERS FROM LOCK: {'; '.join(r.lock_drift)}" if r.lock_drift else "")
            lines.append(f"{mark} {r.version:24s} {_fc(r.fc_input):22s} {r.target}{lock}")
        if r.changed:
            lines.append(f"      changed since the previous release: {'; '.join(r.changed)}")
    lines.append("")
    names = _against_names(m)
    heads = "  ".join(f"{('vs ' + n.split()[-1]) if n != 'lock' else 'vs lock':14s}" for n in names)
    lines.append(f"  {'serving (sglang)':16s} {'draft ids':14s} {'fc input':22s} {heads}  fix (ids to write)")
    for r in m.serving:
        mark = "*" if r.changed else " "
        if r.error:
            lines.append(f"{mark} {r.version:16s} {r.error}")
        else:
            ids = str(r.requested_ids) if r.requested_ids is not None else "default"
            cells = "  ".join(f"{_verdict_cell(r, n):14s}" for n in names)
            lines.append(f"{mark} {r.version:16s} {ids:14s} {_fc(r.fc_input):22s} {cells}  {r.fix_text}")
            for e in r.engine_errors:
                lines.append(f"      engine: {e}")
            for why in dict.fromkeys(v.unfixable for v in r.verdicts if v.unfixable):
                lines.append(f"      no fix: {why}")
        if r.changed:
            lines.append(f"      changed since the previous release: {'; '.join(r.changed)}")
    lines += ["", "* = changed since the release above it.  " +
              ("ALL PARITY" if m.ok else "NOT DEPLOYABLE everywhere: see the cells above.")]
    return "\n".join(lines)


def _md(s: str) -> str:
    return s.replace("|", "\\|")


def render_markdown(m: Matrix) -> str:
    names = _against_names(m)
    out = [f"### parity matrix: `{m.draft}` on {m.target} ({m.num_layers} layers)", "",
           f"Dump layout `[{', '.join(m.dump_layout)}]`" + (f", lock `{m.contract}`" if m.contract else "")
           + ". Changed cells (vs the release above) are **bold**.", "",
           "| speculators | fc input | loss target | changed |", "|---|---|---|---|"]
    for r in m.training:
        b = (lambda s: f"**{s}**") if r.changed else (lambda s: s)
        if r.error:
            out.append(f"| {r.version} | {b(_md(r.error))} | | {_md('; '.join(r.changed))} |")
        else:
            extra = f" (differs from lock: {'; '.join(r.lock_drift)})" if r.lock_drift else ""
            out.append(f"| {r.version} | {b(_md(_fc(r.fc_input)))} | {r.target}{_md(extra)} | "
                       f"{_md('; '.join(r.changed))} |")
    out += ["", "| sglang | draft ids | fc input | " + " | ".join(names) + " | fix | changed |",
            "|---" * (len(names) + 5) + "|"]
    for r in m.serving:
        ch = set()
        for c in r.changed:
            ch.add("fc" if c.startswith("slot") or c.startswith("fc") else c.split()[0])
        b = lambda s, k: f"**{s}**" if k in ch or (r.changed and k == "error") else s  # noqa: E731
        if r.error:
            out.append(f"| {r.version} | | {b('❌ ' + _md(r.error), 'error')} |" + " |" * len(names)
                       + f" | {_md('; '.join(r.changed))} |")
            continue
        ids = str(r.requested_ids) if r.requested_ids is not None else "default"
        verdicts = " | ".join(b(("✅ " if _verdict_cell(r, n) == "PARITY" else "❌ ") + _verdict_cell(r, n),
                                "verdict") for n in names)
        out.append(f"| {r.version} | {ids} | {b(_md(_fc(r.fc_input)), 'fc')} | {verdicts} | "
                   f"{b(_md(fix_text(r, long=True)), 'fix')} | {_md('; '.join(r.changed))} |")
    out += ["", "**All cells pass.**" if m.ok else "**Not every release pair is at parity.**"]
    return "\n".join(out)


# -- can-i-deploy -------------------------------------------------------------------------------

@dataclass
class Answer:
    deploy: bool | None  # None: cannot tell (a side could not be extracted)
    sglang: str
    speculators: str
    reason: str
    matrix: Matrix

    def to_json_dict(self) -> dict:
        return {"deploy": self.deploy, "sglang": self.sglang, "speculators": self.speculators,
                "reason": self.reason, "matrix": self.matrix.to_json_dict()}


def can_i_deploy(sglang: str, speculators: str, target_config=None, draft=None, dump_layout=None, *,
                 contract=None, verify: bool = True, serving_probe: str | None = None,
                 training_probe: str | None = None) -> Answer:
    m = build_matrix(target_config, draft, dump_layout, contract=contract, sglang=[sglang],
                     speculators=[speculators], verify=verify, serving_probe=serving_probe,
                     training_probe=training_probe)
    t, row = m.training[0], m.serving[0]
    pair = f"sglang {sglang} with speculators {speculators}"
    if t.error:
        return Answer(None, sglang, speculators, t.error, m)
    if row.error:
        return Answer(None, sglang, speculators, row.error, m)
    if t.lock_drift:
        return Answer(False, sglang, speculators, f"no: speculators {speculators} no longer trains what the "
                      f"lock says ({'; '.join(t.lock_drift)})", m)
    v = row.verdicts[0]
    if v.verdict == "parity":
        return Answer(True, sglang, speculators, f"yes: {pair} feeds the draft's fc exactly "
                      f"{_fc(row.fc_input)}, what it was trained on", m)
    if v.verdict == "unservable":
        return Answer(False, sglang, speculators, f"no: {pair}: sglang {sglang} cannot serve this draft as "
                      f"written: {v.unfixable}", m)
    fix = (f"; fix: write eagle_config.eagle_aux_hidden_state_layer_ids = {v.fix}"
           + (" (verified on this release)" if v.fix_verified else "") if v.fix is not None else
           f"; no fix on this release: {v.unfixable}" if v.unfixable else "")
    trained = _fc(t.fc_input)
    return Answer(False, sglang, speculators, f"no: {pair}: trained on {trained}, served "
                  f"{_fc(row.fc_input)}: {'; '.join(v.differences)}{fix}", m)
