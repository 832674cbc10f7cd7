"""`parity sweep`: every published release of SGLang, vLLM, speculators and SpecForge over the fixed case set.

For each release, oldest first: its environment is built into the sweep's own home, as `--build`
does (from the line the published sweep derived for it, releases.json's `build.line`; a release
no sweep has run, or every one with `derive`, has its line derived from its wheel's metadata and
its imports, about a minute; each row records its line and where it came from), every case is
extracted by running that release's own code (`docs/releases.md` says how), the row is saved,
and the environment is deleted with the release's own wheel in the package cache (the shared
dependencies stay, so the next release costs only what differs). While one release runs its
cases the next two releases' environments are built beside it, and the bytecode their probes
import compiled (compile_ahead_of_cases). The results file is rewritten after every release, so
an interrupted sweep resumes where it stopped; a release already in it is not run again unless
asked (`redo`).

A release that cannot be built or run is a row with the one line saying why, never a gap.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Literal

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

    from ..contract import TrainingContract
    from ..extract import Bound
    from ..extract.engines import BoundEngine
    from ..extract.trainers import BoundTrainer

from ..contract import FindingKind, names
from ..contract.swept import Swept
from ..progress import logger
from .cases import (CAPTURE_CASES, DUMP_CASES, SERVING_CASES, TRAINING_CASES, CaptureCase, DumpCase, ServingCase,
                    TrainingCase)
from .outcome import Outcome, of_error, of_finding
from .. import forkserver
from ..envs import EnvError, compile_ahead, find_env, raw_envs
from ..errors import InternalError, UserError
from ..extract.engines import BoundEngine, engines
from ..extract.installed import distribution
from ..extract.trainers import trainers
from ..home import SHIPPED
from ..inputs import LaunchRefused, Target, read_inputs
from ..ondemand import ensure_release
from ..registry import published

# 2: each cell's `outcome` (parity.sweep.outcome) and each engine release's seed `launch`. A
# format-1 file is read as it is: its cells say nothing of their outcome ("not classified").
FORMAT = 2
READABLE = (1, 2)


# Releases built ahead of the one whose cases run, at once. A release parity has never built has
# its line derived by running imports in its environment (parity.ondemand: 35-65 s, one core),
# while its cases take 10-30 s: one builder left the sweep waiting on builds.
BUILDS_AHEAD = 2


log = logger("sweep")


def first_line(exc: BaseException | str) -> str:
    """One line, with this machine's paths made relative (the published table names no checkout)."""

    text = " ".join(str(exc).split()) or type(exc).__name__
    if os.environ.get("PARITY_HOME"):  # the sweep's home (home_at)
        text = text.replace(os.environ["PARITY_HOME"].rstrip("/") + "/", "$PARITY_HOME/")
    text = text.replace(f"{SHIPPED}/", "").replace(tempfile.gettempdir() + "/", "$TMPDIR/")
    return text if len(text) <= 2000 else text[:2000] + " ..."


@contextmanager
def home_at(path: Path) -> Iterator[None]:
    """Run with PARITY_HOME at `path` (the sweep's environments, locks and cache), restored after."""
    saved = os.environ.get("PARITY_HOME")
    os.environ["PARITY_HOME"] = str(path)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PARITY_HOME", None)
        else:
            os.environ["PARITY_HOME"] = saved


def swept() -> "list[Bound]":
    """The engines and trainers the sweep covers, engines first, each in name order: every one
    that says where its 'all' starts (SWEEP_FROM), each answering for itself."""

    return [s for s in (*engines(), *trainers()) if s.sweep_from is not None]


def side(name: str) -> "Bound":
    """The swept engine or trainer called `name` (a package the sweep builds)."""
    return next(s for s in swept() if s.name == name)


def dist_of(package: str) -> str:
    """The distribution the swept side `package` is published and built as: its DIST
    (`nvidia-modelopt` for the trainer `modelopt`), else its name."""
    return distribution(side(package).impl) or package


Case = ServingCase | DumpCase | TrainingCase | CaptureCase


def cases_of(bound: "Bound") -> list[Case]:
    """Its cases: an engine's serving cases (and dump cases, if its data generation makes training
    data), a trainer's training cases (a dump's layout), or, for a trainer that captures the
    target's states itself (its CAPTURES_STATES), its capture cases (the run's ids)."""

    if isinstance(bound, BoundEngine):
        return [*SERVING_CASES, *(DUMP_CASES if bound.makes_dumps else ())]
    return list(CAPTURE_CASES if bound.captures_states else TRAINING_CASES)


