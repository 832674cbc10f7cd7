"""Benchmark: what running the capture under a parallel layout of two ranks costs, against one.

    .venv/bin/python bench/layout.py [--engine vllm] [--layout '--tp-size 2']

Runs `parity check` on the bundled Llama-3.1-8B draft with the reply cache off
(PARITY_NO_CACHE=1), twice each, in the order one, two, two, one: with serve arguments of one
rank, and with the same arguments and
`--pp-size 2` (SGLang; vLLM: `--pipeline-parallel-size 2`), or the `--layout` given (two ranks:
two CPU processes forked by the probe, each building its stage, beside the probe's own
one-process run, which the rest of the contract reads). Prints the wall times, the exit codes
and the ratio of the sums, measured in this one run (machines are noisy; the ratio is what to
compare).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECK = ["check", "--target-config", str(ROOT / "fixtures/targets/llama-3.1-8b/config.json"),
         "--draft", str(ROOT / "fixtures/drafts/llama-3.1-8b-eagle3"), "--dump-layout", "h2,h16,h29,h32"]
SGLANG = ("--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1 "
          "--speculative-num-draft-tokens 4")
VLLM = "--speculative-config.method eagle3 --speculative-config.num_speculative_tokens 3"


def _option(name: str) -> str | None:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv[1:] else None


def timed(serve_args: str, engine: list[str]) -> tuple[float, int]:
    env = {**os.environ, "PARITY_NO_CACHE": "1"}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "parity", *CHECK, *engine, "--serve-args", serve_args], cwd=ROOT,
                          env=env, capture_output=True, text=True)
    return time.perf_counter() - started, proc.returncode


def main() -> None:
    vllm = "vllm" in sys.argv[1:]
    engine = ["--engine", "vllm"] if vllm else []
    base = VLLM if vllm else SGLANG
    layout = _option("--layout") or ("--pipeline-parallel-size 2" if vllm else "--pp-size 2")
    # in the order one, two, two, one: a load that drifts during the run weighs on both alike
    one_a, rc1 = timed(base, engine)
    two_a, rc2 = timed(f"{base} {layout}", engine)
    two_b, _ = timed(f"{base} {layout}", engine)
    one_b, _ = timed(base, engine)
    print(f"{'check (uncached, ' + ('vllm' if vllm else 'sglang') + ')':40} {'s':>7} {'s':>7}  exit")
    print(f"{'one rank':40} {one_a:7.1f} {one_b:7.1f}  {rc1}")
    print(f"{'two ranks (' + layout + ')':40} {two_a:7.1f} {two_b:7.1f}  {rc2}")
    print(f"ratio {(two_a + two_b) / (one_a + one_b):.2f} (two ranks over one, both runs of each)")


if __name__ == "__main__":
    main()
