"""Score a trained draft under several wirings with speculators' own data path, model and metrics.

    python -m parity.replay.probe  < request.json      (run inside a speculators environment)

Request: {"draft_dir", "verifier_dir", "data_dir", "wirings": [[slot, ...], ...], "steps",
"samples" (null: all), "batch_tokens"}. A wiring lists the dump slots whose states are
concatenated into the fc input, in order.

For each sample, speculators' `ArrowDataset` reads the dump exactly as training does (its
default file transfer; `hidden_states` = the first L-1 slots flattened, `verifier_last_
hidden_states` = slot L-1). The training wiring is that item untouched. Another wiring
re-selects the fc input from the same L slots, and nothing else: the loss target, tokens,
mask and positions stay as the data path made them. Then speculators' `CollateFn` with
eagle3's `shift_batch` packs the samples as the trainer does, and `Eagle3DraftModel`
(from_pretrained, sdpa attention, the verifier's norm and lm_head for the target) runs
`steps` TTT steps with the eager loss, returning speculators' own metrics:
`full_acc_k` = fraction of positions whose drafts at steps 0..k all equal the target's
argmax (teacher forcing), `cond_acc_k` = step k's accuracy where steps 0..k-1 were right.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from ..contract.reply import reply_header
from ..envs import reply_over_stdio
from .reply import ReplayReply


def load_draft(draft_dir: str, verifier_dir: str):
    from speculators.models.eagle3 import Eagle3DraftModel, Eagle3SpeculatorConfig

    config = Eagle3SpeculatorConfig.from_pretrained(draft_dir)
    config.transformer_layer_config._attn_implementation = "sdpa"  # noqa: SLF001
    config.speculators_config.verifier.name_or_path = verifier_dir
    model = Eagle3DraftModel.from_pretrained(draft_dir, config=config)
    # the verifier's norm + lm_head give the loss target; an embedding the checkpoint does
    # not hold (frozen in training) comes from the verifier too, as training loads it
    model.load_verifier_weights()
    for name in ("embed_tokens", "lm_head", "verifier_lm_head", "verifier_norm"):
        weight = getattr(model, name).weight
        if weight.isnan().any():
            raise RuntimeError(f"{name} is still unset (NaN) after load_verifier_weights: the verifier "
                               f"{verifier_dir} does not provide it")
    return model.float().eval()


def rewire(item: dict, slots: list[int], width: int) -> dict:
    """The data path's item with the fc input re-selected from the dump's L slots."""
    dumped = list(item["hidden_states"].split(width, dim=-1)) + [item["verifier_last_hidden_states"]]
    return {**item, "hidden_states": torch.cat([dumped[s] for s in slots], dim=-1)}  # [T, k*H]


def batches(items: list[dict], budget: int) -> list[list[dict]]:
    """Greedy packing into at most `budget` tokens per batch (one sample per batch at least)."""
    out: list[list[dict]] = [[]]
    used = 0
    for item in items:
        n = int(item["input_ids"].shape[0])
        if out[-1] and used + n > budget:
            out.append([])
            used = 0
        out[-1].append(item)
        used += n
    return out


def score(model, items: list[dict], slots: list[int], width: int, steps: int, budget: int,
          loss_config) -> dict[str, Any]:
    from speculators.models.eagle3.data import shift_batch
    from speculators.train.data import CollateFn

    sums: dict[str, float] = {}
    for group in batches(items, budget):
        wired = [rewire(item, slots, width) for item in group]
        tokens = sum(int(w["input_ids"].shape[0]) for w in wired)
        collate = CollateFn(max_len=tokens, hidden_size=width, num_target_layers=len(slots),
                            dtype=torch.float32, preprocess=shift_batch)
        batch = collate(wired)
        with torch.no_grad():
            _, _, metrics = model(
                hidden_states=batch["hidden_states"], input_ids=batch["input_ids"],
                document_ids=batch["document_ids"], position_ids=batch["position_ids"],
                loss_mask=batch["loss_mask"],
                verifier_last_hidden_states=batch["verifier_last_hidden_states"],
                ttt_steps=steps, loss_config=loss_config)
        for key, value in metrics.items():
            sums[key] = sums.get(key, 0.0) + float(value)
    full = [sums[f"full_acc_{k}_sum"] / max(sums[f"full_acc_{k}_total"], 1.0) for k in range(steps)]
    cond = [sums[f"cond_acc_{k}_sum"] / max(sums[f"cond_acc_{k}_total"], 1.0) for k in range(steps)]
    return {"slots": slots, "full_acc": full, "cond_acc": cond,
            "positions": [int(sums[f"full_acc_{k}_total"]) for k in range(steps)],
            "loss": sums.get("loss_sum", 0.0) / max(sums.get("loss_total", 1.0), 1.0)}


def warm() -> None:
    """parity.forkserver: the imports of `run`, before any request; nothing is computed."""
    import importlib

    for name in ("speculators", "datasets", "speculators.losses", "speculators.train.data",
                 "speculators.models.eagle3", "speculators.models.eagle3.data"):
        importlib.import_module(name)


def run(req: dict) -> dict[str, Any]:
    from importlib import metadata

    t0 = time.perf_counter()
    import datasets
    from speculators.losses import resolve_loss_config
    from speculators.train.data import ArrowDataset

    getattr(datasets, "disable_progress_bars", lambda: None)()
    torch.manual_seed(0)
    timings = {"import_s": time.perf_counter() - t0}
    t1 = time.perf_counter()
    model = load_draft(req["draft_dir"], req["verifier_dir"])
    width = int(model.config.target_hidden_size or model.config.transformer_layer_config.hidden_size)
    dataset = ArrowDataset(max_len=10**9, datapath=req["data_dir"], on_missing="raise",
                           hidden_states_dtype=torch.float32)
    n = len(dataset) if req.get("samples") is None else min(int(req["samples"]), len(dataset))
    items = []
    for i in range(n):
        item = dataset[i]
        if type(item).__name__ == "SampleUnavailable":
            raise RuntimeError(f"speculators' ArrowDataset could not read sample {i}: {item!r}")
        items.append(item)
    timings["load_s"] = time.perf_counter() - t1
    dumped_slots = items[0]["hidden_states"].shape[-1] // width + 1
    loss_config = resolve_loss_config("kl_div", "eager")  # the fused default needs Triton
    t2 = time.perf_counter()
    scores = [score(model, items, list(w), width, int(req.get("steps", 3)),
                    int(req.get("batch_tokens", 4096)), loss_config) for w in req["wirings"]]
    timings["score_s"] = time.perf_counter() - t2
    timings["per_wiring_s"] = timings["score_s"] / max(len(scores), 1)
    return {**reply_header(metadata.version("speculators")), "samples": n,
            "dumped_slots": dumped_slots, "hidden_size": width,
            "fc_slots_expected": int(model.fc.in_features // width),
            "draft_ids": list(model.config.eagle_aux_hidden_state_layer_ids or []),
            "scores": scores, "timings": timings}


def main() -> None:
    reply_over_stdio(ReplayReply.checked(run))


if __name__ == "__main__":
    raise SystemExit(main())
