"""`parity forward`'s training path, run with the installed speculators: tokens -> dump -> data path -> draft.

    python -m parity.extract.trainers.speculators.forward_side  < request.json

The trainer's `FORWARD_MODULE`: parity.forward runs it for the training side (the serving
side is the engine's), so the forward never names a trainer's classes itself.

Per variant (one trained draft directory, one dump layout):
1. the target's hidden states as data generation dumps them: the tiny seeded transformers
   target (same weights as the serving side builds) run on the tokens, the residual-stream
   states of the dump layout stacked into `hidden_states` [T, L, H] with `token_ids`;
2. speculators' own data path: the arrow directory + `hidden_states/hs_0.safetensors`
   read back by `ArrowDataset` (its default file transfer), then `CollateFn` with
   eagle3's `shift_batch`, exactly as the trainer wires them;
3. speculators' own `Eagle3DraftModel` (loaded with its `from_pretrained`, sdpa attention)
   run on that batch (with `"positions"` in the variant, the batch's position_ids moved to
   those positions, parity.forward.positions: its rotary module computes them itself) for `steps` TTT steps without a loss target (0.9's loss calls a
   Triton kernel that cannot run on a CPU); the logits are taken from `lm_head` by hooks.

The embedding is the verifier's, loaded by speculators' own `load_verifier_weights` the
way training builds a draft (`from_training_args`: NaN embedding -> the verifier's); with
`"embedding": "checkpoint"` the checkpoint's own `embed_tokens` is kept instead.

Hooks record, per TTT step: `embeddings` and `fc_output` (the two halves layer 0 receives:
the token embedding, and the draft state = fc output at step 0, the fed-back state later),
`layer_output` (last decoder layer, pre-norm), `logits` (draft vocabulary). Step 0 also
records `fc_input` (the concatenated aux states the fc reads). Rows are the trainer's rows
after `shift_batch`: row t = (input_ids[t+1], hidden_states[t]).

Tensors go to the safetensors file named in the request; the reply (last stdout line)
is JSON metadata. Bare mode (`"bare": true`) runs the same models and forwards without
hooks or outputs: the benchmark's "forwards alone".
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from ....contract.reply import reply_header
from ....contract.tap import Tap
from ....envs import reply_over_stdio
from ...datagen_target import data_generation_target
from ...forward_variants import run_variants
from ...reference import candidate_states
from ...shrink import shrink_config
from .reply import SpeculatorsForwardReply

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def tiny_target_dir(real: dict, work: Path) -> Path:
    out = work / "target"
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(shrink_config(real)))
    return out


def write_sample(data_path: Path, tokens: torch.Tensor, dump: torch.Tensor) -> None:
    """The arrow dataset row and the hidden-states file, as speculators' data generation writes them."""
    import datasets
    from safetensors.torch import save_file

    getattr(datasets, "disable_progress_bars", lambda: None)()
    t = tokens.shape[0]
    ds = datasets.Dataset.from_dict({"input_ids": [tokens.tolist()], "loss_mask": [[1] * t],
                                     "seq_len": [t]})
    ds.set_format(type="torch")
    ds.save_to_disk(str(data_path))
    (data_path / "hidden_states").mkdir()
    save_file({"hidden_states": dump.contiguous(), "token_ids": tokens.contiguous()},
              str(data_path / "hidden_states" / "hs_0.safetensors"))


