"""The environments envs.toml describes, and running parity code inside one of them.

Other releases of speculators and SGLang cannot share an environment with the main one (they
pin other transformers releases), so their extractors run as `python -m parity.<module>` in a
subprocess of that environment's interpreter, with this parity package on PYTHONPATH,
exchanging JSON over stdin/stdout.

Which environments exist: the shipped envs.toml plus the user's `$PARITY_HOME/envs.toml`
(parity.home). The one that installs parity itself (`editable = true`, "main") is the
environment parity is running in; every other one is built into `$PARITY_HOME/NAME`.

`PARITY_PROBE_OVERRIDES` replaces a module `run_module` is asked to run with another one,
"MODULE=REPLACEMENT" entries separated by commas, e.g.

    PARITY_PROBE_OVERRIDES=parity.extract.engines.sglang.probe=tests.drift.serving_no_plus_one

This is how the tests inject drift (a replacement patches the installed engine or trainer,
then runs the real probe) without any public function taking a module parameter; children of
the CLI inherit it, so a whole `parity check` runs with the drift. Replies of extractions are
cached on disk (`parity.reply_cache`; `PARITY_NO_CACHE=1` turns that off).
"""

from __future__ import annotations

import json
import os
import sys
import time
import tomllib
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Iterator

from . import bytecode, forkserver, reads, runlog
from .home import CHECKOUT, PACKAGE, home, setup_command, shipped, user_envs, cache_dir
from .children import run_child
from .workspace import workspace, private_caches
from .errors import TRANSIENT_KEY, UserError, no_addresses, transient
from .reply_cache import NAMES_KEY, SOURCE_KEY, cached_reply, enabled, request_digest

# Template keys about deriving a release's line, not what its environment holds (kept out of
# each release's spec, so out of its hash): a field's default, and whether the deps list every import.
TEMPLATE_ONLY = frozenset({"defaults", "imports_listed"})
STAMP = "parity-env.stamp"  # written by parity.build_env when an environment is complete


class EnvError(UserError, RuntimeError):
    """An environment is missing, not built, or its subprocess failed."""


@dataclass(frozen=True)
class Env:
    name: str
    path: Path
    packages: dict[str, str]  # package -> version: pinned in envs.toml, or installed (current)
    current: bool = False  # the environment this parity runs in (envs.toml's `editable` one)

    @property
    def python(self) -> Path:
        return Path(sys.executable) if self.current else self.path / "bin" / "python"

    @property
    def built(self) -> bool:
        return self.current or ((self.path / STAMP).exists() and self.python.exists())


def _pinned(spec: dict) -> dict[str, str]:
    out = {}
    for req in [*spec.get("no_deps", []), *spec.get("deps", [])]:
        if "==" in req:
            name, version = req.split("==", 1)
            out[name.strip().lower()] = version.strip()
    return out


def _fill(value, fields: dict):
    if isinstance(value, str):
        return value.format(**fields)
    if isinstance(value, list):
        return [_fill(v, fields) for v in value]
    return value


def _merge(shipped_data: dict, user_data: dict) -> dict:
    """The user's envs.toml over the shipped one: its release lines are added to (or replace)
    the shipped lines of their family; its `[env.X]` and `[template.F]` sections replace
    the shipped section of that name whole."""
    out = {k: dict(v) for k, v in shipped_data.items() if isinstance(v, dict)}
    for table, sections in user_data.items():
        if not isinstance(sections, dict):
            raise EnvError(f"{user_envs()}: `{table}` is not a table")
        merged = out.setdefault(table, {})
        for name, body in sections.items():
            if table == "releases" and isinstance(body, dict):
                merged[name] = {**merged.get(name, {}), **body}
            else:
                merged[name] = body
    return out


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise EnvError(f"{path}: not valid TOML: {exc}") from None


def raw_envs(user: bool = True) -> dict:
    """envs.toml as written: the shipped file, plus (`user`) `$PARITY_HOME/envs.toml` over it."""
    data = _read_toml(shipped("envs.toml"))
    if user and user_envs().is_file():
        data = _merge(data, _read_toml(user_envs()))
    return data


