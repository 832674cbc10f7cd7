"""A log of every child run, for measuring where a test run's (or a sweep's) time goes.

When `PARITY_RUN_LOG` names a file, `parity.envs.run_module` appends one JSON line per child it
ran or answered from the reply cache: the module, the environment, how it was answered (the
reply cache's status, or `uncached` for a child that is never cached), the key it was answered
under (the reply cache's, or a digest of the same material for an uncached child), the seconds
it took, and the test that asked for it (`PYTEST_CURRENT_TEST`, which the CLI's children
inherit). `bench/suite.py` reads it back: extractions per module and kind, how many ran and how
many were distinct, and any computed twice.

Nothing is logged when the variable is unset; the variable never enters a reply cache key
(parity.reply_cache) or a warmed server's (parity.forkserver). Each line is appended with one
`write` on a file opened with O_APPEND, so concurrent writers (pytest-xdist workers, a CLI's
children) interleave whole lines. Stdlib only.
"""

from __future__ import annotations

import json
import os

ENV = "PARITY_RUN_LOG"


def enabled() -> bool:
    return bool(os.environ.get(ENV))


def record(line: dict) -> None:
    """Append `line`, with the asking test and this process, when the log is on."""
    path = os.environ.get(ENV)
    if not path:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    data = (json.dumps({"test": test, **line, "pid": os.getpid()}) + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        return
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


__all__ = ["ENV", "enabled", "record"]
