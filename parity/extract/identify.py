"""Name a captured tensor by numerical identity with the reference's canonical states."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..contract.tap import Tap

MATCH_RTOL = 1e-3  # fp32 engine vs transformers: seen <= 4e-5 (MoE, yarn rope); distinct states differ by > 1e-1
AMBIGUITY_RATIO = 100.0  # the runner-up must be this much further away than the match


@dataclass(frozen=True)
class Identification:
    tap: Tap | None  # None: no candidate within MATCH_RTOL, or ambiguous
    rel_err: float  # to the best candidate
    best: Tap  # the nearest candidate, matched or not
    runner_up: Tap | None
    runner_up_err: float
    ambiguous: bool


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    return float((x - ref).norm() / ref.norm().clamp_min(1e-12))


def identify(x: torch.Tensor, candidates: dict[Tap, torch.Tensor]) -> Identification:
    """x [T, H] against {tap: [T, H]}: the unique candidate within MATCH_RTOL, if any."""
    scored = sorted(((rel_err(x, ref), tap) for tap, ref in candidates.items()
                     if ref.shape == x.shape), key=lambda s: s[0])
    if not scored:
        raise ValueError(f"no reference state has the captured shape {tuple(x.shape)}")
    (err, best), rest = scored[0], scored[1:]
    runner_err, runner = (rest[0] if rest else (float("inf"), None))
    ambiguous = err <= MATCH_RTOL and runner_err <= max(err * AMBIGUITY_RATIO, MATCH_RTOL)
    tap = best if err <= MATCH_RTOL and not ambiguous else None
    return Identification(tap, err, best, runner, runner_err, ambiguous)
