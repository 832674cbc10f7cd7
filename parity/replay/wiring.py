"""Wirings: which dump slots, in which order, are concatenated into the draft's fc input.

A dump holds L states (its layout, e.g. [h0, h2, h5, h8]); a draft's fc reads k of them.
The training data path fixes one wiring (speculators: the first L-1 slots), the engine
another (the states its capture hooks hand over). When they differ, replay scores both;
the search scores every ordered choice of k slots out of L, so a draft's own weights say
which wiring it was trained on.
"""

from __future__ import annotations

from itertools import combinations, permutations
from math import perm

from ..contract.tap import Tap

# Above this many ordered candidates, search ascending subsets, then reorder the best.
SEARCH_LIMIT = 120
REORDER_TOP = 3


def slots_of(taps: list[Tap | None], layout: list[Tap]) -> tuple[int, ...] | None:
    """The dump slots that hold `taps`, in order; None when any is not in the dump."""
    out = []
    for tap in taps:
        if tap is None or tap not in layout:
            return None
        out.append(layout.index(tap))
    return tuple(out)


def missing_taps(taps: list[Tap | None], layout: list[Tap]) -> list[str]:
    return [t.name for t in taps if t is not None and t not in layout]


def search_space(num_slots: int, k: int) -> list[tuple[int, ...]]:
    """Every ordered choice of k of the dump's slots, when there are at most SEARCH_LIMIT."""
    if k > num_slots:
        return []
    if perm(num_slots, k) <= SEARCH_LIMIT:
        return list(permutations(range(num_slots), k))
    return list(combinations(range(num_slots), k))


def reorderings(best: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Second stage of a large search: every order of the top ascending subsets."""
    out: list[tuple[int, ...]] = []
    for subset in best[:REORDER_TOP]:
        out += [p for p in permutations(sorted(subset)) if p not in out]
    return out
