"""A tiny real SpecForge training run's output, written by SpecForge's own trainer and save code on CPU.

    SPECFORGE_PYTHON tests/specforge_run.py OUT TTT_LENGTH

Run with the SpecForge environment's interpreter (tests/test_specforge_trained_depth.py). It
writes, under OUT, a seeded tiny Llama target (config, sharded safetensors: SpecForge's TargetHead
reads the LM head through the index), an EAGLE-3 draft config, two offline feature files of
seeded states (what SpecForge's offline reader lists), and a typed run config with
`training.ttt_length` TTT_LENGTH; then it assembles the run as `specforge train` does for a
single process (`resolve_run`, `init_distributed`, `build_application_run`: the offline
runtime, its Trainer, the eagle3 provider's resume contract) and saves a checkpoint with the
Trainer's own `save_checkpoint` (its controller and CheckpointManager), into OUT/output. Prints
the checkpoint's URI.

What differs from a real run, because a CPU cannot do it:
- no training step: EAGLE-3's loss is a Triton kernel (`core.loss.LogSoftmaxLoss`), GPU-only, so
  the checkpoint is step 0 (the seeded initial draft); what is under test is what the run
  records, not its weights;
- `training.fsdp_sharding` NO_SHARD: SpecForge's own replicated recipe (DDP over gloo), since
  FSDP needs an accelerator;
- `accelerate` (its CLI's set_seed) and `datasets` (imported by its padding collator's module)
  are not in the environment: torch is seeded directly, and `datasets` is a stand-in module
  whose `Dataset` raises if anything uses it (the collator only runs in a training step).
"""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

H, V, T = 64, 256, 12


class StandInUsed(RuntimeError):
    """The run reached the `datasets` stand-in: the path needs the real package."""


class _Dataset:
    def __init__(self, *args, **kwargs):
        raise StandInUsed("datasets.Dataset was used, but datasets is this fixture's stand-in")

    def __init_subclass__(cls, **kwargs):
        raise StandInUsed("datasets.Dataset was subclassed, but datasets is this fixture's stand-in")


def write_inputs(out: Path, ttt_length: int) -> dict:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    target = LlamaConfig(vocab_size=V, hidden_size=H, intermediate_size=128, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         tie_word_embeddings=False, architectures=["LlamaForCausalLM"])
    LlamaForCausalLM(target).save_pretrained(out / "target", max_shard_size="100KB")
    draft = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": H,
             "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
             "vocab_size": V, "draft_vocab_size": V, "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
             "hidden_act": "silu", "rope_theta": 10000.0}
    (out / "draft.json").write_text(json.dumps(draft))
    (out / "features").mkdir()
    for i in range(2):  # SGLang captures in bf16; SpecForge's target head runs in bf16
        torch.save({"input_ids": torch.randint(0, V, (T,)), "loss_mask": torch.ones(T, dtype=torch.long),
                    "hidden_state": torch.randn(1, T, H, dtype=torch.bfloat16),
                    "aux_hidden_state": torch.randn(1, T, 3 * H, dtype=torch.bfloat16)},
                   out / "features" / f"data_{i}.ckpt")
    return {"model": {"target_model_path": str(out / "target"), "draft_model_config": str(out / "draft.json")},
            "data": {"hidden_states_path": str(out / "features"), "max_length": T, "cache_dir": str(out / "cache")},
            "training": {"ttt_length": ttt_length, "max_steps": 1, "save_interval": 1, "attention_backend": "sdpa",
                         "fsdp_sharding": "NO_SHARD"},
            "output_dir": str(out / "output"), "run_id": "tiny"}


def main(out: Path, ttt_length: int) -> str:
    sys.modules.setdefault("datasets", types.ModuleType("datasets"))
    sys.modules["datasets"].Dataset = _Dataset
    os.environ["SPECFORGE_DEVICE"] = "cpu"
    out.mkdir(parents=True, exist_ok=True)
    raw = write_inputs(out, ttt_length)
    (out / "run.json").write_text(json.dumps(raw, indent=2))

    from specforge.application import bind_run, build_application_run, resolve_run
    from specforge.cli import _bootstrap_single_process_env
    from specforge.config import Config
    from specforge.distributed import destroy_distributed, init_distributed

    cfg = Config.model_validate(raw)
    resolved = resolve_run(cfg)
    os.environ["FSDP_SHARDING"] = cfg.training.fsdp_sharding  # as its CLI's _train sets it
    _bootstrap_single_process_env()
    init_distributed(timeout=cfg.training.dist_timeout, tp_size=1, sp_ulysses_size=1, sp_ring_size=1)
    try:
        run = build_application_run(bind_run(resolved.config, resolved.algorithm))
        return run.trainer.save_checkpoint().checkpoint_uri
    finally:
        destroy_distributed()


if __name__ == "__main__":
    print(main(Path(sys.argv[1]), int(sys.argv[2])))
