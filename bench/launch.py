"""Benchmark: what the launch contract (--serve-args) adds to an uncached `parity check`.

    .venv/bin/python bench/launch.py [--engine vllm [--vllm VERSION]]

Runs `parity check` on the bundled Llama-3.1-8B draft twice, with the reply cache off
(PARITY_NO_CACHE=1), without and with the seed's --serve-args (the resolution, and the
verified fix's second resolution), and prints both wall times and their ratio, measured in
this one run (machines are noisy; the ratio is what to compare; target <= 1.20). With
`--engine vllm`: under the newest vLLM environment, with a `draft_model` speculative config
(vLLM's resolution, and the verified eagle3 fix's second one); `--vllm VERSION`: under that
release (e.g. 0.22.0, resolved by its family's own parser and answer).
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
SEED = ("--speculative-algorithm EAGLE3 --speculative-num-steps 1 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 16")
VLLM_SEED = """--speculative-config '{"method": "draft_model", "model": "my/draft", "num_speculative_tokens": 3}'"""


def timed(*extra: str) -> tuple[float, int]:
    env = {**os.environ, "PARITY_NO_CACHE": "1"}
    started = time.perf_counter()
    engine = ["--engine", "vllm"] if "--engine" in sys.argv[1:] and "vllm" in sys.argv[1:] else []
    if "--vllm" in sys.argv[1:]:  # another installed vLLM release
        engine += ["--vllm", sys.argv[sys.argv.index("--vllm") + 1]]
    proc = subprocess.run([sys.executable, "-m", "parity", *CHECK, *engine, *extra], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    return time.perf_counter() - started, proc.returncode


def main() -> None:
    without, rc0 = timed()
    with_launch, rc1 = timed("--serve-args", VLLM_SEED if "vllm" in sys.argv[1:] else SEED)
    print(f"{'check (uncached)':32} {'s':>7}  exit")
    print(f"{'without --serve-args':32} {without:7.1f}  {rc0}")
    print(f"{'with the seed --serve-args':32} {with_launch:7.1f}  {rc1}")
    print(f"ratio {with_launch / without:.2f} (target <= 1.20)")


if __name__ == "__main__":
    main()