def trainer_batch(data_path: Path, seq_len: int, hidden: int, num_slots: int,
                  dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """What the trainer hands the model: ArrowDataset -> CollateFn(preprocess=shift_batch)."""
    from speculators.models.eagle3.data import shift_batch
    from speculators.train.data import ArrowDataset, CollateFn

    dataset = ArrowDataset(max_len=seq_len, datapath=str(data_path), on_missing="raise",
                           hidden_states_dtype=dtype)
    item = dataset[0]
    if type(item).__name__ == "SampleUnavailable":
        raise RuntimeError(f"speculators' ArrowDataset returned no sample: {item!r}")
    collate = CollateFn(max_len=seq_len - 1, hidden_size=hidden, num_target_layers=num_slots - 1,
                        dtype=dtype, preprocess=shift_batch)
    return collate([item])


def load_draft(draft_dir: str, target_dir: Path, embedding: str, dtype: torch.dtype):
    from speculators.models.eagle3 import Eagle3DraftModel, Eagle3SpeculatorConfig

    config = Eagle3SpeculatorConfig.from_pretrained(draft_dir)
    config.transformer_layer_config._attn_implementation = "sdpa"  # noqa: SLF001
    # The verifier a trained draft names (0.9's from_pretrained reads it unconditionally:
    # a draft saved with verifier name_or_path None cannot be loaded at all).
    config.speculators_config.verifier.name_or_path = str(target_dir)
    model = Eagle3DraftModel.from_pretrained(draft_dir, config=config).eval()
    if embedding == "target":
        # As training builds the draft: an unset (NaN) embedding is filled from the verifier.
        with torch.no_grad():
            model.embed_tokens.weight.fill_(float("nan"))
        model.load_verifier_weights()
    elif embedding != "checkpoint":
        raise ValueError(f"embedding must be 'target' or 'checkpoint', not {embedding!r}")
    return model.to(dtype)


def long_context_positions(position_ids: torch.Tensor, positions: list[int]) -> torch.Tensor:
    """shift_batch's position_ids [1, R] with row t moved to where `positions[t]` (the serving
    numbering, row t at t) places it: its own numbering (one higher) kept, offset by
    positions[t] - t. The model's TTT loop adds one per step itself."""
    rows = position_ids.shape[-1]
    offset = torch.tensor(positions[:rows], dtype=position_ids.dtype) - torch.arange(rows, dtype=position_ids.dtype)
    return position_ids + offset.to(position_ids.device)


class Recorder:
    """Forward hooks that keep each TTT step's stage tensors (rows of the packed batch)."""

    def __init__(self, model):
        self.steps: list[dict[str, torch.Tensor]] = []
        layers = model.layers
        self.hooks = [
            layers[0].register_forward_pre_hook(self._layer_in, with_kwargs=True),
            layers[-1].register_forward_hook(self._layer_out),
            model.lm_head.register_forward_hook(self._logits),
        ]

    def _layer_in(self, module, args, kwargs):
        x = args[0] if args else kwargs["hidden_states"]
        embeds, hidden = x[0].split(x.shape[-1] // 2, dim=-1)
        self.steps.append({"embeddings": embeds.detach().clone(), "fc_output": hidden.detach().clone()})

    def _layer_out(self, module, args, out):
        out = out[0] if isinstance(out, tuple) else out
        self.steps[-1]["layer_output"] = out[0].detach().clone()

    def _logits(self, module, args, out):
        self.steps[-1]["logits"] = out[0].detach().clone()

    def remove(self):
        for h in self.hooks:
            h.remove()


def run_variant(variant: dict, req: dict, hf, target_dir: Path, tokens: torch.Tensor,
                states: dict, work: Path, dtype: torch.dtype, device: str,
                out: dict[str, torch.Tensor]) -> dict[str, Any]:
    name = variant["name"]
    layout = [Tap.parse(t) for t in variant["dump_layout"]]
    dump = torch.stack([states[t] for t in layout], dim=1).to(dtype)  # [T, L, H]
    t_len, num_slots, hidden = dump.shape
    data_path = work / f"data-{name}"
    write_sample(data_path, tokens, dump)
    batch = trainer_batch(data_path, t_len, hidden, num_slots, dtype)
    if variant.get("positions"):  # rows placed as deep in a context as the request says
        batch["position_ids"] = long_context_positions(batch["position_ids"], variant["positions"])
    model = load_draft(variant["draft_dir"], target_dir, variant.get("embedding", "target"), dtype)
    model = model.to(device)
    recorder = None if req.get("bare") else Recorder(model)
    steps = int(req.get("steps", 3))
    started = time.perf_counter()
    with torch.no_grad():
        model(hidden_states=batch["hidden_states"].to(device), input_ids=batch["input_ids"].to(device),
              document_ids=batch["document_ids"].to(device),
              position_ids=batch["position_ids"].to(device),
              loss_mask=batch["loss_mask"].to(device), ttt_steps=steps)
    forward_s = time.perf_counter() - started
    meta: dict[str, Any] = {"rows": int(batch["input_ids"].shape[1]), "forward_s": forward_s,
                            "fc_width": int(batch["hidden_states"].shape[-1])}
    if recorder is None:
        return meta
    recorder.remove()
    rows = meta["rows"]
    out[f"{name}/0/fc_input"] = batch["hidden_states"][0].float().cpu().clone()
    for k, stage in enumerate(recorder.steps):
        valid = rows - k  # teacher forcing pads the last k rows of step k with token 0
        for key, value in stage.items():
            out[f"{name}/{k}/{key}"] = value[:valid].float().cpu()
    d2t = model.d2t
    draft_vocab = model.lm_head.weight.shape[0]
    # speculators' mapping: target id = d + d2t[d] (offsets); no d2t = the same vocabulary
    out[f"{name}/vocab_map"] = (torch.arange(draft_vocab) + d2t.cpu() if d2t is not None
                                else torch.arange(draft_vocab))
    meta["input_ids"] = batch["input_ids"][0].tolist()
    meta["position_ids"] = batch["position_ids"][0].tolist()
    meta["flags"] = {k: bool(getattr(model.config, k)) for k in
                     ("norm_before_fc", "fc_norm", "norm_output", "norm_before_residual")}
    meta["embedding"] = variant.get("embedding", "target")
    meta["dump_layout"] = [t.name for t in layout]
    return meta


def warm() -> None:
    """parity.forkserver: the imports of `run`, before any request; nothing is computed."""
    import importlib

    for name in ("speculators", "datasets", "safetensors.torch", "speculators.models.eagle3",
                 "speculators.models.eagle3.data", "speculators.train.data"):
        importlib.import_module(name)


def run(req: dict) -> dict[str, Any]:
    from importlib import metadata

    t0 = time.perf_counter()
    import speculators  # noqa: F401 - import time is part of the path's cost

    timings = {"import": time.perf_counter() - t0}
    dtype = DTYPES[req.get("dtype", "float32")]
    device = req.get("device", "cpu")
    torch.manual_seed(req.get("seed", 0))
    work = Path(tempfile.mkdtemp(prefix="parity-forward-train-"))
    target_dir = tiny_target_dir(req["target_config"], work)
    t1 = time.perf_counter()
    hf, ref_notes = data_generation_target(str(target_dir), req.get("seed", 0))
    hf.save_pretrained(str(target_dir))  # the verifier the draft's embedding is read from
    tokens = torch.tensor(req["tokens"], dtype=torch.long)
    started = time.perf_counter()
    states = candidate_states(hf, tokens)  # every residual-stream state, by hooks
    timings["target_forward"] = time.perf_counter() - started
    timings["target_build"] = started - t1
    reply: dict[str, Any] = {**reply_header(metadata.version("speculators")), "notes": ref_notes}
    return run_variants(req, reply, lambda variant, out: run_variant(
        variant, req, hf, target_dir, tokens, states, work, dtype, device, out), timings, t0)


def main() -> None:
    reply_over_stdio(SpeculatorsForwardReply.checked(run))


if __name__ == "__main__":
    raise SystemExit(main())
