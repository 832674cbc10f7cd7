"""The replay fixture: a tiny target, its hidden-state dumps, and a draft trained on them.

    python -m parity.replay.fixture OUT      # ~1 min on 2 cores; prints what it measured

Everything comes from seeds, on the CPU, one thread (so a rebuild on the same machine is
byte-identical; another CPU's kernels round differently, see docs/replay.md):

1. a synthetic language: position 0 holds one of `modes` mode tokens; each later token is,
   with probability `follow`, the mode's fixed permutation of the previous token, else a
   uniformly random content token. The next token depends on the current token AND the
   mode, so a draft can only predict it well from the target's hidden states;
2. a tiny Llama target (transformers) trained on it for a few hundred steps;
3. dumps in speculators' format (an arrow dataset of input_ids/loss_mask/seq_len plus
   `hidden_states/hs_{i}.safetensors` with `hidden_states` [T, L, H] bf16 and `token_ids`),
   holding the states of `dump_layout` (residual stream, by hooks on the decoder layers),
   and `token_freq.pt` written by speculators' own counter;
4. a draft trained by speculators' own training entry point (`speculators.train.cli.main`
   with a `TrainConfig` resolved from command-line flags), sdpa attention, eager loss.
   Two CPU shims are installed in this process only: the trainer's local-rank lookup
   answers "cpu" (it would move the model to cuda:0) and `torch.accelerator.synchronize`
   is a no-op when there is no accelerator. speculators itself is not modified.

The dump is [h0, h2, h5, h7] and the trainer reads the first three, [h0, h2, h5], with h7
as the loss target; the draft config records `draft_ids` (1, 4, 6), the dumper's 0-based
numbering of the layers whose outputs are [h2, h5, h7]. That is the born-from case in
miniature (Kimi-K2.5: dump [h0, h3, h31, h59], ids [2, 30, 58]): served as written, SGLang
feeds [h2, h5, h7], a slot shift.

OUT receives `target/` (config + weights), `draft/` (config.json + model.safetensors as
the trainer checkpointed them), `data/` (held-out dumps, the replay's input) and
`BUILD.json` (the recipe, speculators' own validation metrics, wall times, file hashes).
The training dumps are written to a temporary directory and not kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..contract.tap import Tap


@dataclass(frozen=True)
class ReplayRecipe:
    """Everything that determines the fixture (change a field: rebuild, re-commit)."""

    vocab: int = 128
    modes: int = 4  # token ids 0..modes-1 are mode tokens, the rest content
    follow: float = 0.9  # probability that the next token follows the mode's permutation
    seq_len: int = 64
    hidden: int = 64
    layers: int = 8
    target_steps: int = 150
    target_batch: int = 32
    target_lr: float = 3e-3
    train_samples: int = 1024
    eval_samples: int = 32
    dump_layout: tuple[str, ...] = ("h0", "h2", "h5", "h7")
    draft_ids: tuple[int, ...] = (1, 4, 6)
    draft_vocab: int = 64
    draft_epochs: int = 6
    draft_lr: float = 5e-3
    draft_seq_len: int = 512  # tokens packed per training step
    seed: int = 0


# -- 1. the language ------------------------------------------------------------------------


def permutations(r: ReplayRecipe) -> torch.Tensor:
    """[modes, vocab]: perm[m, x] = the token that follows x in mode m (content -> content)."""
    gen = torch.Generator().manual_seed(r.seed)
    content = torch.arange(r.modes, r.vocab)
    perm = torch.arange(r.vocab).repeat(r.modes, 1)
    for m in range(r.modes):
        perm[m, content] = content[torch.randperm(len(content), generator=gen)]
    return perm


def sentences(r: ReplayRecipe, n: int, seed: int) -> torch.Tensor:
    """[n, seq_len] token ids of the synthetic language."""
    gen = torch.Generator().manual_seed(seed)
    perm = permutations(r)
    mode = torch.randint(0, r.modes, (n,), generator=gen)
    out = torch.empty(n, r.seq_len, dtype=torch.long)
    out[:, 0] = mode
    out[:, 1] = torch.randint(r.modes, r.vocab, (n,), generator=gen)
    for t in range(2, r.seq_len):
        follow = torch.rand(n, generator=gen) < r.follow
        noise = torch.randint(r.modes, r.vocab, (n,), generator=gen)
        out[:, t] = torch.where(follow, perm[mode, out[:, t - 1]], noise)
    return out


# -- 2. the target --------------------------------------------------------------------------


def train_target(r: ReplayRecipe):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(r.seed)
    config = LlamaConfig(vocab_size=r.vocab, hidden_size=r.hidden, intermediate_size=2 * r.hidden,
                         num_hidden_layers=r.layers, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=r.hidden // 4, max_position_embeddings=256, rms_norm_eps=1e-5,
                         tie_word_embeddings=False, bos_token_id=None, eos_token_id=None,
                         pad_token_id=None)
    config._attn_implementation = "sdpa"  # noqa: SLF001
    model = LlamaForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=r.target_lr, weight_decay=0.0)
    gen_seed = r.seed + 1000
    losses = []
    for step in range(r.target_steps):
        batch = sentences(r, r.target_batch, gen_seed + step)  # [B, T]
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model.eval(), losses


@torch.no_grad()
def target_accuracy(model, r: ReplayRecipe, tokens: torch.Tensor) -> float:
    """How often the trained target's argmax is the mode's next token (content positions)."""
    perm = permutations(r)
    logits = model(input_ids=tokens).logits[:, 1:-1]  # [N, T-2, V]: predicts tokens 2..T-1
    expected = perm[tokens[:, :1], tokens[:, 1:-1]]  # [N, T-2]
    return (logits.argmax(-1) == expected).float().mean().item()


# -- 3. the dumps ---------------------------------------------------------------------------


@torch.no_grad()
def stream_states(model, tokens: torch.Tensor) -> list[torch.Tensor]:
    """[h0..hN] residual-stream states for a batch: N+1 tensors [B, T, H] (hN pre-norm)."""
    states: dict[int, torch.Tensor] = {}
    inner = model.model
    hooks = [inner.embed_tokens.register_forward_hook(lambda m, a, out: states.__setitem__(0, out))]
    for i, layer in enumerate(inner.layers):
        hooks.append(layer.register_forward_hook(
            lambda m, a, out, i=i: states.__setitem__(i + 1, out[0] if isinstance(out, tuple) else out)))
    try:
        model(input_ids=tokens)
    finally:
        for h in hooks:
            h.remove()
    return [states[k] for k in range(len(inner.layers) + 1)]


def write_dumps(model, tokens: torch.Tensor, layout: list[Tap], out: Path, token_freq: bool) -> None:
    """Write `tokens` [N, T] as speculators' data generation does: arrow rows + hs_{i} files."""
    import datasets
    from datasets.table import InMemoryTable
    from safetensors.torch import save_file

    getattr(datasets, "disable_progress_bars", lambda: None)()
    n, t = tokens.shape
    rows = {"input_ids": tokens.tolist(), "loss_mask": [[1] * t] * n, "seq_len": [t] * n}
    # a fixed fingerprint: from_dict would draw a random one into state.json
    ds = datasets.Dataset(InMemoryTable.from_pydict(rows), fingerprint=f"parity-replay-{n}x{t}")
    ds.set_format(type="torch")
    ds.save_to_disk(str(out))
    (out / "hidden_states").mkdir()
    streams = stream_states(model, tokens)
    dump = torch.stack([streams[tap.layer] for tap in layout], dim=2).to(torch.bfloat16)  # [N, T, L, H]
    for i in range(n):
        save_file({"hidden_states": dump[i].contiguous(), "token_ids": tokens[i].contiguous()},
                  str(out / "hidden_states" / f"hs_{i}.safetensors"))
    if token_freq:
        from speculators.train.vocab_mapping import save_token_frequency_distribution

        save_token_frequency_distribution(datasets.load_from_disk(str(out)).with_format("torch"),
                                          out / "token_freq.pt")