def load_specs(text: str | None = None) -> dict[str, dict]:
    """Every environment envs.toml describes, by name: the `[env.NAME]` sections as written,
    plus one per line of `[releases.FAMILY]`, filled into `[template.FAMILY]`
    (`{version}` and the line's own pins; its `extra` list is appended to `deps`); a field
    the template's `defaults` table names may be left out of a line, which then gets that
    default (a line overrides it by naming the field); a
    template's `base` names another environment whose packages it adds its own to.
    `text` replaces both files (tests); otherwise the shipped envs.toml plus the user's
    `$PARITY_HOME/envs.toml` when it exists. Stdlib only: parity.build_env uses it before
    any environment exists."""
    return specs_from(tomllib.loads(text) if text is not None else raw_envs())


def specs_from(data: dict) -> dict[str, dict]:
    """load_specs on envs.toml's parsed `data`."""
    specs = dict(data.get("env", {}))
    for family, releases in data.get("releases", {}).items():
        template = data.get("template", {}).get(family)
        if template is None:
            raise EnvError(f"envs.toml: [releases.{family}] has no [template.{family}]")
        defaults = template.get("defaults", {})  # a field a release line may leave out
        for version, pins in releases.items():
            fields = {"version": version, **defaults, **{k: v for k, v in pins.items() if k != "extra"}}
            # A pin of "none": the release does not require that package; its dependency goes.
            absent = [f"{{{k}}}" for k, v in fields.items() if v == "none"]
            kept = {k: v for k, v in template.items() if k not in TEMPLATE_ONLY}
            kept["deps"] = [d for d in template.get("deps", []) if not any(a in d for a in absent)]
            try:
                spec = {k: _fill(v, fields) for k, v in kept.items()}
            except KeyError as exc:
                raise EnvError(f"envs.toml: release {family} {version} lacks the pin {exc} its "
                               "template uses") from None
            spec["deps"] = [*spec["deps"], *pins.get("extra", [])]
            specs[f"{family}-{version}"] = spec
    for name, spec in list(specs.items()):
        if "base" in spec:
            specs[name] = _on_base(name, spec, specs)
    return specs


def _on_base(name: str, spec: dict, specs: dict[str, dict]) -> dict:
    """A spec with `base = "OTHER"`: the environment OTHER's packages (its torch, no_deps and
    deps) plus this spec's own, so a trainer pinned to an engine release (SpecForge 0.2.0 on
    SGLang 0.5.14) reuses that release's list instead of repeating it."""
    base = specs.get(spec["base"])
    if base is None or "base" in base:
        raise EnvError(f"envs.toml: {name} builds on {spec['base']!r}, which is not a release "
                       "or environment without a base of its own")
    out = {k: v for k, v in spec.items() if k != "base"}
    out.setdefault("torch", base.get("torch"))
    out["no_deps"] = [*base.get("no_deps", []), *spec.get("no_deps", [])]
    out["deps"] = [*base.get("deps", []), *spec.get("deps", [])]
    return out


def env_path(name: str, spec: dict) -> Path:
    """Where the environment `name` is built. In a checkout: the main one (`editable`: it
    installs the checkout) at its envs.toml `path` (`.venv`), and with no PARITY_HOME set every
    other one at its `path` too (`.envs/NAME`: inside the checkout's default home). Otherwise
    in the home, `$PARITY_HOME/NAME`."""
    if CHECKOUT is not None and "path" in spec and (spec.get("editable") or not os.environ.get("PARITY_HOME")):
        return CHECKOUT / spec["path"]
    return home() / name


def _installed(spec: dict) -> dict[str, str]:
    """The pinned packages of `spec` as installed in the running environment."""
    out = {}
    for name in _pinned(spec):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def environments() -> list[Env]:
    if not shipped("envs.toml").exists():
        return []
    return [Env(name, Path(sys.prefix), _installed(spec), current=True) if spec.get("editable")
            else Env(name, env_path(name, spec), _pinned(spec))
            for name, spec in load_specs().items()]


