"""Name a captured tensor by numerical identity with the reference's canonical states."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..contract.models import FindingKind
from ..contract.tap import Tap
from .child import finding

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


def identify_slots(aux, refs, n, capture, expected, findings) -> list[dict]:
    """Name each H-wide slice of the captured concatenation; pad missing slots with None."""
    h = next(iter(refs.values())).shape[-1]
    width = 0 if aux is None else aux.shape[-1]
    got = width // h
    slots = []
    if got:
        for s in range(got):
            ident = identify(aux[:, s * h:(s + 1) * h].float(), refs)
            slots.append({"tap": ident.tap.name if ident.tap else None, "rel_err": ident.rel_err,
                          "best": ident.best.name, "runner_up": ident.runner_up.name if ident.runner_up else None,
                          "runner_up_err": ident.runner_up_err})
            if ident.tap is None:
                why = ("ambiguous between " + f"{ident.best.name} and {ident.runner_up.name}"
                       if ident.ambiguous else f"nearest is {ident.best.name} at relative error "
                       f"{ident.rel_err:.2e}")
                findings.append(finding(FindingKind.unidentified_state, f"captured slot {s} matches no "
                                        f"canonical state ({why})", "error", slot=s))
    if aux is None:  # the engine raised: name the requested slots it could never fill
        for s, idx in enumerate((capture or [])[:expected]):
            slots.append({"tap": None})
            if not 0 <= idx < n:
                findings.append(finding(FindingKind.not_captured, f"slot {s} asks the engine to capture at layer "
                                        f"index {idx}, which a {n}-layer model never reaches",
                                        "error", slot=s))
        return slots + [{"tap": None}] * (expected - len(slots))
    if got < expected:
        never = [i for i in (capture or []) if not 0 <= i < n]
        where = f"; capture index(es) {never} are never reached in a {n}-layer model" if never else ""
        for s in range(got, expected):
            slots.append({"tap": None})
            findings.append(finding(FindingKind.not_captured, f"slot {s} was requested but the engine captured "
                                    f"only {got} of {expected} states{where}", "error", slot=s))
    return slots


def named_target(x: torch.Tensor, refs: dict[Tap, torch.Tensor], findings: list, what: str = "the loss target") -> dict:
    """The reply's record of the loss target `x` [T, H] named against `refs` (parity.contract.reply.Slot);
    an error finding when it matches no canonical state."""
    ident = identify(x, refs)
    if ident.tap is None:
        findings.append(finding(FindingKind.unidentified_state, f"{what} matches no canonical state (nearest "
                                f"{ident.best.name} at relative error {ident.rel_err:.2e})", "error"))
    return {"tap": ident.tap.name if ident.tap else None, "rel_err": ident.rel_err, "best": ident.best.name}
