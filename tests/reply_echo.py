"""Test-only child for tests/test_reply_cache.py: replies with a fresh nonce (so a cached reply
is told from a fresh one), what it was asked, a line naming the request's path, and the
`VALUE` of each module named in `import` (found on the child's PYTHONPATH).

    python -m tests.reply_echo  < request.json
"""

import importlib
import uuid

from parity.envs import reply_over_stdio


def handle(request: dict) -> dict:
    if request.get("raise"):
        raise ValueError("asked to raise")
    reply = {"nonce": uuid.uuid4().hex, "asked": request}
    if request.get("path"):
        reply["says"] = f"read {request['path']}/config.json"
    if request.get("import"):  # what an installed module says: a reply that follows its files
        reply["values"] = {name: importlib.import_module(name).VALUE for name in request["import"]}
    if request.get("fail"):
        reply["error"] = request["fail"]
    return reply


if __name__ == "__main__":
    reply_over_stdio(handle)