def find_env(package: str, version: str) -> Env:
    """The environment that has `package==version`."""
    for env in environments():
        if env.packages.get(package) == version:
            if not env.built:
                raise EnvError(f"the environment for {package} {version} ({env.path}) is not "
                               f"built: run `{setup_command(env.name)}`")
            return env
    known = sorted({e.packages[package] for e in environments() if package in e.packages})
    raise EnvError(f"no environment pins {package}=={version}; envs.toml has {known}. "
                   f"Add a line for it to {user_envs() if CHECKOUT is None else 'envs.toml'}")


PYCACHE = ".pycache"  # inside an environment parity built: the bytecode of what its interpreter imported


def keep_bytecode(python: Path | str, env: dict[str, str]) -> None:
    """Let `python`, when it is the interpreter of an environment parity built, keep the
    bytecode of what it imports, inside that environment: PYTHONPYCACHEPREFIX at the
    environment's `.pycache/` (so nothing lands beside the sources, parity's checkout included)
    and PYTHONDONTWRITEBYTECODE dropped. The environments are installed without bytecode, and
    with it unwritten (a machine that sets PYTHONDONTWRITEBYTECODE) every child compiles torch,
    transformers and the engine from source again: importing them took 7.7 s the first time
    and 3.0 s with the bytecode kept (docs/development.md, 'Environments'). In a release
    environment, the folders of the packages it installed as another one did (torch, most of
    transformers: the same files on disk) are shared with it (parity.bytecode). Another
    interpreter (the user's own, running an installed parity) is left as the user set it up."""
    where = _built_env(python)
    if where is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(where / PYCACHE)
        if _release_env_in_home(where):  # what it installed as the others did is shared
            bytecode.share(where, where / PYCACHE)


def _release_env_in_home(where: Path) -> bool:
    """Whether `where` is a release environment built in the home itself: not the main one
    (in the checkout or the user's), not a link to an environment elsewhere (whose bytecode
    would be linked into this home's store)."""
    if where.is_symlink() or where.resolve().parent != home().resolve():
        return False
    return not any(spec.get("editable") and env_path(name, spec).resolve() == where.resolve()
                   for name, spec in load_specs().items())


def _built_env(python: Path | str) -> Path | None:
    """The directory of the environment parity built whose interpreter `python` is, if any."""
    here = Path(os.path.realpath(Path(os.path.abspath(python)).parent.parent))
    try:
        specs = load_specs()
    except EnvError:
        return None
    for name, spec in specs.items():
        if spec.get("editable") and CHECKOUT is None:
            continue  # an installed parity's main environment is the user's
        path = env_path(name, spec)
        if Path(os.path.realpath(path)) == here:
            return path
    return None


@contextmanager
def parity_on_path(env: dict[str, str]) -> Iterator[Path]:
    """Make this parity package importable, first, in a child interpreter of any environment:
    put it on `env`'s PYTHONPATH and yield the directory to run the child in. A checkout goes
    on the path as it is (its tests' drift modules run in children too); an installed package
    sits among other distributions, so a directory holding only a link to it goes there
    instead (`import_dir`)."""
    path = CHECKOUT if CHECKOUT is not None else import_dir()
    env["PYTHONPATH"] = str(path) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    yield path


def import_dir() -> Path:
    """For an installed parity: a directory under the cache holding only a link named `parity`
    to this package. It is the same directory for every run of this installation, so the
    children's `sys.path`, which keys the reply cache, is the same too (a fresh temporary
    directory per run made every reply a miss). Made once, atomically: a concurrent maker
    sees a whole link or none."""
    import hashlib


    where = cache_dir() / "import-path" / hashlib.sha256(str(PACKAGE).encode()).hexdigest()[:16]
    link = where / "parity"
    if link.is_symlink() and link.resolve() == PACKAGE.resolve():
        return where
    for other in where.parent.glob("*/parity") if where.parent.is_dir() else ():
        if other.is_symlink() and not other.exists():  # an installation since removed
            other.unlink(missing_ok=True)
            with suppress(OSError):
                other.parent.rmdir()
    where.mkdir(parents=True, exist_ok=True)
    tmp = where / f".parity-{os.getpid()}-{id(where)}"
    tmp.symlink_to(PACKAGE, target_is_directory=True)
    os.replace(tmp, link)
    return where


