"""What each cell of the release table is: extracted, refused by the engine's own code, or out of
reach of parity's CPU harness, decided when the cell is extracted from the TYPE of what stopped it
(the exception's class, or the kind of the contract's error finding), never from its message.

- `extracted`: the case's states were named and nothing stopped it.
- `engine refuses`: the release's own code refuses or crashes on this input, as it would on a
  GPU: no EAGLE-3 model class for the target (the preflight's InputError), its config classes
  refuse the set-up or its forward raises (the probe's reply error: ServingExtractionError,
  DatagenError), it captures fewer states than asked (`not_captured`), it raises while
  capturing (`engine_error`), or the release has no EAGLE-3 at all (a `CannotExtract` its
  probe typed `engine_lacks`: SGLang 0.4.4's SpeculativeAlgorithm has no EAGLE3).
- `parity cannot run`: a limit of parity's CPU harness: `HarnessLimit` (a CUDA-only code path,
  a stand-in relied on, a module the release requires that parity's CPU environment leaves
  out), `CannotExtract` (no release family of parity runs it), an environment parity could not
  build or find (`EnvError`, `BuildError`, `HomeError`), a captured tensor parity could not name
  (`unidentified_state`); or a failure of parity's own code (`InternalError`: the innermost
  frame of what the probe met is parity's, parity.extract.child.parity_fault), never counted
  as the engine's refusal.

A cell saved before the sweep classified cells has no outcome: one that failed reads "not
classified" until the release is swept again, never a class guessed from its message.
"""

from __future__ import annotations

from ..contract import FindingKind, Whose
from ..contract.swept import Cell, Outcome, SeedLaunch
from ..envs import EnvError
from ..errors import CannotExtract, HarnessLimit, InternalError
from ..home import HomeError
from ..ondemand import BuildError


def of_finding(kind: FindingKind) -> Outcome:
    """The outcome of a cell stopped by an error finding of this kind: parity's limit where the
    kind is declared parity's (FindingKind.whose: parity could not name or read what the engine
    did), else the engine's own behaviour (it raised, dropped a state, refused the draft)."""
    return Outcome.parity_cannot_run if FindingKind(kind).whose is Whose.parity else Outcome.engine_refuses


def _parity_errors() -> tuple[type[BaseException], ...]:

    return (HarnessLimit, CannotExtract, EnvError, BuildError, HomeError, InternalError)


def of_error(exc: BaseException) -> Outcome:
    """The outcome of a cell stopped by `exc` (a UserError an extraction raised, or the
    InternalError of parity's own code failing): a limit of parity's harness when it, or the
    error it was raised from, is one of parity's own (`_parity_errors`); else the engine's own
    refusal (its reply's error, its missing class)."""

    parity = _parity_errors()
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, CannotExtract) and current.engine_lacks:  # the release has no EAGLE-3
            return Outcome.engine_refuses
        if isinstance(current, parity):
            return Outcome.parity_cannot_run
        current = current.__cause__
    return Outcome.engine_refuses


def of_cell(cell: "Cell | SeedLaunch | dict") -> Outcome | None:
    """A saved cell's outcome: its own; for a cell saved before cells were classified, `extracted`
    when it gave no error and named states (its structure says so: fc slots, a training fc, dump
    slots), else None: a failure of an unknown class, never guessed from its message."""
    if isinstance(cell, dict):  # as the sweep writes it, before the file is saved
        cell = Cell.model_validate(cell)
    if cell.outcome is not None:
        return Outcome(cell.outcome)
    named = isinstance(cell, Cell) and cell.named
    return Outcome.extracted if named and cell.error is None else None


__all__ = ["Outcome", "of_cell", "of_error", "of_finding"]
