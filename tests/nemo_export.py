"""A draft as NVIDIA NeMo Automodel's EAGLE-3 recipe writes it and its `serve_sglang` makes it
servable, for a bundled target (run in parity's NeMo Automodel environment, parity on PYTHONPATH):
the draft its recipe builds (parity.extract.trainers.nemo_automodel.variants.draft), its
config.json as the recipe's checkpointer writes it (`config.to_json_string(use_diff=False)`),
rewritten by `serve_sglang._rewrite_config_for_sglang` (the EAGLE-3 architecture, its real depth).

    python tests/nemo_export.py TARGET_DIR OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch


def main() -> None:
    from nemo_automodel.components.speculative.serve_sglang import _rewrite_config_for_sglang
    from transformers import AutoConfig, AutoModelForCausalLM

    from parity.extract.trainers.nemo_automodel import variants

    target_dir, out = sys.argv[1], Path(sys.argv[2])
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(target_dir), dtype=torch.float32)
    draft, _, _ = variants.draft(model, torch.arange(8)[None])
    out.mkdir(parents=True)
    written = out / "recipe-config.json"
    written.write_text(draft.config.to_json_string(use_diff=False))
    _rewrite_config_for_sglang(written, out / "config.json", "EAGLE3", num_hidden_layers=len(draft.model.layers))
    written.unlink()


if __name__ == "__main__":
    main()
