"""The environments envs.toml describes, and running parity code inside one of them.

Other releases of speculators (and later SGLang) cannot share an environment with the
main one (they pin other transformers releases), so their extractors run as
`python -m parity.<module>` in a subprocess of that environment's interpreter, with
this repository on PYTHONPATH, exchanging JSON over stdin/stdout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PINS = ROOT / "envs.toml"


class EnvError(RuntimeError):
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


def environments() -> list[Env]:
    if not PINS.exists():
        return []
    envs = tomllib.loads(PINS.read_text()).get("env", {})
    return [Env(name, ROOT / spec["path"], _pinned(spec)) for name, spec in envs.items()]


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


def run_module(python: Path | str, module: str, request: dict, timeout: float = 600) -> dict:
    """Run `python -m module` with `request` as JSON on stdin; return its JSON reply.

    The module must print exactly one JSON object on its last stdout line.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONHASHSEED", "0")
    proc = subprocess.run([str(python), "-m", module], input=json.dumps(request), text=True,
                          capture_output=True, env=env, timeout=timeout, cwd=ROOT)
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
