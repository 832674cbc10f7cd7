"""Benchmark: what one extraction child costs, fresh or forked from a warmed server, with
torch.compile on or off (docs/children.md).

    .venv/bin/python bench/children.py [--repeat N]

For the SGLang serving probe on the 32-layer Llama-3.1-8B and the 61-layer DeepSeek-V3 fixtures
and the speculators training probe, uncached (PARITY_NO_CACHE=1), in one run:
  - fresh, torch.compile on (how children ran before warmed servers);
  - fresh, torch.compile off (PARITY_NO_FORKSERVER=1);
  - forked: the first run (it starts the server and waits for its imports), then the best of
    --repeat further runs (the steady state a test session or a matrix sees).
Prints wall seconds and the ratio fresh-with-compile / forked-steady.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from parity import forkserver  # noqa: E402
from parity.envs import run_module  # noqa: E402
from parity.workspace import workspace  # noqa: E402

FIXTURES = ROOT / "fixtures"
SERVING = "parity.extract.engines.sglang.probe"
TRAINING = "parity.extract.trainers.speculators.probe"


def cases() -> dict[str, tuple[str, dict]]:
    def serving(target: str, draft: str) -> dict:
        return {"target_config": json.loads((FIXTURES / "targets" / target / "config.json").read_text()),
                "draft_dir": str(FIXTURES / "drafts" / draft), "seq_len": 8, "seed": 0}

    return {"sglang probe, Llama 32 layers": (SERVING, serving("llama-3.1-8b", "llama-3.1-8b-eagle3")),
            "sglang probe, DeepSeek-V3 61 layers": (SERVING, serving("deepseek-v3-61l", "kimi-k2.5-eagle3")),
            "speculators probe, 4-slot dump": (TRAINING, {"num_slots": 4, "hidden_size": 8, "seq_len": 6})}


def timed(module: str, request: dict, **env: str) -> float:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        t0 = time.perf_counter()
        reply = run_module(sys.executable, module, request)
        if reply.get("error"):
            raise SystemExit(f"{module}: {reply['error']}")
        return time.perf_counter() - t0
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    os.environ["PARITY_NO_CACHE"] = "1"
    print(f"{'child':38} {'fresh+compile':>13} {'fresh':>7} {'fork 1st':>9} {'fork':>7} {'ratio':>6}")
    with workspace(prefix="parity-bench-"):
        for name, (module, request) in cases().items():
            compiled = timed(module, request, **{forkserver.OFF: "1", "TORCH_COMPILE_DISABLE": "0"})
            fresh = timed(module, request, **{forkserver.OFF: "1"})
            first = timed(module, request)
            steady = min(timed(module, request) for _ in range(args.repeat))
            print(f"{name:38} {compiled:13.1f} {fresh:7.1f} {first:9.1f} {steady:7.1f} {compiled / steady:6.1f}x",
                  flush=True)
            forkserver.forget()


if __name__ == "__main__":
    main()
