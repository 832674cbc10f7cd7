"""`parity sweep`: every published release of SGLang, vLLM, speculators and SpecForge over a fixed
case set (cases.py), each run in its own environment (run.py), published as docs/releases.md
(parity.report.releases) from releases.json."""

from .cases import CAPTURE_CASES, SERVING_CASES, TRAINING_CASES
from .run import sweep

__all__ = ["CAPTURE_CASES", "SERVING_CASES", "TRAINING_CASES", "sweep"]