# -- one release ---------------------------------------------------------------------------------

def refused(exc: BaseException) -> dict:
    """The cell of a case an extraction stopped with `exc`: its one line, and its outcome by its type."""
    return {"error": first_line(exc), "outcome": of_error(exc).value}


def serving_cell(case: ServingCase, serving: "BoundEngine", work: Path) -> dict:
    """What the engine `serving` (bound to a release) feeds the fc for `case` (the GPU-default
    runner's, and every runner's where the engine has several that disagree), or the one line
    saying why nothing; its `outcome` (parity.sweep.outcome) either way."""


    draft = case.write_draft(work / case.name.replace(" ", "_").replace("/", "_"))
    try:
        contract, _ = serving.probe_serving(*read_inputs(case.target_config, draft))
    except (UserError, InternalError) as exc:
        return refused(exc)
    fc = names(contract.fc_input)
    # Runners that disagree are a result of the case (a drift for one of them), not a failure.
    errors = [f for f in contract.findings if f.severity == "error" and f.kind != FindingKind.runners_differ]
    out = {"fc": fc, "ids_source": contract.ids_source, "family": contract.provenance.family,
           "note": contract.provenance.release_note, "outcome": Outcome.extracted.value}
    runners = {name: names(fed) for name, fed in contract.runners.items()}
    if len({tuple(v) for v in runners.values()}) > 1:
        out["runners"] = runners
    if contract.requested_ids is not None:
        out["ids"] = list(contract.requested_ids)
    if any(f.kind == FindingKind.default_layers_fallback for f in contract.findings):
        out["default"] = True
    if errors:
        out.update(error=first_line(errors[0].message), outcome=of_finding(errors[0].kind).value)
    return out


def dump_cell(case: DumpCase, datagen: "BoundEngine") -> dict:
    """What the data generation of `datagen` (an engine that makes training data, e.g. vLLM, bound
    to a release) dumps for the launch ids of `case`, or why not."""


    try:
        dump = datagen.extract_dump(Target.read(case.target_config), case.datagen_ids)
    except (UserError, InternalError) as exc:
        return refused(exc)
    return {"layout": [t.name for t in dump.layout], "launch_ids": list(dump.launch_ids), "method": dump.method,
            "outcome": Outcome.extracted.value}


def training_cell(case: TrainingCase, training: "BoundTrainer") -> dict:
    """The training contract the trainer `training` (bound to a release) derives for `case`'s
    dump, or why not."""

    try:
        c = training.training_contract(Target.read(case.target_config), list(case.dump))
    except (UserError, InternalError) as exc:
        return refused(exc)
    return trained_cell(c)


def capture_cell(case: CaptureCase, training: "BoundTrainer") -> dict:
    """The training contract the trainer `training` (bound to a release; one that captures the
    target's states itself) gives for `case`'s target and run ids, no dump and no draft, or why not."""

    ids = list(case.ids) if case.ids is not None else None
    try:
        c = training.training_contract(Target.read(case.target_config), None, datagen_ids=ids)
    except (UserError, InternalError) as exc:
        return refused(exc)
    return trained_cell(c)


def trained_cell(c: "TrainingContract") -> dict:
    """A training contract's cell: the fc states, the loss target, and the first error finding's
    line and outcome, if any."""
    out = {"fc": names(c.fc_input), "target": str(c.target), "family": c.provenance.family,
           "note": c.provenance.release_note, "outcome": Outcome.extracted.value}
    errors = [f for f in c.findings if f.severity == "error"]
    if errors:
        out.update(error=first_line(errors[0].message), outcome=of_finding(errors[0].kind).value)
    return out


