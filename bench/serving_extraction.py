"""Benchmark: one serving extraction of the 61-layer DeepSeek-V3 example, against bare imports.

    .venv/bin/python bench/serving_extraction.py [TARGET_CONFIG]

TARGET_CONFIG defaults to the flat 61-layer DeepSeek-V3 fixture; give
fixtures/targets/kimi-k2.5/config.json for Kimi-K2.5's published wrapper shape (SGLang's
KimiK25ForConditionalGeneration, its one-block vision tower included).

Prints, measured in this one run (machines are noisy; the ratio is what to compare):
  - wall time of one full serving extraction (a fresh probe process, as parity runs it),
  - wall time of a fresh process that only imports the SGLang model modules it needs,
  - their ratio (target <= 3), and the probe's peak resident memory (target <= 3 GiB).

Like for like: the import process runs with the probe's own environment (`child_env`: the
bytecode kept under the environment's `.pycache/` by PYTHONPYCACHEPREFIX, one torch thread,
torch.compile off) and parity on its path, and an untimed import first compiles that bytecode,
so neither timing pays for compiling what the other found compiled. (Timed without the prefix,
the import compiled from source every run and the ratio read 0.4-0.6; like for like it is
about 1.0.)
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

from parity.envs import child_env, parity_on_path, run_module  # noqa: E402

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
    env = child_env(sys.executable)  # what run_module gives the probe: the same bytecode prefix
    with parity_on_path(env) as cwd:
        def bare_import():
            subprocess.run([sys.executable, "-c", IMPORTS], check=True, cwd=cwd, env=env, capture_output=True)

        bare_import()  # untimed: compiles into the prefix whatever is not compiled yet
        imports = timed(bare_import)
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
