"""Drafts exported by NVIDIA ModelOpt's own exporter for a bundled target (run in parity's ModelOpt
environment): a seeded transformers model of the target converted by ModelOpt to its EAGLE-3
training model (the ids given, else its default; the draft's widths given) and exported with
its exporter (each by the calls of its release's family, parity.extract.trainers.modelopt.variants), untrained (its weights are not what parity checks).

    python tests/modelopt_export.py TARGET_DIR '[{"out": DIR, "ids": [5, 1, 3] | null,
        "arch": {...}, "export_rope_scaling": {...} (absent: the release's default)}, ...]'
"""

from __future__ import annotations

import json
import sys

import torch


def export(target_dir: str, spec: dict) -> None:
    from importlib import metadata

    from transformers import AutoConfig, AutoModelForCausalLM

    from parity.extract.trainers.modelopt.families import family_for

    family = family_for(metadata.version("nvidia-modelopt"))  # its release's own conversion and exporter calls
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(target_dir)).float()
    model = family.convert(model, spec.get("ids"), dict(spec.get("arch", {})), spec.get("export_rope_scaling"))
    if not family.export(model, spec["out"]):
        raise SystemExit(f"nvidia-modelopt {metadata.version('nvidia-modelopt')} has no exporter of the draft")


if __name__ == "__main__":
    for one in json.loads(sys.argv[2]):
        export(sys.argv[1], one)