def launch_cell(serving: "BoundEngine", work: Path) -> dict | None:
    """The engine's (bound to a release) resolution of its fixed seed launch (its SEED_LAUNCH)
    on the first serving case's target and draft, by its own parser and resolution code (the
    launch contract, docs/launch.md): the fields the seed gives, their effective values and what
    the engine changed, or the one line saying why not, with its outcome (a release whose family
    has no resolver: parity cannot run it, "not resolved"). None: no seed for this engine."""

    seed = serving.seed_launch
    if seed is None:
        return None
    case = SERVING_CASES[0]
    draft = case.write_draft(work / "seed-launch")
    try:
        contract, _ = serving.probe_serving(*read_inputs(case.target_config, draft), serve_args=seed)
    except LaunchRefused as exc:
        kind = Outcome.parity_cannot_run if exc.unresolved else Outcome.engine_refuses
        return {"argv": list(seed), "error": first_line(exc), "outcome": kind.value}
    except (UserError, InternalError) as exc:
        return {"argv": list(seed), **refused(exc)}
    launch = contract.launch
    if launch is None:  # an engine that took the arguments and resolved nothing
        return {"argv": list(seed), "error": f"{serving.name} {serving.release} returned no launch contract",
                "outcome": Outcome.parity_cannot_run.value}
    return {"argv": list(seed), "requested": dict(launch.requested),
            "effective": dict(launch.effective),
            "overrides": [o.model_dump() for o in launch.overrides], "outcome": Outcome.extracted.value}


def env_size(package: str, version: str) -> int | None:
    """Bytes the release's environment adds beyond the shared cache (hard links count once)."""

    try:
        env = find_env(package, version)
    except EnvError:
        return None
    if env.current:  # the environment parity runs in: not one the sweep built
        return None
    path = env.path
    total, seen = 0, set()
    for root, _, files in os.walk(path):
        for f in files:
            st = os.lstat(os.path.join(root, f))
            if st.st_nlink == 1 and st.st_ino not in seen:
                seen.add(st.st_ino)
                total += st.st_blocks * 512
    return total


def build(package: str, version: str, derive: bool = False) -> dict:
    """Build the release's environment into the sweep's home: {"seconds", "extra_bytes", "line",
    "line_from", "compile_seconds"} (the envs.toml line it was built from, and where that came from:
    parity.ondemand.LineSource; the seconds spent compiling its probe's bytecode ahead) or
    {"error", "seconds"}. `derive`: derive its line again even where
    the published sweep has one."""

    started, dist = time.monotonic(), dist_of(package)
    try:
        source = ensure_release(dist, version, derive=derive)
    except UserError as exc:
        return {"error": first_line(exc), "seconds": round(time.monotonic() - started, 1)}
    out = {"seconds": round(time.monotonic() - started, 1), "extra_bytes": env_size(dist, version)}
    line = raw_envs().get("releases", {}).get(dist, {}).get(version)
    if line is not None:  # None: the release parity itself runs (the main environment)
        out.update(line=line, line_from=source.value)
    started = time.monotonic()
    if compile_ahead_of_cases(package, version):
        out["compile_seconds"] = round(time.monotonic() - started, 1)
    return out


def compile_ahead_of_cases(package: str, version: str) -> bool:
    """Compile the bytecode the release's probe imports into its fresh environment, here in the
    builder, on the core the running release's cases leave idle (they run one probe at a time):
    otherwise its first case compiles it, about 25 s per release on the cases' own path
    (parity.envs.compile_ahead). Whether it ran."""

    probe = side(package).probe
    try:
        env = find_env(dist_of(package), version)
    except EnvError:
        return False
    return not env.current and compile_ahead(env.path / "bin" / "python", probe, package)


def drop_env(package: str, version: str, home: Path) -> None:
    """Delete the release's environment if it is one the sweep built: inside the sweep's home,
    never the environment parity runs in nor one of the checkout's."""

    try:
        env = find_env(dist_of(package), version)
    except EnvError:
        return
    path = env.path.resolve()
    if not env.current and path != home.resolve() and path.is_relative_to(home.resolve()):
        shutil.rmtree(path, ignore_errors=True)
        drop_cached_wheel(dist_of(package), version, home)


def drop_cached_wheel(package: str, version: str, home: Path) -> None:
    """The release's own unpacked wheel in the sweep home's package cache (uv's layout: an entry
    `wheels-v*/INDEX/NAME/VERSION-TAGS` linking to its archive). The shared dependencies stay;
    a vLLM wheel alone unpacks to about 1 GB, so 35 releases' would fill the disk."""
    from packaging.utils import canonicalize_name

    cache = (home / ".uv-cache").resolve()
    for entry in cache.glob(f"wheels-v*/*/{canonicalize_name(package)}/{version}-*"):
        if entry.is_symlink():
            archive = entry.resolve()
            if archive.is_relative_to(cache) and archive != cache:
                shutil.rmtree(archive, ignore_errors=True)
        if entry.is_symlink() or entry.is_file():
            entry.unlink()


