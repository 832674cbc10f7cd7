"""Extractors: derive the actual contract of each side from the installed code, by running it."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Any


def folders(package: ModuleType) -> list[str]:
    """The sub-packages of `package` (engines/ or trainers/): one per engine or trainer."""
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.ispkg)


class Registry:
    """The engines (or trainers) parity knows: one folder each under `package`, plus any
    registered with `register` (an object or module whose names implement `interface`, e.g. a
    test's engine). The CLI, the pytest plugin and every decision reach a side only through here."""

    def __init__(self, package: ModuleType, kind: str, interface: type):
        self.package, self.kind, self.interface = package, kind, interface
        self.registered: dict[str, Any] = {}

    def names(self) -> list[str]:
        return sorted({*folders(self.package), *self.registered})

    def register(self, impl: Any) -> Any:
        """Add `impl` (checked against the interface) under its NAME; returns it."""
        self.registered[impl.NAME] = self._checked(impl.NAME, impl)
        return impl

    def unregister(self, name: str) -> None:
        self.registered.pop(name, None)

    def get(self, name: str) -> Any:
        """The implementation called `name`; an unknown name is a one-line InputError."""
        from ..inputs import InputError

        if name in self.registered:
            return self.registered[name]
        known = self.names()
        if name not in known:
            raise InputError(f"unknown {self.kind} {name!r}: parity has {', '.join(known)} "
                             f"(one folder each under {self.package.__name__.replace('.', '/')}/)")
        return self._checked(name, importlib.import_module(f"{self.package.__name__}.{name}"))

    def _checked(self, name: str, impl: Any) -> Any:
        if not isinstance(impl, self.interface):
            wanted = ({m for m in dir(self.interface) if not m.startswith("_")}
                      | set(getattr(self.interface, "__annotations__", {})))
            missing = [m for m in wanted if not hasattr(impl, m)]
            raise TypeError(f"{self.kind} {name!r} does not implement parity's {self.interface.__name__} "
                            f"interface (lacks {sorted(missing)})")
        return impl
