"""Benchmark: build time and real disk cost of each release environment, from its lock.

    python3 bench/envs.py [--home DIR] [NAME ...]      # default: every release environment, a fresh home

Builds each environment envs.toml names (not the main one, which lives in the checkout) into a
fresh PARITY_HOME (a temporary directory unless --home), one after another, each from its
committed lock (parity/build_env.py), and prints per environment:
  - build seconds (uv venv + sync from the lock; the first one also fills the shared package
    cache, downloads included);
  - real extra disk: how much the home's disk use grew with it (`du`, which counts a hard-linked
    file once): what one more release costs next to the others;
  - apparent size: what the environment would take as a full copy.
Targets (issue 14): <= 30 s and <= 400 MB real extra per release after the first.
The temporary home is removed at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def du(path: Path) -> int:
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else 0


def apparent(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def main(argv: list[str]) -> int:
    given = None
    if argv[:1] == ["--home"]:
        given, argv = Path(argv[1]), argv[2:]
    home = given or Path(tempfile.mkdtemp(prefix="parity-bench-envs-"))
    os.environ["PARITY_HOME"] = str(home)
    sys.path.insert(0, str(ROOT))
    from parity.build_env import build, uv
    from parity.envs import load_specs

    specs = load_specs()
    names = argv or [n for n, s in specs.items() if not s.get("editable")]
    try:
        uv()  # bootstrapped once, not part of any environment's figure
        rows, before = [], du(home)
        for name in names:
            t0 = time.monotonic()
            build(name, specs[name])
            seconds = time.monotonic() - t0
            after = du(home)
            rows.append((name, seconds, after - before, apparent(home / name)))
            before = after
        print(f"\n{'environment':28s} {'build s':>8s} {'real extra MB':>14s} {'full copy MB':>13s}")
        for name, seconds, extra, full in rows:
            print(f"{name:28s} {seconds:8.1f} {extra / 2**20:14.0f} {full / 2**20:13.0f}")
        print(f"{'home total':28s} {'':8s} {du(home) / 2**20:14.0f}   ({home}; the first row includes the "
              "shared package cache)")
    finally:
        if given is None:
            shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