# -- 4. the draft ---------------------------------------------------------------------------


def cpu_shims() -> None:
    """Make speculators' trainer run on a CPU (this process only; speculators untouched)."""
    import speculators.train.trainer as trainer

    trainer.get_local_rank = lambda: "cpu"  # Trainer moves the model and batches to it
    if torch.accelerator.current_accelerator() is None:
        torch.accelerator.synchronize = lambda *a, **k: None  # its step timer syncs


def train_draft(r: ReplayRecipe, workdir: Path) -> tuple[Path, dict]:
    """Run speculators' training entry point in `workdir` (cwd: target/ and train/ there)."""
    from speculators.train.cli import main
    from speculators.train.config import TrainConfig

    argv = [
        "--verifier-name-or-path", "target", "--data-path", "train",
        "--save-path", "checkpoints", "--log-dir", "logs",
        "--speculator-type", "eagle3", "--num-layers", "1", "--draft-arch", "llama",
        "--draft-attn-impl", "sdpa", "--loss-implementation", "eager",
        "--target-layer-ids", *map(str, r.draft_ids), "--draft-vocab-size", str(r.draft_vocab),
        "--no-norm-before-residual", "--mask-token-id", "0", "--hidden-states-dtype", "float32",
        "--hidden-states-backend", "file", "--on-missing", "raise",
        "--total-seq-len", str(r.draft_seq_len), "--num-workers", "0",
        "--optimizer", "adamw", "--lr", str(r.draft_lr), "--epochs", str(r.draft_epochs),
        "--scheduler-type", "none", "--ttt-steps", "3", "--seed", str(r.seed),
        "--train-data-ratio", "0.875", "--log-freq", "1000000",
    ]
    cpu_shims()
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        main(TrainConfig.resolve(argv))
    finally:
        os.chdir(cwd)
    checkpoints = sorted((workdir / "checkpoints").iterdir(), key=lambda p: p.name)
    epochs = [p for p in checkpoints if p.is_dir() and not p.is_symlink() and p.name.isdigit()]
    if not epochs:
        raise RuntimeError(f"speculators' trainer wrote no checkpoint under {workdir / 'checkpoints'}")
    last = max(epochs, key=lambda p: int(p.name))
    # speculators' own validation metrics, as its checkpointer keeps them (best epochs)
    kept = [p for p in (workdir / "checkpoints").glob("*/val_metrics*.json")
            if p.parent.name.isdigit() and not p.parent.is_symlink()]
    val = {p.parent.name: json.loads(p.read_text()) for p in sorted(kept, key=lambda p: int(p.parent.name))}
    return last, {"argv": argv, "val_metrics": val}


