"""Every layer-id convention parity translates: the typed rules of systems that are not an engine
or a trainer of parity's (parity.conventions), and each engine's and trainer's own, declared in
its folder (`CONVENTION`, optional) and read here through the registries."""

from __future__ import annotations

from ..conventions import CONVENTIONS, Convention, ConventionError
from . import engines, trainers


def conventions() -> dict[str, Convention]:
    """The full table, by name: parity.conventions' first, then each engine's, then each trainer's
    (name order)."""
    own = [getattr(side.impl, "CONVENTION", None) for side in (*engines.engines(), *trainers.trainers())]
    return {**CONVENTIONS, **{c.name: c for c in own if c is not None}}


def convention(name: str) -> Convention:
    """The typed rule called `name` (`--datagen-convention`), from the full table: what a trainer
    is handed, as the sides sit below this table and never read it themselves."""
    table = conventions()
    if name not in table:
        raise ConventionError(f"unknown convention {name!r}; known: {', '.join(table)}")
    return table[name]
