"""Benchmark: what the built-draft contract adds to an uncached `parity check`.

    .venv/bin/python bench/built_draft.py [--base REV] [--repeat N]

Runs `parity check` on the bundled Llama-3.1-8B draft with the reply cache off
(PARITY_NO_CACHE=1), alternately with this checkout and with `--base` (default cad2180^, the
commit before the built draft: a temporary git worktree, removed afterwards), N times each
(after one unmeasured run each), and prints the median wall times and their ratio, measured in this one run (machines are
noisy; the ratio is what to compare; target <= 1.25). Both run on the same environments;
only parity's own code differs.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECK = ["check", "--target-config", str(ROOT / "fixtures/targets/llama-3.1-8b/config.json"),
         "--draft", str(ROOT / "fixtures/drafts/llama-3.1-8b-eagle3"), "--dump-layout", "h2,h16,h29,h32"]


def timed(checkout: Path) -> tuple[float, int]:
    env = {**os.environ, "PARITY_NO_CACHE": "1", "PYTHONPATH": str(checkout)}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "parity", *CHECK], cwd=checkout, env=env,
                          capture_output=True, text=True)
    return time.perf_counter() - started, proc.returncode


def main() -> None:
    args = sys.argv[1:]
    base = args[args.index("--base") + 1] if "--base" in args else "cad2180^"
    repeat = int(args[args.index("--repeat") + 1]) if "--repeat" in args else 3
    where = Path(tempfile.mkdtemp(prefix="parity-bench-base-")) / "base"
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(where), base], cwd=ROOT, check=True)
    for env in (".venv", ".envs"):  # the same environments (and their bytecode), not fresh ones
        if (ROOT / env).exists():
            (where / env).symlink_to(ROOT / env)
    try:
        runs: dict[str, list[float]] = {"base": [], "now": []}
        codes: dict[str, set[int]] = {"base": set(), "now": set()}
        for checkout in (where, ROOT):  # unmeasured: each checkout's bytecode compiled once
            timed(checkout)
        for _ in range(repeat):
            for name, checkout in (("base", where), ("now", ROOT)):
                seconds, rc = timed(checkout)
                runs[name].append(seconds)
                codes[name].add(rc)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(where)], cwd=ROOT, check=False)
        shutil.rmtree(where.parent, ignore_errors=True)
    print(f"{'check (uncached), median of ' + str(repeat):36} {'s':>7}  exit")
    for name, label in (("base", f"before the built draft ({base})"), ("now", "with the built draft")):
        print(f"{label:36} {statistics.median(runs[name]):7.1f}  {sorted(codes[name])}")
    print(f"ratio {statistics.median(runs['now']) / statistics.median(runs['base']):.2f} (target <= 1.25)")


if __name__ == "__main__":
    main()
