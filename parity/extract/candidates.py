"""The id lists worth asking an engine about: whole-list hypotheses for its numbering.

Both the gate (which keeps a candidate only when the installed engine, run on it, feeds the
training fc input) and the engines' forward sides (which build the served draft with each)
ask for the same candidates."""

from __future__ import annotations

from ..contract import Tap


def candidate_id_lists(fc: tuple[Tap | None, ...]) -> list[list[int]]:
    """Whole-list hypotheses for the engine's numbering: the training layers shifted by -1, 0, +1.

    Engines apply one rule to the whole list (sometimes depending on its first id), so
    uniform shifts cover the conventions seen so far; each is tested on the engine itself.
    """
    if any(t is None or not t.is_plain_stream() for t in fc):
        return []
    out: list[list[int]] = []
    for shift in (-1, 0, 1):
        ids = [t.layer + shift for t in fc]
        if min(ids) >= -1 and ids not in out:
            out.append(ids)
    return out


__all__ = ["candidate_id_lists"]
