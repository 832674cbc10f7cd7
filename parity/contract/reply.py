"""What every probe's reply says about itself, typed once for the child that writes it and the
parent that reads it.

A probe (a child process running an engine or a trainer, parity.envs.run_module) answers with
one JSON object. Its envelope is the same whichever package it runs: the release of that
package (`release`: one field, whether the probe ran SGLang, vLLM, speculators or SpecForge),
the interpreter, and what stopped it (an error; a limit of parity's CPU harness; a failure of
parity's own code; a failure outside the inputs). The rest of a reply is the probe's own
(captured slots, findings, a family's code paths) and is read by that engine's or trainer's
own folder; `ProbeReply` keeps it as it came (extra keys allowed).

The child writes the envelope with `reply_header` (validated here before it is sent); the
parent reads it with `ProbeReply.read`. The keys a stdlib-only module (parity.errors,
parity.extract.child) writes are the constants named there; tests/test_probe_reply.py holds
them equal to these fields.
"""

from __future__ import annotations

import sys
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ProbeReply(BaseModel):
    """The envelope of a probe's reply: which release ran, where, and what stopped it."""

    model_config = ConfigDict(extra="allow", frozen=True)

    release: str | None = Field(
        default=None, description="The installed release of the package the probe ran (the engine's or the "
        "trainer's), as its distribution metadata states it; None only in a reply made before it was known.")
    release_declared: str | None = Field(
        default=None, description="The version the package's own code declares, where it differs from its "
        "distribution's (the speculators 0.5.0 wheel's version.py says 0.4.0).")
    engine_release: str | None = Field(
        default=None, description="A trainer that runs a serving engine for its own data generation (SpecForge "
        "runs SGLang): that engine's installed release.")
    python: str | None = Field(default=None, description="The interpreter the probe ran in (sys.executable).")
    error: str | None = Field(default=None, description="Why the probe gave no answer, on one line.")
    harness_limit: str | None = Field(
        default=None, description="A limit of parity's CPU harness met on the way (a CUDA-only path, a stand-in "
        "relied on): read as HarnessLimit, exit 2, never a verdict.")
    internal_error: str | None = Field(
        default=None, description="A failure of parity's own code met on the way (parity.extract.child.parity_fault): "
        "read as InternalError, exit 3.")
    transient: bool = Field(
        default=False, description="The probe met a failure outside its inputs (memory, a resource, a killed "
        "subprocess), decided by the child from the exception's type: the reply cache never stores it.")
    traceback: tuple[str, ...] | None = Field(
        default=None, description="The last lines of the traceback of an exception that escaped the probe (its "
        "lines as traceback.format_exc gives them, the last few kept).")

    @classmethod
    def read(cls, reply: dict[str, Any]) -> "ProbeReply":
        """The reply as the parent reads it: the envelope typed, the probe's own keys kept."""
        return cls.model_validate(reply)

    @property
    def shown_release(self) -> str:
        """The release as messages name it: '?' when the reply does not say."""
        return self.release or "?"


def reply_header(release: str | None, **fields: Any) -> dict[str, Any]:
    """The start of a probe's reply (the child's side): `release`, the interpreter, and any other
    envelope `fields`, validated against ProbeReply; the probe adds its own keys to it."""
    header = ProbeReply(release=release, python=sys.executable, **fields)
    return header.model_dump(mode="json", exclude_defaults=True)


__all__ = ["ProbeReply", "reply_header"]
