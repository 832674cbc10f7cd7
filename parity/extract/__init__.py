"""Extractors: derive the actual contract of each side from the installed code, by running it."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, replace
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..releases import Release


def folders(package: ModuleType) -> list[str]:
    """The sub-packages of `package` (engines/ or trainers/): one per engine or trainer."""
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.ispkg)


class Registry:
    """The engines (or trainers) parity knows: one folder each under `package`, plus any
    registered with `register` (an object or module whose names implement `interface`, e.g. a
    test's engine). The CLI, the pytest plugin and every decision reach a side only through here."""

    made: "list[Registry]" = []  # every registry, in the order their packages were imported

    def __init__(self, package: ModuleType, kind: str, interface: type):
        self.package, self.kind, self.interface = package, kind, interface
        self.registered: dict[str, Any] = {}
        Registry.made.append(self)

    @classmethod
    def kind_of(cls, impl: Any) -> str:
        """'engine' or 'trainer': the kind of the registry that holds `impl` (a side's own
        module, or one registered). The side's package was imported to reach `impl`, so its
        registry exists; what runs below the sides (parity.extract.installed) asks here rather
        than importing them."""
        for registry in cls.made:
            if impl.NAME in registry.names():
                return registry.kind
        raise LookupError(f"{impl.NAME!r} is in no registry of parity's")

    def names(self) -> list[str]:
        """Each side's name: its folder's, a `_` written `-` (nemo_automodel/ is `nemo-automodel`)."""
        return sorted({*(f.replace("_", "-") for f in folders(self.package)), *self.registered})

    def register(self, impl: Any) -> Any:
        """Add `impl` (checked against the interface) under its NAME; returns it."""
        self.registered[impl.NAME] = self._checked(impl.NAME, impl)
        return impl

    def unregister(self, name: str) -> None:
        self.registered.pop(name, None)

    def add_options(self, parser: Any, command: str) -> None:
        """Every side's own options for `command` (each one's `add_options`), in name order."""
        for name in self.names():
            self.get(name).add_options(parser, command)

    def get(self, name: str) -> Any:
        """The implementation called `name`; an unknown name is a one-line InputError."""
        from ..inputs import InputError

        if name in self.registered:
            return self.registered[name]
        known = self.names()
        if name not in known:
            raise InputError(f"unknown {self.kind} {name!r}: parity has {', '.join(known)} "
                             f"(one folder each under {self.package.__name__.replace('.', '/')}/)")
        return self._checked(name, importlib.import_module(f"{self.package.__name__}.{name.replace('-', '_')}"))

    def _checked(self, name: str, impl: Any) -> Any:
        if not isinstance(impl, self.interface):
            wanted = ({m for m in dir(self.interface) if not m.startswith("_")}
                      | set(getattr(self.interface, "__annotations__", {})))
            missing = [m for m in wanted if not hasattr(impl, m)]
            raise TypeError(f"{self.kind} {name!r} does not implement parity's {self.interface.__name__} "
                            f"interface (lacks {sorted(missing)})")
        return impl


@dataclass(frozen=True)
class Bound:
    """An engine or a trainer (`impl`, its implementation) and the release it runs under (None:
    the installed one, or its default): what every caller outside its folder holds."""

    impl: Any
    release: str | None = None

    @property
    def name(self) -> str:
        return self.impl.NAME

    @property
    def FORWARD_MODULE(self) -> str:  # noqa: N802 - the side's own name for it
        return self.impl.FORWARD_MODULE

    @property
    def FORWARD_REPLY(self) -> type:  # noqa: N802 - the side's own name for it
        """The typed reply of its forward module (a parity.contract.reply.ForwardReply)."""
        return self.impl.FORWARD_REPLY

    @property
    def sweep_from(self) -> str | None:
        """The first release of it `parity sweep` covers under 'all' (its SWEEP_FROM); None: the
        sweep does not cover it."""
        return getattr(self.impl, "SWEEP_FROM", None)

    @property
    def sweep_default(self) -> str:
        """What `parity sweep` runs of it when its range flag is not given (its SWEEP_DEFAULT:
        'all' unless it says 'none', a side added to the sweep after its invocations were written)."""
        return getattr(self.impl, "SWEEP_DEFAULT", "all")

    def at(self, release: str | None):
        """The same side under `release`."""
        return replace(self, release=release)

    @property
    def distribution(self) -> str | None:
        """The distribution whose installed release it runs (its DIST; None: it declares none)."""
        from .installed import distribution

        return distribution(self.impl)

    def checked_release(self) -> str | None:
        """The release it runs: its bound one, else the one installed where parity runs (read
        from its metadata; a one-line refusal naming what to install when none is; None for a
        side that declares no distribution)."""
        from .installed import release

        return release(self.impl, self.release)

    def recorded(self, call):
        """`call()`, with the contract(s) it returns saying where this side ran (their
        provenance's `source` and `environment`; parity.extract.installed)."""
        from .installed import recording

        with recording() as runs:
            out = call()
        ran = runs.get(self.distribution)
        if ran is None:
            return out
        return tuple(_stamped(o, ran) for o in out) if isinstance(out, tuple) else _stamped(out, ran)

    def releases(self, wanted: list[str] | None = None) -> "list[Release]":
        """Its releases the environments pin (or the `wanted` ones), oldest first (the matrix's
        rows); a side may answer for itself (a `releases(wanted)` of its own)."""
        own = getattr(self.impl, "releases", None)
        if own is not None:
            return own(wanted)
        from ..releases import Release, releases, version_key
        from .installed import installed_release

        rows = releases(self.name, wanted)
        here = installed_release(self.distribution) if self.distribution else None
        if here is None or (wanted and here not in wanted):
            return rows
        # the release installed where parity runs is its default row, run as installed (its own code)
        mine = Release(self.name, here, None, None, installed=True)
        return sorted([r for r in rows if r.version != here] + [mine], key=lambda r: version_key(r.version))


def _stamped(value: Any, ran: Any) -> Any:
    """A contract with its provenance saying where its side ran (`ran`, an installed.Ran); any
    other value as it is."""
    provenance = getattr(value, "provenance", None)
    if provenance is None or not hasattr(provenance, "source"):
        return value
    where = {"source": ran.source, "environment": ran.environment}
    return value.model_copy(update={"provenance": provenance.model_copy(update=where)})


def release_option(parser: Any, command: str, flag: str, options: dict[str, tuple[str, str]]) -> None:
    """Add `flag` (a side's release) to `command`'s parser when `options` names that command, with
    its (metavar, help) there: what an engine's or a trainer's `add_options` does."""
    if command in options:
        metavar, help = options[command]
        parser.add_argument(flag, metavar=metavar, help=help)
