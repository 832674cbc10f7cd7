"""Benchmark: one SpecForge training extraction against one serving extraction of the same target.

    .venv/bin/python bench/specforge_extraction.py [TARGET_CONFIG] [--repeat N]

TARGET_CONFIG defaults to the 32-layer Llama-3.1-8B fixture with the published-style SpecForge
draft (no ids). Both run as parity runs them, a fresh probe process each, uncached:
  - the SpecForge training extraction (SpecForge 0.2.0's environment: its id resolution, the
    capture by SGLang 0.5.14, its normaliser and target head, identification);
  - the SGLang serving extraction of the same target and draft (the main environment).
Prints the best wall time of each over --repeat runs and their ratio (target <= 2).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from parity.envs import run_module  # noqa: E402
from parity.extract.trainers import specforge  # noqa: E402

TARGET = ROOT / "fixtures" / "targets" / "llama-3.1-8b" / "config.json"
DRAFT = ROOT / "fixtures" / "drafts" / "specforge-llama3-8b-eagle3"


def best(fn, repeat: int) -> tuple[float, dict]:
    times, reply = [], {}
    for _ in range(repeat):
        t0 = time.perf_counter()
        reply = fn()
        times.append(time.perf_counter() - t0)
    return min(times), reply


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("target", nargs="?", type=Path, default=TARGET)
    p.add_argument("--draft", type=Path, default=DRAFT)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--specforge", default="0.2.0", help="the SpecForge release (its environment)")
    args = p.parse_args()
    config = json.loads(args.target.read_text())
    training, t_reply = best(lambda: run_module(specforge.python(args.specforge), specforge.PROBE_MODULE, {
        "target_config": config, "draft_config": str((args.draft / "config.json").resolve()),
        "run_ids": None, "seq_len": 8, "seed": 0}), args.repeat)
    serving, s_reply = best(lambda: run_module(sys.executable, "parity.extract.engines.sglang.probe", {
        "target_config": config, "draft_dir": str(args.draft.resolve()), "seq_len": 8, "seed": 0}), args.repeat)
    print(f"target: {config['architectures'][0]}, {config['num_hidden_layers']} layers (tiny widths)")
    print(f"training fc {[s.get('tap') for s in t_reply.get('fc', [])]}, target "
          f"{t_reply.get('target', {}).get('tap')}; served fc {[s.get('tap') for s in s_reply.get('slots', [])]}")
    print(f"SpecForge {t_reply.get('specforge_version')} training extraction: {training:6.2f} s")
    print(f"SGLang {s_reply.get('sglang_version')} serving extraction:     {serving:6.2f} s")
    print(f"ratio training / serving:                 {training / serving:6.2f}  (target <= 2)")


if __name__ == "__main__":
    main()
