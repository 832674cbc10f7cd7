"""What every probe (the child processes that run an engine or a trainer) shares: its errors
on one line, its findings as reply entries, and telling a limit of parity's CPU harness from
the engine's own refusal. Stdlib only: a probe imports it before torch.

A limit of the harness is a failure the engine would not have on the hardware it is built for:
a CUDA-only code path (anything raised from inside `torch.cuda`, or torch saying it was not
compiled with CUDA), or one of parity's own stand-ins being relied on (its CPU kernel bodies,
its import-time stand-ins). Every error a probe reports through `one_line` is looked at; the
first limit found goes into the reply (`HARNESS_LIMIT_KEY`, by reply_over_stdio), and the
parent reads it as exit 2 naming the limit, never as a verdict on the draft (docs/engines-on-cpu.md).

A failure outside the inputs (`parity.errors.transient`: memory, a resource, a killed
subprocess) met on the way is remembered the same way (`note`, which `one_line` calls), and the
reply says so (`TRANSIENT_KEY`): the reply cache never stores it. The child knows the
exception's type; the parent never reads it from the message.
"""

from __future__ import annotations

import traceback
from typing import Any

from ..errors import TRANSIENT_KEY, transient

HARNESS_LIMIT_KEY = "harness_limit"
STAND_IN_ERRORS = ("StandInUsed", "KernelStandInError")  # parity's own stand-ins, relied on
_CUDA_WORDS = ("not compiled with CUDA", "Found no NVIDIA driver", "No CUDA GPUs are available",
               "CUDA driver initialization failed")

limits: list[str] = []  # the harness limits this process has met, in order
transients: list[str] = []  # the failures outside the inputs this process has met (type names)


def harness_limit(exc: BaseException) -> str | None:
    """What about parity's CPU harness `exc` (or an exception it came from) shows, or None
    when it is not a limit of the harness."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        frames = traceback.extract_tb(exc.__traceback__)
        cuda = [i for i, f in enumerate(frames) if "/torch/cuda/" in f.filename.replace("\\", "/")]
        if type(exc).__name__ in STAND_IN_ERRORS:
            return f"it relied on one of parity's CPU stand-ins ({type(exc).__name__}: {' '.join(str(exc).split())})"
        if cuda or any(word in str(exc) for word in _CUDA_WORDS):
            caller = frames[cuda[0] - 1] if cuda and cuda[0] > 0 else (frames[-1] if frames else None)
            where = f" from {_short(caller.filename)}:{caller.lineno} {caller.name}" if caller else ""
            return f"a CUDA-only code path{where} ({type(exc).__name__}: {' '.join(str(exc).split())})"
        exc = exc.__cause__ or exc.__context__
    return None


def _short(path: str) -> str:
    path = path.replace("\\", "/")
    return path.split("site-packages/", 1)[1] if "site-packages/" in path else path


def note(exc: BaseException) -> None:
    """Remember `exc` when it is a failure outside the inputs (`transients`): the reply then
    says so. Every error a probe reports, through `one_line` or in its own words, is noted."""
    if transient(exc):
        transients.append(type(exc).__name__)


def one_line(exc: BaseException) -> str:
    """`Type: message` on one line (a multi-line message keeps all its lines, joined). A limit
    of the harness behind it is remembered (`limits`), and so is a failure outside the inputs
    (`note`)."""
    note(exc)
    limit = harness_limit(exc)
    if limit is not None and limit not in limits:
        limits.append(limit)
    text = " ".join(str(exc).split())
    if len(text) > 400:  # e.g. SGLang's list of every supported architecture after the missing one
        text = text[:400] + " ..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def with_limits(handler):
    """A probe's handler whose reply carries the first harness limit met on the way
    (HARNESS_LIMIT_KEY); one raised out of the handler becomes that reply, with its error. A
    reply after a failure outside the inputs (`note`) says so: `TRANSIENT_KEY: true`."""
    def run(request: dict) -> dict:
        try:
            reply = handler(request)
        except Exception as exc:
            limit = harness_limit(exc)
            if limit is None:
                raise  # the engine's own error: reply_over_stdio reports it (and whether transient)
            reply = {"error": one_line(exc), HARNESS_LIMIT_KEY: limit}
        if limits and isinstance(reply, dict):
            reply.setdefault(HARNESS_LIMIT_KEY, limits[0])
        if transients and isinstance(reply, dict):
            reply[TRANSIENT_KEY] = True
        return reply
    return run


def finding(kind: str, message: str, severity: str = "warning", slot: int | None = None) -> dict:
    return {"kind": kind, "message": message, "severity": severity, "slot": slot}


__all__ = ["HARNESS_LIMIT_KEY", "TRANSIENT_KEY", "finding", "harness_limit", "limits", "note", "one_line", "transients",
           "with_limits"]


def jsonable(value: Any) -> Any:
    """An engine object's value as plain JSON: numbers, strings and None as they are, lists item
    by item, an enum by its value, anything else by its string."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return str(getattr(value, "value", value))
