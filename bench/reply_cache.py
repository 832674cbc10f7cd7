"""Benchmark: what the reply cache costs and saves, on the real probes.

    .venv/bin/python bench/reply_cache.py

For the training probe (speculators, a 4-slot dump) and the serving probe (SGLang, the
Llama-3.1-8B fixture and its draft), each in the main environment, as fresh processes (no
forkserver, so that the three are like for like), measured in this one run:
  - uncached: the extraction with the cache off (the child records nothing);
  - miss: the extraction into an empty cache: the child records what it read, the parent
    hashes each file (sha256) and stores the entry;
  - hit: the same request again: the key, then every recorded file stat'ed (and every
    recorded directory), no child;
  - miss, known files: another request (a miss) in a parent that has hashed nothing yet, with
    the digests earlier entries recorded (`digests.json`): what a second `parity check` with
    other inputs pays;
and the entry's size (files and directories recorded). Targets: a hit well under the
extraction (today's hit ratio is printed), a miss within a few percent of uncached.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from parity import reads, reply_cache  # noqa: E402
from parity.envs import run_module  # noqa: E402
from parity.workspace import workspace  # noqa: E402

LLAMA = json.loads((ROOT / "fixtures" / "targets" / "llama-3.1-8b" / "config.json").read_text())
CASES = {  # (module, request, another request)
    "training (speculators)": ("parity.extract.trainers.speculators.probe",
                               {"num_slots": 4, "hidden_size": 8, "seq_len": 6}, {"num_slots": 5}),
    "serving (sglang, llama)": ("parity.extract.engines.sglang.probe",
                                {"target_config": LLAMA, "seq_len": 8, "seed": 0, "candidates": [],
                                 "draft_dir": str(ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3")},
                                {"seed": 1}),
}


def timed(module: str, request: dict) -> tuple[float, dict]:
    started = time.perf_counter()
    reply = run_module(sys.executable, module, request, cache=True)
    return time.perf_counter() - started, reply


def main() -> None:
    os.environ["PARITY_NO_FORKSERVER"] = "1"
    with workspace(), tempfile.TemporaryDirectory(prefix="parity-bench-cache-") as root:
        reply_cache.cache_dir = lambda: Path(root)
        print(f"{'case':26} {'uncached s':>10} {'miss s':>8} {'hit s':>7} {'miss known s':>12} {'miss/unc':>9} "
              f"{'hit/unc':>8} {'known/unc':>9} {'files':>6} {'dirs':>5} {'entry MB':>8}")
        for name, (module, request, other) in CASES.items():
            os.environ[reply_cache.NO_CACHE] = "1"
            uncached, _ = timed(module, request)
            del os.environ[reply_cache.NO_CACHE]
            miss, stored = timed(module, request)
            hit, served = timed(module, request)
            reads._digests.clear()  # as a new parity process: nothing hashed in memory
            known, _ = timed(module, {**request, **other})
            assert stored["reply_cache"]["status"] == "stored", stored["reply_cache"]
            assert served["reply_cache"]["status"] == "hit", served["reply_cache"]
            [entry] = Path(root).glob(f"*/{served['reply_cache']['key']}/*.json")
            record = json.loads(entry.read_text())["reads"]
            print(f"{name:26} {uncached:10.2f} {miss:8.2f} {hit:7.3f} {known:12.2f} {miss / uncached:9.2f} "
                  f"{hit / uncached:8.3f} {known / uncached:9.2f} {len(record['files']):6d} {len(record['dirs']):5d} "
                  f"{entry.stat().st_size / 1e6:8.1f}")


if __name__ == "__main__":
    main()
