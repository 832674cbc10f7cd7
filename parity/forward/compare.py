"""Position-aligned comparison of the two paths' stage tensors; the first stage that diverged.

Row alignment (both sides name row t the same way, see the trainer's / the engine's forward module):
- training, after `shift_batch`: row t = (input_ids[t+1], hidden_states[t]), T-1 rows;
  TTT step k pads the last k rows (token 0), so step k has T-1-k valid rows;
- serving, SGLang's draft prefill: row t = (input_ids[t+1], aux[t]), T rows (the last
  feeds the target's own next token, which training never sees); step k >= 1 runs rows
  t with t+1+k <= T.
So rows 0 .. T-2-k are compared at step k. Positions differ by one (training's
position_ids start at 1 after shift_batch, SGLang's at 0); RoPE sees only differences.

Stages, in the order a divergence propagates (the first failing one is reported):
  fc_input       the concatenated aux states the fc reads (step 0 only)
  fc_output      the draft state entering layer 0: fc output at step 0 (after any
                 pre-fc norms), the state fed back from the previous step at steps >= 1
  embeddings     the token embeddings entering layer 0
  layer_output   the last decoder layer's output (pre-norm residual stream)
  logits         the draft-vocabulary logits
  vocab_mapping  the target token each draft index is proposed as (d2t), and the
                 top-1 target token per position
"""

from __future__ import annotations

from typing import Any

import torch
from pydantic import BaseModel, Field

from ..verdict import Verdict
from .positions import PositionPlan
from .tolerances import Tolerances

STAGES = ("fc_input", "fc_output", "embeddings", "layer_output", "logits", "vocab_mapping")
STAGE_WORDS = {
    "fc_input": "fc input (the aux hidden states concatenated)",
    "fc_output": "fc output / draft state entering the layer",
    "embeddings": "token embeddings entering the layer",
    "layer_output": "decoder layer output",
    "logits": "draft logits",
    "vocab_mapping": "draft -> target vocabulary mapping",
}


class GroupDiff(BaseModel):
    group: str = Field(description="The position group: 'within' the positions the draft declares, or "
                                   "'past KEY VALUE' (parity.forward.positions).")
    rows: int = Field(description="Rows of the stage whose position at this step is in the group.")
    positions: list[int] = Field(description="Their serving positions at this step.")
    max_abs: float = Field(description="max |training - serving| over those rows.")
    max_rel: float = Field(description="max_abs over max |training| of those rows.")
    ok: bool = Field(description="max_abs within the stage's bound (and, for logits, KL within kl_max).")


class StageDiff(BaseModel):
    step: int
    stage: str
    rows: int = Field(description="Positions compared.")
    ok: bool
    why: str | None = Field(default=None, description="Why it failed, in words.")
    max_abs: float | None = None
    tol: float | None = Field(default=None, description="The bound max_abs was held to.")
    ref_max: float | None = Field(default=None, description="max |training| of the stage.")
    per_row_max_abs: list[float] = Field(default_factory=list)
    top1: float | None = Field(default=None, description="Fraction of positions whose argmax agrees.")
    near_ties: int | None = Field(default=None, description="Positions whose argmaxes differ but whose "
                                  "training logits for the two tokens are within 2*logits_atol: "
                                  "rounding may order them either way, so they are not counted.")
    kl_max: float | None = None
    kl_mean: float | None = None
    per_row_kl: list[float] = Field(default_factory=list)
    mismatched: int | None = Field(default=None, description="vocab_mapping: draft ids mapped differently.")
    groups: list[GroupDiff] = Field(default_factory=list, description="The same difference per position "
                                    "group (rows within / past each declared position); empty when the "
                                    "rows ran at 0..T-1 only.")


class Divergence(BaseModel):
    step: int
    stage: str
    message: str


class ForwardResult(BaseModel):
    name: str
    verdict: Verdict = Field(
        description="'parity', 'drift', 'unservable' (the engine cannot load the served draft; exit 1 as a "
        "drift) or 'error' (the comparison could not run).")
    dtype: str
    tolerances: dict[str, Any]
    first_divergence: Divergence | None = None
    stages: list[StageDiff] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    error: str | None = None
    training: dict[str, Any] = Field(default_factory=dict)
    serving: dict[str, Any] = Field(default_factory=dict)

    def stage(self, step: int, stage: str) -> StageDiff | None:
        return next((s for s in self.stages if s.step == step and s.stage == stage), None)


