"""What changed between adjacent releases: the cells a reader must look at first."""

from __future__ import annotations

import re
from typing import Any

from .rows import ServingRow, TrainingRow, fix_text


def mark_changes(training: list[TrainingRow], serving: list[ServingRow]) -> None:
    """Set each row's `changed` to what differs from the row of the release before it."""
    _mark(training, _training_cells)
    _mark(serving, _serving_cells)


def _training_cells(row: TrainingRow) -> dict[str, Any]:
    return {"fc": row.fc_input, "target": row.target, "error": row.error, "lock": row.lock_drift}


def _serving_cells(row: ServingRow) -> dict[str, Any]:
    return {"fc": row.fc_input, "capture": row.capture_ids, "error": row.error,
            "verdict": [v.verdict for v in row.verdicts], "fix": fix_text(row), "launch": _launch(row),
            "unjudged": row.launch is not None and row.launch.resolved is None}


def _launch(row: ServingRow) -> str | None:
    """The launch cell as a change reads it: its outcome, and on a drift what drifts."""
    cell = row.launch
    if cell is None:
        return None
    if cell.resolved is None:
        return "refused" if cell.refused is not None else "not resolved"
    return cell.text()


def _own_release_as_x(error: str | None, version: str) -> str | None:
    """The error with the row's own release number written X: the same refusal under two
    releases is no change."""
    if error is None:
        return None
    return re.sub(rf"(?<![\w.]){re.escape(version)}(?!\w|\.\d)", "X", error)


def _mark(rows: list, cells) -> None:
    for prev, row in zip(rows, rows[1:]):
        a, b = cells(prev), cells(row)
        changed = []
        if not a["error"] and b["error"]:
            changed.append("now cannot be extracted")
        elif a["error"] and not b["error"]:
            changed.append("extractable again")
        elif _own_release_as_x(a["error"], prev.version) != _own_release_as_x(b["error"], row.version):
            changed.append("cannot be extracted, for another reason")
        if not (a["error"] or b["error"]) and (a.get("unjudged") or b.get("unjudged")):
            # the serve arguments refused (or not resolvable) under one of them: no cell but the launch's
            if a["launch"] != b["launch"]:
                changed.append(f"launch {a['launch']} -> {b['launch']}")
        elif not (a["error"] or b["error"]):
            changed += _slot_changes(a["fc"], b["fc"])
            for k in b:
                if k not in ("fc", "error", "unjudged") and a[k] != b[k]:
                    changed.append(f"{k} {_short(a[k])} -> {_short(b[k])}")
        row.changed = changed


def _slot_changes(a: list | None, b: list | None) -> list[str]:
    if a is None or b is None:
        return [] if a == b else [f"fc {a} -> {b}"]
    out = [f"slot {i}: {x or '-'} -> {y or '-'}" for i, (x, y) in enumerate(zip(a, b)) if x != y]
    if len(a) != len(b):
        out.append(f"{len(a)} -> {len(b)} slots")
    return out


def _short(v: Any) -> str:
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        return "/".join(v)
    return str(v)
