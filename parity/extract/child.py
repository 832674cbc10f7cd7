"""What every probe (the child processes that run an engine or a trainer) shares: its errors
on one line and its findings as reply entries. Stdlib only: a probe imports it before torch."""

from __future__ import annotations

def one_line(exc: BaseException) -> str:
    """`Type: message` on one line (a multi-line message keeps all its lines, joined)."""
    text = " ".join(str(exc).split())
    if len(text) > 400:  # e.g. SGLang's list of every supported architecture after the missing one
        text = text[:400] + " ..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def finding(kind: str, message: str, severity: str = "warning", slot: int | None = None) -> dict:
    return {"kind": kind, "message": message, "severity": severity, "slot": slot}


__all__ = ["finding", "one_line"]