def run_case(case: Case, bound: "Bound", work: Path) -> dict:
    """One case's cell under the engine or trainer `bound` (bound to the release)."""
    if isinstance(case, ServingCase):
        return serving_cell(case, bound, work)
    if isinstance(case, DumpCase):
        return dump_cell(case, bound)
    if isinstance(case, CaptureCase):
        return capture_cell(case, bound)
    return training_cell(case, bound)


def run_release(package: str, version: str, built: dict) -> dict:
    """The row of `package` `version`: its build, and every case's cell."""

    row: dict = {"version": version, "build": built}
    if "error" in built:
        return row
    started = time.monotonic()
    bound = side(package).at(version)
    with tempfile.TemporaryDirectory(prefix="parity-sweep-") as tmp:
        row["cases"] = {c.name: run_case(c, bound, Path(tmp)) for c in cases_of(bound)}
        if isinstance(bound, BoundEngine) and (seed := launch_cell(bound, Path(tmp))) is not None:
            row["launch"] = seed
    forkserver.forget()  # this release's warmed server goes before its environment does
    cells = list(row["cases"].values())
    row["family"] = next((c["family"] for c in cells if c.get("family")), None)
    row["note"] = next((c["note"] for c in cells if c.get("note")), None)
    row["seconds"] = round(time.monotonic() - started, 1)
    return row


# -- the sweep -----------------------------------------------------------------------------------

def load(path: Path) -> dict:
    if path.is_file():
        data = json.loads(path.read_text())
        if data.get("format") in READABLE:
            return {**data, "format": FORMAT}
    return {"format": FORMAT}


def save(path: Path, data: dict) -> None:
    """Write the results, checked against their model first (parity.contract.swept): a cell or a
    row with a key the model does not know is parity's own error, never a file read without it."""
    Swept.read(data)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def describe_cases() -> dict:
    """Each swept package's cases, described (the tables' order: parity.report.releases)."""
    return {s.name: {c.name: c.describe() for c in cases_of(s)} for s in swept()}


def sweep(results: Path, home: Path, *, wanted: "dict[str, SpecifierSet | Literal['all']]", redo: bool = False,
          keep_envs: bool = False, derive: bool = False, limit: int | None = None,
          on_row: Callable[[dict], None] | None = None) -> dict:
    """Run every release of each package in `wanted` ("all": from the package's first the sweep
    covers, its side's SWEEP_FROM; else the releases in the range) that `results` does not hold yet (all of
    them with `redo`); returns the results, saved after every release. A release the published
    sweep ran is built from the line it derived (releases.json), unless `derive`."""
    from packaging.version import Version


    data = load(results)
    data["cases"] = describe_cases()
    with home_at(home):
        todo: list[tuple[str, str]] = []
        for package, since in ((s.name, s.sweep_from) for s in swept()):
            if package not in wanted:
                continue
            done = {r["version"] for r in data.get(package, {}).get("releases", [])}
            spec = wanted[package]
            every = isinstance(spec, str)  # "all"
            for v in published(dist_of(package), since if every else None):
                if (every or spec.contains(Version(v), prereleases=True)) and (redo or v not in done):
                    todo.append((package, v))
        todo = todo[:limit] if limit is not None else todo
        log(f"{len(todo)} release(s) to run; results in {results}, environments in {home}")
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=BUILDS_AHEAD, thread_name_prefix="sweep-build") as builder:
            pending: dict[int, Future] = {i: builder.submit(build, *todo[i], derive)
                                          for i in range(min(BUILDS_AHEAD, len(todo)))}
            for i, (package, version) in enumerate(todo):
                built = pending.pop(i).result()
                if i + BUILDS_AHEAD < len(todo):
                    pending[i + BUILDS_AHEAD] = builder.submit(build, *todo[i + BUILDS_AHEAD], derive)
                log(f"{package} {version}: " + (f"not built: {built['error']}" if "error" in built else
                                                 f"built in {built['seconds']} s; running its cases"))
                row = run_release(package, version, built)
                if not keep_envs:
                    drop_env(package, version, home)
                section = data.setdefault(package, {"releases": []})
                section["releases"] = sorted([r for r in section["releases"] if r["version"] != version] + [row],
                                             key=lambda r: _key(r["version"]))
                run = {"releases": i + 1, "seconds": round(time.monotonic() - started, 1)}
                data["runs"] = [*data.get("runs", [])[:-1], run] if i else [*data.get("runs", []), run]
                save(results, data)
                if on_row:
                    on_row(row)
    return data


def _key(version: str):
    from packaging.version import Version

    return Version(version)
