"""Drafts exported by NVIDIA ModelOpt's own exporter for a bundled target (run in parity's ModelOpt
environment): a seeded transformers model of the target converted by ModelOpt to its EAGLE-3
training model (the ids given, else its default; the draft's widths given) and exported with
`export_speculative_decoding`, untrained (its weights are not what parity checks).

    python tests/modelopt_export.py TARGET_DIR '[{"out": DIR, "ids": [5, 1, 3] | null,
        "arch": {...}, "export_rope_scaling": {...} (absent: the release's default)}, ...]'
"""

from __future__ import annotations

import json
import sys

import torch


def export(target_dir: str, spec: dict) -> None:
    import modelopt.torch.speculative as mtsp
    from modelopt.torch.export import export_speculative_decoding
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(target_dir), dtype=torch.float32)
    arch = dict(spec.get("arch", {}))
    if spec.get("ids") is not None:
        arch["eagle_aux_hidden_state_layer_ids"] = spec["ids"]
    config = {"eagle_decoder_type": "llama", "eagle_use_torch_compile": False, "eagle_architecture_config": arch}
    if "export_rope_scaling" in spec:
        config["eagle_export_rope_scaling"] = spec["export_rope_scaling"]
    export_speculative_decoding(mtsp.convert(model, [("eagle", config)]), export_dir=spec["out"])


if __name__ == "__main__":
    for one in json.loads(sys.argv[2]):
        export(sys.argv[1], one)