PROBE_OVERRIDES = "PARITY_PROBE_OVERRIDES"


def module_to_run(module: str) -> str:
    """`module`, or the replacement `PARITY_PROBE_OVERRIDES` names for it."""
    overrides = {}
    for entry in filter(None, (e.strip() for e in os.environ.get(PROBE_OVERRIDES, "").split(","))):
        original, sep, replacement = (part.strip() for part in entry.partition("="))
        if not sep or not all(p.isidentifier() for name in (original, replacement) for p in name.split(".")):
            raise EnvError(f"{PROBE_OVERRIDES}: {entry!r} is not MODULE=REPLACEMENT "
                           "(dotted module names, entries separated by commas)")
        overrides[original] = replacement
    return overrides.get(module, module)


def run_module(python: Path | str, module: str, request: dict, timeout: float = 600, *,
               cache: bool = False) -> dict:
    """Run `python -m module` with `request` as JSON on stdin; return its JSON reply.

    The module must print exactly one JSON object on its last stdout line. The child runs
    with a private TMPDIR, removed when it ends, and is killed if this wait is interrupted
    (parity.children.run_child). `module` may be replaced through `PARITY_PROBE_OVERRIDES`.
    `cache`: the reply may come from, and goes to, the on-disk reply cache (for children
    whose reply depends only on the installed code and the request: the extractions).
    """
    warm, module = module, module_to_run(module)
    forkserver.last.how = None  # set by the child's run (parity.children.run_child), if one starts
    env = child_env(python)
    started, reply = time.monotonic(), None
    try:
        with parity_on_path(env) as cwd:
            if cache:
                if enabled():
                    env[reads.ENV] = "1"  # the child records what it reads: the cache's entry holds it
                reply = cached_reply(str(python), module, request, env,
                                     lambda: _run(python, module, request, env, timeout, cwd, warm))
            else:
                reply = _run(python, module, request, env, timeout, cwd, warm)
            return reply
    finally:
        if runlog.enabled():  # where a test run's time goes (bench/suite.py)
            _log_run(python, warm, module, request, reply, time.monotonic() - started)


def _log_run(python: Path | str, warm: str, module: str, request: dict, reply: dict | None,
             seconds: float) -> None:
    """One line of the run log (parity.runlog): how the child was answered and under which key
    (the reply cache's, or, for a child never cached, a digest of the same material)."""
    source = reply.get(SOURCE_KEY) if isinstance(reply, dict) else None
    # a child never cached is `uncached`, or `off` where the caller turned the cache off (PARITY_NO_CACHE)
    status = ("raised" if reply is None else source.get("status", "?") if isinstance(source, dict)
              else "uncached" if enabled() else "off")
    key = source.get("key") if isinstance(source, dict) else None
    work = request_digest(str(python), module, {k: v for k, v in request.items() if k != NAMES_KEY})
    runlog.record({"module": warm, "ran": module, "env": Path(python).parent.parent.name, "status": status,
                   "key": key or "uncached:" + request_digest(str(python), module, request), "work": work,
                   "why": source.get("why") if isinstance(source, dict) else None, "seconds": round(seconds, 3),
                   "how": getattr(forkserver.last, "how", None) if status not in ("hit",) else None})


