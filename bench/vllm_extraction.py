"""Benchmark: vLLM's serving extraction of the 61-layer DeepSeek-V3 example against a bare import
of vLLM's model modules, in one run.

    .venv/bin/python bench/vllm_extraction.py [VERSION]     # default 0.34.0 (its environment)

Each figure is a fresh process of the vLLM environment (PARITY_NO_FORKSERVER=1, uncached):
  - the bare import: `import vllm` plus the modules the extraction's family adapter imports
    (config classes, model loader, both runners, the DeepSeek-V2/V3 model code);
  - the extraction: `parity contract serving --engine vllm` on the DeepSeek-V3 61-layer target
    with the Kimi-K2.5 draft config, as `parity check --engine vllm` runs it.
Prints both wall times, their ratio (target <= 3) and the extraction child's peak resident
memory (target <= 3 GiB).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from parity.extract.engines import vllm  # noqa: E402

TARGET = ROOT / "fixtures" / "targets" / "deepseek-v3-61l" / "config.json"
DRAFT = ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3"

BARE = """
import importlib, os
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
from parity.extract.engines.vllm.families import family_for
from importlib import metadata
family = family_for(metadata.version("vllm"))
family.Adapter().platform()
for name in family.IMPORTS + ("vllm.model_executor.models.deepseek_v2",):
    importlib.import_module(name)
"""


def child_peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # KiB on Linux


def main() -> None:
    release = sys.argv[1] if len(sys.argv) > 1 else "0.34.0"
    python = vllm.python(release)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PARITY_NO_CACHE": "1", "PARITY_NO_FORKSERVER": "1",
           "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    subprocess.run([python, "-c", BARE], env=env, check=True, capture_output=True)
    bare = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "parity", "contract", "serving", "--engine", "vllm",
                          "--vllm", release, "--target-config", str(TARGET), "--draft", str(DRAFT), "--json"],
                         env=env, capture_output=True, text=True)
    extraction = time.perf_counter() - t0
    peak = child_peak_gib()
    contract = json.loads(out.stdout) if out.stdout.strip() else {}
    print(f"vLLM {contract.get('provenance', {}).get('version', '?')}, DeepSeek-V3 61 layers (tiny widths)")
    print(f"served fc: {contract.get('fc_input')} (exit {out.returncode})")
    print(f"bare import of vLLM's model modules: {bare:6.1f} s")
    print(f"serving extraction (fresh process):  {extraction:6.1f} s")
    print(f"ratio extraction / import:           {extraction / bare:6.2f}  (target <= 3)")
    print(f"peak resident memory of a child:     {peak:6.2f} GiB  (target <= 3)")


if __name__ == "__main__":
    main()
