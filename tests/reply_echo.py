"""Test-only child for tests/test_reply_cache.py: replies with a fresh nonce (so a cached reply
is told from a fresh one), what it was asked, a line naming the request's path, and the
`VALUE` of each module named in `import` (found on the child's PYTHONPATH).

`fail: [TYPE, MESSAGE]` makes it meet an error the way a probe does and report it on one line
(`parity.extract.child.one_line`): TYPE raised with MESSAGE (one of FAILURES), or `killed`, a
subprocess killed by SIGKILL (the kernel's OOM killer does the same).

    python -m tests.reply_echo  < request.json
"""

import importlib
import subprocess
import sys
import uuid

from parity.envs import reply_over_stdio
from parity.extract.child import one_line, with_limits

FAILURES = {cls.__name__: cls for cls in (MemoryError, OSError, TimeoutError, BrokenPipeError, FileNotFoundError,
                                          TypeError, ValueError, KeyError)}


def fail(kind: str, message: str) -> None:
    if kind == "killed":
        subprocess.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"], check=True)
    raise FAILURES[kind](message)


def handle(request: dict) -> dict:
    if request.get("raise"):
        raise ValueError("asked to raise")
    reply = {"nonce": uuid.uuid4().hex, "asked": request}
    if request.get("path"):
        reply["says"] = f"read {request['path']}/config.json"
    if request.get("import"):  # what an installed module says: a reply that follows its files
        reply["values"] = {name: importlib.import_module(name).VALUE for name in request["import"]}
    if request.get("fail"):  # an error met on the way, reported as a probe reports it
        try:
            fail(*request["fail"])
        except Exception as exc:  # noqa: BLE001 - reported, as an engine's error is
            reply["error"] = one_line(exc)
    return reply


if __name__ == "__main__":
    reply_over_stdio(with_limits(handle, "sglang"))  # its error replies name the installed sglang, as its probe's do
