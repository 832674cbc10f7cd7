"""What the forward sides (the child processes of `parity forward`, one per engine or trainer) do
with the request's variants: run each, keep going on failure."""

from __future__ import annotations

import time
import traceback
from typing import Any, Callable

import torch

from ..contract.reply import reply_header


def serve_variants(req: dict, make_serving: Callable, run_one: Callable) -> dict[str, Any]:
    """An engine's serving side: `make_serving(req, timings)` builds what every variant shares
    (it has `version`, the engine's release, and the target `model`), then
    `run_one(serving, variant, req, out)` per variant (run_variants)."""
    started = time.perf_counter()
    timings: dict[str, float] = {}
    sv = make_serving(req, timings)
    reply: dict[str, Any] = {**reply_header(sv.version),
                             "model_class": f"{type(sv.model).__module__}.{type(sv.model).__name__}"}
    return run_variants(req, reply, lambda variant, out: run_one(sv, variant, req, out), timings, started)


def run_variants(req: dict, reply: dict[str, Any], run_one: Callable[[dict, dict], dict],
                 timings: dict[str, float], started: float) -> dict[str, Any]:
    """`run_one(variant, out)` per variant into reply["variants"]; one failing is reported,
    not fatal. The tensors each side recorded in `out` go to req["out"] (unless "bare")."""
    out: dict[str, torch.Tensor] = {}
    reply["variants"] = {}
    for variant in req["variants"]:
        try:
            reply["variants"][variant["name"]] = run_one(variant, out)
        except Exception as exc:  # noqa: BLE001
            reply["variants"][variant["name"]] = {
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc().strip().splitlines()[-4:]}
    timings["total"] = time.perf_counter() - started
    reply["timings"] = timings
    if not req.get("bare"):
        from safetensors.torch import save_file
        save_file({k: v.contiguous() for k, v in out.items()}, req["out"])
    return reply