def child_env(python: Path | str) -> dict[str, str]:
    """The environment of a probe child of `python`: this process's, with the settings below."""
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")
    # The probes run tiny models: one thread is faster, and keeps parallel probes
    # (xdist workers, the matrix) from oversubscribing the cores (measured 14 s vs 40 s).
    env.setdefault("OMP_NUM_THREADS", "1")
    # torch.compile off: SGLang compiles some engine functions (DeepSeek's MoE router,
    # `biased_grouped_topk`) with inductor, which on a CPU is about 9 s of code generation and
    # gcc per process for a function whose Python then runs as written (eager). Every captured
    # state is identified numerically either way (docs/engines-on-cpu.md, 'torch.compile').
    env.setdefault("TORCH_COMPILE_DISABLE", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded; fail fast instead of retrying
    env.setdefault("TRANSFORMERS_VERBOSITY", "error")
    keep_bytecode(python, env)
    return env


# Run in an environment: import a probe module and its package, and run the module's warm()
# (what a parity.forkserver server does first), so their bytecode is compiled and kept.
_WARM = r"""
import importlib, sys
module = importlib.import_module(sys.argv[1])
if callable(getattr(module, "warm", None)):
    module.warm()
importlib.import_module(sys.argv[2])
"""


def compile_ahead(python: Path | str, module: str, package: str, timeout: float = 600) -> bool:
    """Compile the bytecode of what `module` (a probe) and `package` import into the environment
    of `python`, a parity-built one (keep_bytecode), before its first probe runs: in a fresh
    environment that first probe would otherwise spend about 25 s compiling torch, transformers
    and the engine (`parity sweep` does this for the next releases while one runs its cases).
    Whether it ran; a failure is left for the probe to meet and report."""
    import subprocess
    import tempfile


    if _built_env(python) is None:
        return False  # an interpreter parity did not build: its bytecode is not parity's to write
    env = child_env(python)
    with parity_on_path(env) as cwd, tempfile.TemporaryDirectory(prefix="parity-compile-") as tmp:
        try:
            proc = subprocess.run([str(python), "-c", _WARM, module, package], capture_output=True, text=True,
                                  env=private_caches(env, tmp), cwd=cwd, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
    return proc.returncode == 0


def _run(python: Path | str, module: str, request: dict, env: dict[str, str], timeout: float,
         cwd: Path, warm: str) -> dict:
    # A fork of a server that has imported `warm` (parity.forkserver): same reply, less import.
    proc = run_child([str(python), "-m", module], json.dumps(request), env, timeout, cwd=cwd, warm=warm)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-12:]
        raise EnvError(f"{module} under {python} failed (exit {proc.returncode}):\n  "
                       + "\n  ".join(tail))
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise EnvError(f"{module} under {python} printed no JSON reply: {lines[-1][:200]!r}") from exc


def current_python() -> str:
    return sys.executable


def display_python(path: str | None) -> str | None:
    """An interpreter path as recorded in contracts: relative to the checkout when inside it."""
    if not path or CHECKOUT is None:
        return path
    try:
        return str(Path(path).relative_to(CHECKOUT))
    except ValueError:
        return path


def reply_over_stdio(handler, hard_exit: bool = True) -> None:
    """The subprocess side of `run_module`: JSON request on stdin -> `handler(request)` -> one
    JSON line on stdout. An exception becomes {"error", "traceback"} for the caller to
    report, with `TRANSIENT_KEY: true` when it is a failure outside the inputs
    (parity.errors.transient). `hard_exit` skips interpreter teardown (gloo process groups can hang there), so the
    handler runs in a workspace that is removed before the reply is written: what it made in
    the temp dir goes with it, whoever started this process."""
    import traceback

    try:
        with workspace(prefix="parity-probe-"):
            reply = handler(json.loads(sys.stdin.read() or "{}"))
    except Exception as exc:  # noqa: BLE001 - reported by the caller, never a bare traceback
        reply = {"error": f"{type(exc).__name__}: {exc}",
                 "traceback": traceback.format_exc().strip().splitlines()[-8:]}
        if transient(exc):
            reply[TRANSIENT_KEY] = True
    if os.environ.get(reads.ENV) == "1":
        reply[reads.REPLY_KEY] = reads.collect()  # what the reply depends on (parity.reply_cache)
    sys.stdout.write("\n" + no_addresses(json.dumps(reply)) + "\n")  # an engine's words may quote a repr
    sys.stdout.flush()
    if hard_exit:
        os._exit(0)
