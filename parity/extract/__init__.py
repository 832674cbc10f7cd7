"""Extractors: derive the actual contract of each side from the installed code, by running it."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def folders(package: ModuleType) -> list[str]:
    """The sub-packages of `package` (engines/ or trainers/): one per engine or trainer."""
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.ispkg)


def side(package: ModuleType, kind: str, name: str, interface: type) -> ModuleType:
    """The folder `name` of `package`, checked against `interface` (a runtime-checkable
    Protocol its module implements); an unknown name is a one-line InputError."""
    from ..inputs import InputError

    known = folders(package)
    if name not in known:
        raise InputError(f"unknown {kind} {name!r}: parity has {', '.join(known)} "
                         f"(one folder each under {package.__name__.replace('.', '/')}/)")
    module = importlib.import_module(f"{package.__name__}.{name}")
    if not isinstance(module, interface):
        wanted = {m for m in dir(interface) if not m.startswith("_")} | set(getattr(interface, "__annotations__", {}))
        missing = [m for m in wanted if not hasattr(module, m)]
        raise TypeError(f"{kind} {name!r} does not implement parity's {interface.__name__} interface "
                        f"(lacks {sorted(missing)})")
    return module
