"""Build parity's virtual environments from envs.toml (stdlib only).

    python3 tools/setup_env.py            # a checkout: every environment (`./dev setup`)
    python3 tools/setup_env.py main       # just one
    parity setup [NAME ...]               # installed: the release environments, into $PARITY_HOME

In a checkout each environment is built at its envs.toml `path` (`.venv`, `.envs/NAME`), or
into `$PARITY_HOME/NAME` when PARITY_HOME is set (parity.envs.env_path). Installed, the main
environment (`editable = true`: it installs the checkout) is the environment parity runs in,
and nothing is built for it; every other one is built into the home. Each environment is re-built only when what defines it changed since the last
successful build (its expanded spec, the build RECIPE below, and for the editable
one pyproject.toml): a stamp file inside the environment holds that hash, so a
re-run with nothing changed takes well under a second. Progress goes to stderr.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .envs import STAMP, EnvError, env_path, load_specs
from .home import CHECKOUT

RECIPE = 2  # bump when the way an environment is built below changes


def log(msg: str) -> None:
    print(f"[setup] {msg}", file=sys.stderr, flush=True)


def spec_hash(name: str, spec: dict) -> str:
    canonical = {**spec, "deps": sorted(spec.get("deps", [])), "no_deps": sorted(spec.get("no_deps", [])),
                 "editable": bool(spec.get("editable"))}
    h = hashlib.sha256()
    h.update(json.dumps({"name": name, "spec": canonical, "recipe": RECIPE}, sort_keys=True).encode())
    if spec.get("editable") and CHECKOUT is not None:
        h.update((CHECKOUT / "pyproject.toml").read_bytes())
    return h.hexdigest()


def pip(py: Path, *args: str) -> None:
    cmd = [str(py), "-m", "pip", "install", "--disable-pip-version-check",
           "--progress-bar", "off", *args]
    shown = [a for i, a in enumerate(args) if not a.startswith("-") and args[i - 1] != "-c"]
    log("pip install " + " ".join(shown))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-6000:])
        raise SystemExit(f"[setup] pip failed (exit {proc.returncode}): {' '.join(cmd)}")


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(CHECKOUT)) if CHECKOUT is not None else str(path)
    except ValueError:
        return str(path)


def build(name: str, spec: dict) -> None:
    if spec.get("editable") and CHECKOUT is None:
        log(f"{name}: the environment parity runs in ({sys.prefix}): nothing to build")
        return
    path = env_path(name, spec)
    stamp = path / STAMP
    want = spec_hash(name, spec)
    if stamp.exists() and stamp.read_text().strip() == want:
        log(f"{name}: up to date ({_shown(path)})")
        return
    t0 = time.monotonic()
    log(f"{name}: building {_shown(path)} (a fresh build takes a few minutes)")
    if path.exists():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    py = path / "bin" / "python"
    # The CPU torch first; the constraint keeps every later install on it.
    torch_pin = f"torch=={spec['torch']}"
    pip(py, "-q", torch_pin)
    constraints = path / "torch-constraint.txt"
    constraints.write_text(torch_pin + "\n")
    if spec.get("deps"):
        pip(py, "-q", "-c", str(constraints), *spec["deps"])
    if spec.get("no_deps"):
        pip(py, "-q", "--no-deps", *spec["no_deps"])
    if spec.get("editable"):
        pip(py, "-q", "--no-deps", "--no-build-isolation", "-e", str(CHECKOUT))
    stamp.write_text(want + "\n")
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
    log(f"{name}: built in {time.monotonic() - t0:.0f} s, {size / 2**30:.2f} GiB")


def main(argv: list[str]) -> int:
    """Build the environments named in `argv` (all when empty); 0, or 2 for an unknown name."""
    try:
        envs = load_specs()
    except EnvError as exc:
        print(f"[setup] {exc}", file=sys.stderr)
        return 2
    names = argv or list(envs)
    unknown = [n for n in names if n not in envs]
    if unknown:
        print(f"[setup] unknown environment(s) {unknown}; envs.toml has {list(envs)}",
              file=sys.stderr)
        return 2
    for name in names:
        build(name, envs[name])
    return 0

