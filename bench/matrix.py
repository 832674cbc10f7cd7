"""Benchmark: the full version matrix of the born-from example, against single extractions.

    .venv/bin/python bench/matrix.py [--no-serial]

Prints, measured in this one run (machines are noisy; compare the ratios):
  - wall time of `parity matrix` on the born-from example (every installed SGLang release x
    every installed speculators release, with the gate's candidate search and verification),
    target < 120 s;
  - the sum of the single extractions it covers, each run alone (one training extraction per
    speculators release, one serving extraction per SGLang release), and the matrix's ratio
    to it;
  - the same matrix run with one worker (serial), and the parallel speed-up over it;
  - the disk used by every release environment in envs.toml (target: each extra SGLang
    release <= 2.5 GB).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from parity.envs import environments  # noqa: E402
from parity.extract.engines.sglang import extract_serving  # noqa: E402
from parity.inputs import read_inputs  # noqa: E402
from parity.lock import extract_for_lock  # noqa: E402
from parity.matrix import build_matrix  # noqa: E402
from parity.releases import releases  # noqa: E402
from parity.report.matrix import render_text  # noqa: E402
from parity.reply_cache import NO_CACHE  # noqa: E402

TARGET = ROOT / "fixtures" / "targets" / "deepseek-v3-61l" / "config.json"
DRAFT = ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3"
LAYOUT = ["h0", "h3", "h31", "h59"]


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def du(path: Path) -> int:
    if not path.exists():
        return 0
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else 0


def main(argv: list[str]) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # as the matrix runs each extraction
    os.environ[NO_CACHE] = "1"  # every extraction measured runs (parity.reply_cache)
    srels = [r for r in releases("sglang") if not r.problem]
    trels = [r for r in releases("speculators") if not r.problem]
    print(f"releases: sglang {[r.version for r in srels]}, speculators {[r.version for r in trels]} "
          f"({os.cpu_count()} CPUs)")

    m, wall = timed(lambda: build_matrix(TARGET, DRAFT, LAYOUT))
    print(render_text(m))
    print()
    for t in m.timings:
        print(f"  {t['what']:45s} started {t['start_s']:6.1f} s, took {t['seconds']:6.1f} s")

    singles = {}
    for r in trels:
        _, singles[f"training  speculators {r.version}"] = timed(
            lambda r=r: extract_for_lock(*read_inputs(TARGET, DRAFT), LAYOUT, speculators_version=r.version))
    for r in srels:
        _, singles[f"serving   sglang {r.version}"] = timed(
            lambda r=r: extract_serving(*read_inputs(TARGET, DRAFT), sglang_version=r.version))
    total = sum(singles.values())
    print("\nsingle extractions, each alone:")
    for k, v in singles.items():
        print(f"  {k:40s} {v:6.1f} s")

    print(f"\nmatrix wall time                 {wall:6.1f} s  (target < 120 s)")
    print(f"sum of single extractions        {total:6.1f} s")
    print(f"matrix / sum of singles          {wall / total:6.2f}  (the matrix also searches and "
          f"verifies a fix per release)")
    if "--no-serial" not in argv:
        _, serial = timed(lambda: build_matrix(TARGET, DRAFT, LAYOUT, workers=1))
        print(f"same matrix, one worker          {serial:6.1f} s")
        print(f"parallel speed-up                {serial / wall:6.2f}x on {os.cpu_count()} CPUs")

    print("\ndisk used by the release environments:")
    grand = 0
    for env in environments():
        size = du(env.path)
        grand += size
        pins = ", ".join(f"{k} {v}" for k, v in env.packages.items() if k in ("sglang", "speculators"))
        print(f"  {env.name:22s} {size / 1e9:5.2f} GB  {pins}{'' if env.built else '  (not built)'}")
    print(f"  {'all':22s} {grand / 1e9:5.2f} GB")


if __name__ == "__main__":
    main(sys.argv[1:])
