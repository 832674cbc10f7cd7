"""The capture under a parallel layout, child side, engine-agnostic: which ranks parity runs for
the layout a serve command resolves to (`plan`).

"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_RANKS = 4  # the most CPU processes one capture runs (docs/launch.md, "The parallel layout")


@dataclass(frozen=True)
class Plan:
    """The layout parity runs the capture under: `tp` x `pp` ranks, the rank of tensor-parallel
    rank t on pipeline stage s being `tp * s + t` (SGLang's launcher and vLLM's both number them
    so); `stands_for`, where it is smaller than the layout resolved, what stands for what;
    `not_run`, the parts of the layout the capture does not run (said in 'Not checked')."""

    tp: int
    pp: int
    stands_for: tuple[str, ...] = ()
    not_run: tuple[str, ...] = field(default=())

    @property
    def ranks(self) -> int:
        return self.tp * self.pp

    def said(self) -> dict[str, Any]:
        return {"ranks": self.ranks, "tp": self.tp, "pp": self.pp, "stands_for": list(self.stands_for)}


class NotRunnable(Exception):
    """A layout parity's CPU harness does not run (one line naming what; parity's limit, exit 2)."""


def plan(layout: dict, fields: dict[str, str], unrun: dict[str, str] | None = None) -> Plan | None:
    """The ranks to run for `layout` (a ParallelLayout's degrees: tp, pp, dp, attention_dp, ep),
    or None when it is one rank (the capture runs in the probe's own process, as always).
    `fields` names the engine's own field for each degree (for the words); `unrun`: degrees
    above 1 of the engine's own that parity does not run ({field: value words}).

    Tensor parallelism runs over 2 ranks whatever its degree (the same shape: heads and MLP
    split, partial sums all-reduced, every rank of the group running the same capture; parity's
    tiny target has 4 heads); the pipeline runs with every stage the layout has (the engine's
    own partition of the real depth decides which layers each stage holds, so it is never
    shrunk); at most MAX_RANKS processes. Data-parallel replicas each run the same layout: one
    is run, and the rest is said. Data-parallel attention, expert parallelism and the engine's
    `unrun` degrees are not run: NotRunnable, parity's limit."""
    tp, pp = int(layout.get("tp") or 1), int(layout.get("pp") or 1)
    missing = [f"{what} ({fields.get(k, k)} {layout[k]})" for k, what in (("attention_dp", "data-parallel attention"),
                                                                          ("ep", "expert parallelism"))
               if int(layout.get(k) or 1) > 1]
    missing += [f"{name} {value}" for name, value in (unrun or {}).items()]
    if missing:
        raise NotRunnable(f"parity's multi-process capture does not run {' or '.join(missing)}, so the states the "
                          "draft is fed under this layout are not known")
    if tp > 1 and tp % 2:
        raise NotRunnable(f"parity's multi-process capture runs {fields.get('tp', 'tp')} {tp} over 2 ranks only for "
                          "an even degree, the shape 2 ranks stand for")
    tp_run = min(tp, 2)
    if tp_run * pp > MAX_RANKS:
        raise NotRunnable(f"parity's multi-process capture runs at most {MAX_RANKS} processes, and "
                          f"{fields.get('pp', 'pp')} {pp} with {fields.get('tp', 'tp')} {tp} (run as {tp_run}) "
                          f"needs {tp_run * pp}")
    stands_for, not_run = [], []
    if tp_run != tp:
        stands_for.append(f"{fields.get('tp', 'tp')} {tp} run as {tp_run} ranks (tensor parallel of the same shape; "
                          f"parity runs at most {MAX_RANKS} processes)")
        not_run.append(f"{fields.get('tp', 'tp')} {tp} itself: the capture ran tensor parallel over {tp_run} ranks, "
                       f"not {tp}")
    dp = int(layout.get("dp") or 1)
    if dp > 1:
        not_run.append(f"{fields.get('dp', 'dp')} {dp}: {dp} data-parallel replicas of this layout, each with its "
                       "own copy of the target; the capture ran one")
    if tp_run * pp == 1:
        return Plan(1, 1, tuple(stands_for), tuple(not_run)) if not_run else None
    return Plan(tp_run, pp, tuple(stands_for), tuple(not_run))


__all__ = ["MAX_RANKS", "NotRunnable", "Plan", "plan"]
