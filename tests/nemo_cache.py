"""The manifest of an offline cache as NVIDIA NeMo Automodel's `precompute_eagle3` writes it, for a
bundled target (run in parity's NeMo Automodel environment): its own `eagle3_cache.write_manifest`
with the fields its precompute records, the ids given as its target class takes them. No shards:
parity reads the manifest and runs the path itself on its own tokens.

    python tests/nemo_cache.py TARGET_DIR OUT_DIR IDS      (IDS: e.g. 5,1,3)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    from nemo_automodel.components.datasets.llm.eagle3_cache import write_manifest

    target_dir, out, ids = sys.argv[1], sys.argv[2], [int(i) for i in sys.argv[3].split(",")]
    config = json.loads((Path(target_dir) / "config.json").read_text())
    vocab, width = config["vocab_size"], config["hidden_size"]
    write_manifest(out, {
        "target_model": target_dir, "target_vocab_size": vocab, "draft_vocab_size": vocab, "seq_length": 8,
        "dtype": "bf16", "num_samples": 0, "shard_size": 256, "target_probs_topk": 0,
        "aux_hidden_dim": width * len(ids), "aux_layer_ids": ids, "selected_token_ids": list(range(vocab)),
        "input_data": "parity-test", "split": "train", "shuffle_seed": 0,
        "mask_reasoning_content": False, "mask_generation_prompt": False})


if __name__ == "__main__":
    main()
