"""Test-only child for tests/test_forkserver.py: says where and how it runs.

    python -m tests.forked_child  < request.json

`warm()` records the process it ran in, so a child forked from a warmed server is told from
a fresh process (whose warmed copy of this module does not exist)."""

import os
import sys
import tempfile
import time

from parity.envs import reply_over_stdio

WARMED_IN: int | None = None


def warm() -> None:
    global WARMED_IN
    WARMED_IN = os.getpid()


def handle(request: dict) -> dict:
    if request.get("sleep"):
        with open(request["pid_file"], "w") as f:
            f.write(str(os.getpid()))
        time.sleep(request["sleep"])
    if request.get("stderr"):
        print(request["stderr"], file=sys.stderr)
    if request.get("exit") is not None:
        sys.stdout.flush()
        os._exit(request["exit"])
    if request.get("sys_exit") is not None:
        raise SystemExit(request["sys_exit"])
    if request.get("raise"):
        raise ValueError("asked to raise")
    warmed = sys.modules.get("tests.forked_child")
    return {"pid": os.getpid(), "warmed_in": getattr(warmed, "WARMED_IN", None),
            "env": os.environ.get("FORKED_CHILD_VAR"), "tmpdir": tempfile.gettempdir(),
            "cwd": os.getcwd(), "stdin_is_request": True, "main": __name__,
            "session_leader": os.getsid(0) == os.getpid()}


if __name__ == "__main__":
    reply_over_stdio(handle)