def _state_diff(step: int, stage: str, a: torch.Tensor, b: torch.Tensor, tol: Tolerances) -> StageDiff:
    rows = min(a.shape[0], b.shape[0])
    if a.shape[1:] != b.shape[1:]:
        return StageDiff(step=step, stage=stage, rows=rows, ok=False,
                         why=f"shapes differ: training {list(a.shape[1:])}, serving {list(b.shape[1:])}"
                             + (f" ({a.shape[-1] // b.shape[-1] if b.shape[-1] else '?'}x width)"
                                if stage == "fc_input" else ""))
    a, b = a[:rows].double(), b[:rows].double()
    diff = (a - b).abs()
    ref = float(a.abs().max()) if a.numel() else 0.0
    bound = tol.state_atol + tol.state_rtol * ref
    worst = float(diff.max()) if diff.numel() else 0.0
    ok = worst <= bound
    return StageDiff(step=step, stage=stage, rows=rows, ok=ok, max_abs=worst, tol=bound, ref_max=ref,
                     per_row_max_abs=diff.amax(dim=-1).tolist(),
                     why=None if ok else f"max |diff| {worst:.3g} > {bound:.3g} "
                                         f"({worst / max(ref, 1e-30):.1%} of the state's magnitude)")


def _top1(a: torch.Tensor, b: torch.Tensor, tol: Tolerances) -> tuple[torch.Tensor, torch.Tensor]:
    """(argmax agrees, argmax differs but the training logits of the two tokens are a near-tie)."""
    ia, ib = a.argmax(-1), b.argmax(-1)
    agree = ia == ib
    gap = (a.gather(-1, ia[:, None]) - a.gather(-1, ib[:, None]))[:, 0].abs()
    return agree, ~agree & (gap <= 2 * tol.logits_atol)


def _logits_diff(step: int, a: torch.Tensor, b: torch.Tensor, tol: Tolerances) -> StageDiff:
    rows = min(a.shape[0], b.shape[0])
    if a.shape[1:] != b.shape[1:]:
        return StageDiff(step=step, stage="logits", rows=rows, ok=False,
                         why=f"vocabulary sizes differ: training {a.shape[-1]}, serving {b.shape[-1]}")
    a, b = a[:rows].double(), b[:rows].double()
    diff = (a - b).abs()
    logp, logq = torch.log_softmax(a, -1), torch.log_softmax(b, -1)
    kl = (logp.exp() * (logp - logq)).sum(-1).clamp_min(0.0)
    agree, ties = _top1(a, b, tol)
    top1 = float(agree.double().mean()) if rows else 1.0
    decisive = float((agree | ties).double().mean()) if rows else 1.0
    worst = float(diff.max()) if diff.numel() else 0.0
    problems = []
    if worst > tol.logits_atol:
        problems.append(f"max |diff| {worst:.3g} > {tol.logits_atol:.3g}")
    if rows and float(kl.max()) > tol.kl_max:
        problems.append(f"max KL {float(kl.max()):.3g} > {tol.kl_max:.3g}")
    if decisive < tol.top1_min:
        problems.append(f"top-1 agreement {top1:.1%} < {tol.top1_min:.0%}")
    return StageDiff(step=step, stage="logits", rows=rows, ok=not problems, max_abs=worst,
                     tol=tol.logits_atol, ref_max=float(a.abs().max()) if a.numel() else 0.0,
                     per_row_max_abs=diff.amax(-1).tolist(), top1=top1, near_ties=int(ties.sum()),
                     kl_max=float(kl.max()) if rows else 0.0, kl_mean=float(kl.mean()) if rows else 0.0,
                     per_row_kl=kl.tolist(), why="; ".join(problems) or None)