# -- the whole build ------------------------------------------------------------------------


def file_hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != "BUILD.json"}


def build(out: Path, r: ReplayRecipe = ReplayRecipe()) -> dict:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    layout = [Tap.parse(t) for t in r.dump_layout]
    out = Path(out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    work = Path(tempfile.mkdtemp(prefix="parity-replay-build-"))
    times: dict[str, float] = {}
    try:
        t0 = time.perf_counter()
        target, losses = train_target(r)
        times["target_train_s"] = time.perf_counter() - t0
        target.save_pretrained(str(out / "target"))
        (out / "target" / "generation_config.json").unlink(missing_ok=True)
        shutil.copytree(out / "target", work / "target")

        t0 = time.perf_counter()
        train_tokens = sentences(r, r.train_samples, r.seed + 1)
        eval_tokens = sentences(r, r.eval_samples, r.seed + 2)
        write_dumps(target, train_tokens, layout, work / "train", token_freq=True)
        write_dumps(target, eval_tokens, layout, out / "data", token_freq=False)
        times["dumps_s"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        checkpoint, training = train_draft(r, work)
        times["draft_train_s"] = time.perf_counter() - t0
        (out / "draft").mkdir()
        for name in ("config.json", "model.safetensors"):
            shutil.copy2(checkpoint / name, out / "draft" / name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    from importlib import metadata

    report = {
        "recipe": asdict(r),
        "versions": {p: metadata.version(p) for p in ("speculators", "torch", "transformers")},
        "target": {"final_loss": round(losses[-1], 4),
                   "next_token_accuracy_eval": round(target_accuracy(target, r, eval_tokens), 4)},
        "draft_training": training,
        "wall_s": {k: round(v, 1) for k, v in times.items()},
        "files": file_hashes(out),
    }
    (out / "BUILD.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m parity.replay.fixture OUT", file=sys.stderr)
        return 2
    report = build(Path(args[0]))
    val = report["draft_training"]["val_metrics"]
    print(json.dumps({"wall_s": report["wall_s"], "target": report["target"],
                      "last_val": val[max(val, key=int)] if val else None}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
