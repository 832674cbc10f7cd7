"""Wall time of `parity replay` on the bundled fixture, phase by phase, and its overhead.

    .venv/bin/python bench/replay.py [--samples N]

Runs `replay(...)` on fixtures/replay (32 samples x 64 tokens, a 4-slot dump, 24 wirings)
with the serving contract, then prints the phases the result records (training contract,
serving contract, replay: one speculators process scoring every wiring) and, from the
probe's own timings, how the replay splits into import, loading and scoring. The ratio
printed is replay / (import + load + one wiring): what scoring 24 wirings costs over the
least a single replay must pay. Measured in one run (machines are noisy).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from parity.contract import parse_taps  # noqa: E402
from parity.envs import run_module  # noqa: E402
from parity.replay.reply import ReplayReply  # noqa: E402
from parity.replay.run import PROBE, replay  # noqa: E402

FIXTURE = ROOT / "fixtures" / "replay"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int)
    args = ap.parse_args()
    started = time.perf_counter()
    result = replay(FIXTURE / "draft", FIXTURE / "data", dump_layout=parse_taps("h0,h2,h5,h7"),
                    samples=args.samples)
    total = time.perf_counter() - started
    print(f"parity replay on fixtures/replay: {result.samples} samples, {len(result.scores)} wirings, "
          f"{result.best.positions} positions per wiring")
    for phase, seconds in result.wall_s.items():
        print(f"  {phase:22s} {seconds:6.2f} s")
    print(f"  {'measured here':22s} {total:6.2f} s")
    # the probe's own split, from a second run of it alone
    request = {"draft_dir": str((FIXTURE / "draft").resolve()), "verifier_dir": str((FIXTURE / "target").resolve()),
               "data_dir": str((FIXTURE / "data").resolve()), "steps": 3, "samples": args.samples,
               "wirings": [list(s.slots) for s in result.scores]}
    t = ReplayReply.read(run_module(sys.executable, PROBE, request)).timings
    one = t["import_s"] + t["load_s"] + t["per_wiring_s"]
    all_ = t["import_s"] + t["load_s"] + t["score_s"]
    print(f"probe: import {t['import_s']:.2f} s, load draft + dumps {t['load_s']:.2f} s, "
          f"score {t['score_s']:.2f} s ({t['per_wiring_s'] * 1000:.0f} ms per wiring)")
    print(f"ratio all {len(result.scores)} wirings / one wiring (same process costs): {all_ / one:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
