"""The environments envs.toml describes, and running parity code inside one of them.

Other releases of speculators (and later SGLang) cannot share an environment with the
main one (they pin other transformers releases), so their extractors run as
`python -m parity.<module>` in a subprocess of that environment's interpreter, with
this repository on PYTHONPATH, exchanging JSON over stdin/stdout.

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
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .workspace import run_child, workspace
from .errors import UserError

ROOT = Path(__file__).resolve().parent.parent
PINS = ROOT / "envs.toml"


class EnvError(UserError, RuntimeError):
    """An environment is missing, not built, or its subprocess failed."""


@dataclass(frozen=True)
class Env:
    name: str
    path: Path
    packages: dict[str, str]  # package -> pinned version, from `no_deps` pins

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def built(self) -> bool:
        return (self.path / "parity-env.stamp").exists() and self.python.exists()


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


def load_specs(text: str | None = None) -> dict[str, dict]:
    """Every environment envs.toml describes, by name: the `[env.NAME]` sections as written,
    plus one per line of `[releases.FAMILY]`, filled into `[template.FAMILY]`
    (`{version}` and the line's own pins; its `extra` list is appended to `deps`).
    Stdlib only: tools/setup_env.py uses it before any environment exists."""
    data = tomllib.loads(PINS.read_text() if text is None else text)
    specs = dict(data.get("env", {}))
    for family, releases in data.get("releases", {}).items():
        template = data.get("template", {}).get(family)
        if template is None:
            raise EnvError(f"envs.toml: [releases.{family}] has no [template.{family}]")
        for version, pins in releases.items():
            fields = {"version": version, **{k: v for k, v in pins.items() if k != "extra"}}
            try:
                spec = {k: _fill(v, fields) for k, v in template.items()}
            except KeyError as exc:
                raise EnvError(f"envs.toml: release {family} {version} lacks the pin {exc} its "
                               "template uses") from None
            spec["deps"] = [*spec.get("deps", []), *pins.get("extra", [])]
            specs[f"{family}-{version}"] = spec
    return specs


def environments() -> list[Env]:
    if not PINS.exists():
        return []
    return [Env(name, ROOT / spec["path"], _pinned(spec)) for name, spec in load_specs().items()]


def find_env(package: str, version: str) -> Env:
    """The environment that pins `package==version`."""
    for env in environments():
        if env.packages.get(package) == version:
            if not env.built:
                raise EnvError(f"the environment for {package} {version} ({env.path}) is not "
                               f"built: run `./dev setup {env.name}`")
            return env
    known = sorted({e.packages[package] for e in environments() if package in e.packages})
    raise EnvError(f"no environment pins {package}=={version}; envs.toml has {known}. "
                   f"Add a section for it to envs.toml")


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
    (parity.workspace.run_child). `module` may be replaced through `PARITY_PROBE_OVERRIDES`.
    `cache`: the reply may come from, and goes to, the on-disk reply cache (for children
    whose reply depends only on the installed code and the request: the extractions).
    """
    module = module_to_run(module)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONHASHSEED", "0")
    # The probes run tiny models: one thread is faster, and keeps parallel probes
    # (xdist workers, the matrix) from oversubscribing the cores (measured 14 s vs 40 s).
    env.setdefault("OMP_NUM_THREADS", "1")
    if cache:
        from .reply_cache import cached_reply

        return cached_reply(str(python), module, request, env,
                            lambda: _run(python, module, request, env, timeout))
    return _run(python, module, request, env, timeout)


def _run(python: Path | str, module: str, request: dict, env: dict[str, str], timeout: float) -> dict:
    proc = run_child([str(python), "-m", module], json.dumps(request), env, timeout, cwd=ROOT)
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
    """An interpreter path as recorded in contracts: relative to the repository when inside it."""
    if not path:
        return path
    try:
        return str(Path(path).relative_to(ROOT))
    except ValueError:
        return path


def reply_over_stdio(handler, hard_exit: bool = True) -> None:
    """The subprocess side of `run_module`: JSON request on stdin -> `handler(request)` -> one
    JSON line on stdout. An exception becomes {"error", "traceback"} for the caller to
    report. `hard_exit` skips interpreter teardown (gloo process groups can hang there), so the
    handler runs in a workspace that is removed before the reply is written: what it made in
    the temp dir goes with it, whoever started this process."""
    import traceback

    try:
        with workspace(prefix="parity-probe-"):
            reply = handler(json.loads(sys.stdin.read() or "{}"))
    except Exception as exc:  # noqa: BLE001 - reported by the caller, never a bare traceback
        reply = {"error": f"{type(exc).__name__}: {exc}",
                 "traceback": traceback.format_exc().strip().splitlines()[-8:]}
    sys.stdout.write("\n" + json.dumps(reply) + "\n")
    sys.stdout.flush()
    if hard_exit:
        os._exit(0)