def _vocab_diff(step: int, map_a: torch.Tensor, map_b: torch.Tensor, logits_a: torch.Tensor,
                logits_b: torch.Tensor, tol: Tolerances) -> StageDiff:
    rows = min(logits_a.shape[0], logits_b.shape[0])
    if map_a.shape != map_b.shape:
        return StageDiff(step=step, stage="vocab_mapping", rows=rows, ok=False,
                         why=f"mapping sizes differ: training {map_a.shape[0]}, serving {map_b.shape[0]}")
    mismatched = int((map_a != map_b).sum())
    la, lb = logits_a[:rows].double(), logits_b[:rows].double()
    ids_a = map_a[la.argmax(-1)]
    ids_b = map_b[lb.argmax(-1)] if lb.shape[-1] == map_b.shape[0] else None
    top1 = decisive = None
    if ids_b is not None and rows:
        same = ids_a == ids_b
        _, ties = _top1(la, lb, tol) if la.shape == lb.shape else (None, torch.zeros_like(same))
        top1, decisive = float(same.double().mean()), float((same | ties).double().mean())
    problems = []
    if mismatched:
        examples = [(d, int(map_a[d]), int(map_b[d])) for d in
                    torch.nonzero(map_a != map_b).flatten()[:3].tolist()]
        problems.append(f"{mismatched} of {map_a.shape[0]} draft ids map to another target token "
                        f"(e.g. " + ", ".join(f"draft {d}: trained as {x}, served as {y}"
                                                for d, x, y in examples) + ")")
    if decisive is not None and decisive < tol.top1_min:
        problems.append(f"top-1 target token agrees at {top1:.1%} of positions")
    return StageDiff(step=step, stage="vocab_mapping", rows=rows, ok=not problems,
                     max_abs=float((map_a - map_b).abs().max()) if map_a.numel() else 0.0, tol=0.0,
                     top1=top1, mismatched=mismatched, why="; ".join(problems) or None)


def _groups(d: StageDiff, a: torch.Tensor, tol: Tolerances, plan: PositionPlan | None) -> StageDiff:
    """`d` with its difference split by position group (its per-row maxima, `a` the training side)."""
    if plan is None or not plan.bounds or not d.per_row_max_abs:
        return d
    out = []
    for group, rows in plan.rows_by_group(len(d.per_row_max_abs), d.step).items():
        worst = max(d.per_row_max_abs[r] for r in rows)
        ref = float(a[rows].double().abs().max())
        ok = worst <= (d.tol if d.tol is not None else float("inf"))
        if d.stage == "logits":
            ok = ok and max(d.per_row_kl[r] for r in rows) <= tol.kl_max
        out.append(GroupDiff(group=group, rows=len(rows), positions=[plan.positions[r] + d.step for r in rows],
                             max_abs=worst, max_rel=worst / max(ref, 1e-30), ok=ok))
    order = plan.groups()
    d.groups = sorted(out, key=lambda g: order.index(g.group))
    return d


def by_group(d: StageDiff) -> str:
    """'within, near 0: 3.1e-07; past max_position_embeddings 512: 0.42' (max |diff| per group)."""
    return "; ".join(f"{g.group}: {g.max_abs:.2g}" for g in d.groups)


def compare(name: str, train: dict[str, torch.Tensor], serve: dict[str, torch.Tensor], steps: int,
            tol: Tolerances, plan: PositionPlan | None = None) -> tuple[list[StageDiff], Divergence | None]:
    """Compare one case's stage tensors (keys 'k/stage' and 'vocab_map'); the first divergence.
    With a position `plan`, each stage's difference is also given per position group."""
    out: list[StageDiff] = []
    for k in range(steps):
        for stage in STAGES:
            key = f"{k}/{stage}"
            if stage == "vocab_mapping":
                if f"{k}/logits" in train and f"{k}/logits" in serve:
                    out.append(_vocab_diff(k, train["vocab_map"], serve["vocab_map"],
                                           train[f"{k}/logits"], serve[f"{k}/logits"], tol))
                continue
            if key not in train and key not in serve:
                continue
            if key not in train or key not in serve:
                side = "training" if key not in train else "serving"
                out.append(StageDiff(step=k, stage=stage, rows=0, ok=False,
                                     why=f"the {side} path produced no {stage} at step {k}"))
                continue
            if stage == "logits":
                out.append(_groups(_logits_diff(k, train[key], serve[key], tol), train[key], tol, plan))
            else:
                out.append(_groups(_state_diff(k, stage, train[key], serve[key], tol), train[key], tol, plan))
    first = next((s for s in out if not s.ok), None)
    div = None if first is None else Divergence(
        step=first.step, stage=first.stage,
        message=f"step {first.step}, {STAGE_WORDS[first.stage]}: {first.why}"
                + (f" (max |diff| by position: {by_group(first)})" if first.groups else ""))
    return out, div
