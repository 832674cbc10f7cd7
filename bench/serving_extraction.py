"""Benchmark: one serving extraction of the 61-layer DeepSeek-V3 example, against bare imports.

    .venv/bin/python bench/serving_extraction.py [TARGET_CONFIG]

TARGET_CONFIG defaults to the flat 61-layer DeepSeek-V3 fixture; give
fixtures/targets/kimi-k2.5/config.json for Kimi-K2.5's published wrapper shape (SGLang's
KimiK25ForConditionalGeneration, its one-block vision tower included).

Prints, measured in this one run (machines are noisy; the ratio is what to compare):
  - wall time of one full serving extraction (a fresh probe process, as parity runs it),
  - wall time of a fresh process that only imports the SGLang model modules it needs,
  - their ratio (target <= 3), and the probe's peak resident memory (target <= 3 GiB).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from parity.envs import run_module  # noqa: E402

TARGET = ROOT / "fixtures" / "targets" / "deepseek-v3-61l" / "config.json"
DRAFT = ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3"
IMPORTS = ("from parity.extract import standins; standins.install(); "
           "import sglang.srt.models.deepseek_v2, sglang.srt.models.llama_eagle3, "
           "sglang.srt.model_loader.utils, transformers.models.deepseek_v3.modeling_deepseek_v3")


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else TARGET
    request = {"target_config": json.loads(target.read_text()), "draft_dir": str(DRAFT),
               "seq_len": 8, "seed": 0}
    imports = timed(lambda: subprocess.run([sys.executable, "-c", IMPORTS], check=True, cwd=ROOT,
                                           capture_output=True))
    reply = {}
    extraction = timed(lambda: reply.update(run_module(sys.executable, "parity.extract.engines.sglang.probe",
                                                       request)))
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # KiB -> GiB
    fc = [s.get("tap") for s in reply.get("slots", [])]
    print(f"target: {reply.get('model_class', '?')}, 61 layers (tiny widths); served fc {fc}")
    print(f"serving extraction (fresh process): {extraction:6.2f} s")
    print(f"bare import of the model modules:   {imports:6.2f} s")
    print(f"ratio extraction / import:          {extraction / imports:6.2f}  (target <= 3)")
    print(f"peak resident memory of a child:    {peak:6.2f} GiB (target <= 3)")


if __name__ == "__main__":
    main()
