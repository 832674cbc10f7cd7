"""Progress lines on stderr: what a long step (building an environment, deriving a release's
line, a sweep) is doing, one line each, tagged with who says it. Stdlib only."""

from __future__ import annotations

import sys
from typing import Callable


def logger(tag: str) -> Callable[[str], None]:
    """A function that prints one progress line `[tag] msg` to stderr, flushed."""
    def log(msg: str) -> None:
        print(f"[{tag}] {msg}", file=sys.stderr, flush=True)
    return log
