"""Paths under the names the user gave them: what an engine is shown (run in a probe; stdlib only).

Engines read path names, not only files: vLLM up to 0.33 picks the speculative method from the
draft path's name when the serve command gives none ("eagle3" in it: EAGLE-3; "eagle-": EAGLE;
"dflash": DFlash). A check that hands the engine parity's own paths (a copy of the draft in a
temporary folder) shows it a name the deployment never has, and its answer can differ from the
real server's (issue 48). So a probe lays out each folder it hands the engine at a path that
ends in the name the user wrote for it, the draft model in the serve command, else `--draft`;
the target's model path in the serve command, else the folder of `--target-config`:

    <the child's private temp dir>/<n>/<the user's path, without a leading / or ..>

The folders are real directories and the files in them links to parity's files (a directory
link would be resolved to its target by code that calls realpath). `<n>` is a digit per
folder kind, so parity's own part of the path carries no word an engine reacts to; the
child's temp dir is parity's (`parity-child-XXXXXXXX`). The names enter the request, so the
reply cache keys on them (docs/reply-cache.md).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import PurePosixPath
from typing import Callable

# One digit per kind of folder, so that a draft and a target given the same name never meet.
KINDS = {"draft": "1", "target": "2"}
# Neutral names: what a folder is called when the engine's answer under the user's name is
# compared with its answer under a name that says nothing (parity.extract.engines' launch).
NEUTRAL = {"draft": "d", "target": "m"}
_laid_out: dict[str, str] = {}  # the folders this process laid out -> the real folder each mirrors
_names: dict[str, str] = {}  # the same folders -> the name each was laid out under, as the user wrote it


def tail(name: str) -> str:
    """The part of a path as written that can follow a folder of parity's: no root, no `.` or `..`
    parts before the first name (`../drafts/x` -> `drafts/x`, `/srv/m/d` -> `srv/m/d`)."""
    parts = [p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("/", ".", "")]
    while parts and parts[0] == "..":
        parts.pop(0)
    return "/".join(p for p in parts if p != "..")


def named_path(real: str, name: str | None, kind: str) -> str:
    """The folder `real` laid out under `name` (the user's own path for it), in this process's
    temp dir: `real` itself when no name is given or the name has no part parity can lay out.
    The same (kind, name) asked again is the same folder."""
    rel = tail(name or "")
    if not rel:
        return real
    source = _laid_out.get(real) or os.path.realpath(real)
    for k in range(100):  # another real folder under the same name: the next digits
        where = os.path.join(tempfile.gettempdir(), KINDS[kind] + str(k) * bool(k), rel)
        if _laid_out.get(where) == source:
            return where
        if where not in _laid_out and not os.path.lexists(where):
            _mirror(source, where)
            _laid_out[where], _names[where] = source, name
            return where
    raise RuntimeError(f"parity laid out {name!r} a hundred times in one process")


def name_of(path: str | None) -> str | None:
    """The name the folder `path` was laid out under (named_path), None for one of parity's own."""
    return _names.get(path) if path else None


def shown_names(launch: dict, neutral: Callable[[], dict]) -> None:
    """Complete a launch resolution (`launch`, whose "names" the engine's parse filled: path field
    -> the name it was shown) with "from_names": the fields those names decided, found by
    resolving the same arguments again under names that say nothing (`neutral`). Nothing to
    do when every path was parity's own."""
    names = {k: v for k, v in (launch.get("names") or {}).items() if v and v not in NEUTRAL.values()}
    launch["names"] = names
    if not names:
        return
    try:
        other = neutral()
    except Exception as exc:  # noqa: BLE001 - the engine refuses them under a neutral name: the name decided that
        other = exc
    launch["from_names"] = decided_by_names(launch, other)


def decided_by_names(named: dict, neutral: "dict | BaseException") -> list[dict]:
    """The launch fields the paths' names decided (LaunchContract.from_names): each effective
    field of `named` (a resolution under the user's names) that `neutral` (the same arguments
    resolved under names that say nothing, or the engine's refusal there) resolves otherwise."""
    if isinstance(neutral, BaseException):
        words = f"{type(neutral).__name__}: {neutral}".splitlines()[0][:300]
        return [{"field": "(the arguments)", "named": "resolved", "neutral": None, "neutral_refused": words}]
    return [{"field": f, "named": v, "neutral": neutral["effective"].get(f)}
            for f, v in named["effective"].items() if neutral["effective"].get(f) != v]


def laid_out() -> bool:
    """Whether this process laid out any folder under a user's name."""
    return bool(_laid_out)


def unnamed(text: str) -> str:
    """`text` (a reply, as JSON) with each folder this process laid out named by the real folder
    it mirrors: an engine's message that names the path it was shown names the user's files,
    and the reply cache stores request paths as placeholders, never a dead temporary path."""
    for where in sorted(_laid_out, key=len, reverse=True):
        text = text.replace(where, _laid_out[where])
    return text


def _mirror(real: str, where: str) -> None:
    """`where`, a real directory holding a link to each file of `real` (subfolders mirrored)."""
    os.makedirs(where, exist_ok=True)
    for entry in os.scandir(real):
        to = os.path.join(where, entry.name)
        if entry.is_dir(follow_symlinks=True):
            _mirror(entry.path, to)
        elif not os.path.lexists(to):
            os.symlink(os.path.realpath(entry.path), to)


__all__ = ["KINDS", "NEUTRAL", "decided_by_names", "laid_out", "name_of", "shown_names", "named_path", "tail", "unnamed"]
