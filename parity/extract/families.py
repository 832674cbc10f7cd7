"""Release families: the one place a package's releases differ, one module per family.

A side (an engine such as sglang, a trainer such as speculators) keeps what differs
between its releases in a `families/` package beside its probe, one module per family,
named after the family's first release (`v0_9.py`). Each declares

    RELEASES = SpecifierSet("==0.9.*")   # the releases the family covers (packaging syntax)
    VERIFIED = ("0.9.0",)                # the releases its code was run against by the tests

and the side says how to check that a family's code paths are all present in the
installed source (`fits`: raises a LookupError naming what it looked for and did not find).

`place` picks the family for the installed release:
- a release inside one family's range runs with that family (a release in the range the
  tests never ran gets a note saying so);
- a release no range covers (the bump to a release parity has never seen, or one between
  two families) is NOT refused: every family is tried, newest first, and the first whose
  code paths are all found in the installed source runs it. The placement carries the
  plain sentence every report prints ("sglang X is newer than any release parity has
  verified; extracted with the 0.5.23-family adapter"). The numerical identification of
  every captured tensor is unchanged, so a family whose code runs but means something
  else still cannot name a wrong state;
- when no family's code paths are all found, the release is refused (UnsupportedRelease,
  one line) naming, per family, what was looked for and not found.

Adding a release family is adding one such file; nothing else lists them.

Imports only the standard library and `packaging`: it runs inside every release's
environment.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pkgutil
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Callable

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version
from .standins import standin_packages


class UnsupportedRelease(LookupError):
    """An installed release no family of this side can run (one line, naming what was looked for)."""


@dataclass(frozen=True)
class Placement:
    """The family a release runs with, and what every report must say about it."""

    module: ModuleType
    note: str | None  # None: a release the tests verified; else the sentence reports print

    @property
    def family(self) -> str:
        return family_name(self.module)


def families(where: str) -> list[ModuleType]:
    """Every family module of the `families` package `where` (dotted), in name order."""
    package = importlib.import_module(where)
    names = sorted(m.name for m in pkgutil.iter_modules(package.__path__) if not m.ispkg)
    modules = [importlib.import_module(f"{where}.{name}") for name in names]
    for module in modules:
        if not isinstance(getattr(module, "RELEASES", None), SpecifierSet):
            raise TypeError(f"{module.__name__} declares no RELEASES SpecifierSet")
    return modules


def missing_modules(where: str, fits: Callable[[ModuleType], None]) -> set[str]:
    """Top-level modules that some family of `where` fails to import here (`fits(module)`, its
    code-path check, raising "No module named X"): what a release's environment still lacks."""
    missing: set[str] = set()
    for module in families(where):
        try:
            fits(module)
        except Exception as exc:  # noqa: BLE001 - any failure may name a missing module
            missing.update(re.findall(r"No module named '([^'.]+)", str(exc)))
    # "No module named 'transformers.masking_utils'": the package is there, its release lacks a module.
    # A stood-in package (vllm, torchvision) cannot be installed beside CPU torch: never one to add.
    stood_in = standin_packages()
    return {name for name in missing if name not in stood_in and importlib.util.find_spec(name) is None}


def family_name(module: ModuleType) -> str:
    """`0.5.23` for `...families.v0_5_23`: the name reports give a family."""
    return module.__name__.rsplit(".", 1)[-1].removeprefix("v").replace("_", ".")


def verified(module: ModuleType) -> list[Version]:
    return sorted(Version(v) for v in getattr(module, "VERIFIED", ()))


def describe(module: ModuleType) -> str:
    """`v0_9 (==0.9.*; verified 0.9.0)`: a family as messages name it."""
    shown = ", ".join(getattr(module, "VERIFIED", ())) or "none"
    return f"{module.__name__.rsplit('.', 1)[-1]} ({module.RELEASES}; verified {shown})"


def _newest_first(modules: list[ModuleType]) -> list[ModuleType]:
    return sorted(modules, key=lambda m: (verified(m)[-1:] or [Version("0")])[0], reverse=True)


def family_for(package: str, version: str, where: str) -> ModuleType:
    """The module of the families package `where` whose RELEASES contains `package` `version`.

    UnsupportedRelease (one line) when none does, or when more than one claims it."""
    modules = families(where)
    release = _release(package, version, where, modules)
    hits = [m for m in modules if m.RELEASES.contains(release, prereleases=True)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        looked = "; ".join(describe(m) for m in modules) or "none"
        raise UnsupportedRelease(f"no parity release family covers {package} {version}: looked for a range "
                                 f"containing it in {where} ({looked}); a new family is one module there")
    raise UnsupportedRelease(f"{package} {version} is claimed by more than one family in {where}: "
                             f"{'; '.join(describe(m) for m in hits)}")


def _release(package: str, version: str, where: str, modules: list[ModuleType]) -> Version:
    try:
        return Version(version)
    except InvalidVersion:
        looked = "; ".join(describe(m) for m in modules) or "none"
        raise UnsupportedRelease(f"{package} {version!r} is not a release number parity can place in a "
                                 f"family (families in {where}: {looked})") from None


def place(package: str, version: str, where: str, fits: Callable[[ModuleType], None]) -> Placement:
    """The family `package` `version` runs with (see the module docstring).

    `fits(module)` raises a LookupError (CodePathMoved) naming what it looked for when the
    family's code paths are not all in the installed source; it is asked only for a release
    outside every range."""
    modules = families(where)
    release = _release(package, version, where, modules)
    hits = [m for m in modules if m.RELEASES.contains(release, prereleases=True)]
    if len(hits) > 1:
        raise UnsupportedRelease(f"{package} {version} is claimed by more than one family in {where}: "
                                 f"{'; '.join(describe(m) for m in hits)}")
    if hits:
        module = hits[0]
        if release in verified(module):
            return Placement(module, None)
        return Placement(module, f"{package} {version} is not a release parity has verified; it is in the "
                                 f"{family_name(module)} family's range ({module.RELEASES}), whose adapter "
                                 f"extracted it")
    every = sorted(v for m in modules for v in verified(m))
    missing: list[str] = []
    for module in _newest_first(modules):
        try:
            fits(module)
        except LookupError as exc:
            missing.append(f"{family_name(module)}-family adapter: {' '.join(str(exc).split())}")
            continue
        adapter = f"extracted with the {family_name(module)}-family adapter"
        if every and release > every[-1]:
            return Placement(module, f"{package} {version} is newer than any release parity has verified; "
                                     f"{adapter}")
        return Placement(module, f"{package} {version} is not a release parity has verified (verified: "
                                 f"{', '.join(map(str, every))}); {adapter}, whose code paths were all "
                                 f"found in it")
    raise UnsupportedRelease(f"no parity release family can run {package} {version}: it is in no family's "
                             f"range, and no family's code paths are all in its installed source ("
                             f"{'; '.join(missing) or 'no families in ' + where})")


# -- how a family's adapter is composed ---------------------------------------------------------

def protocol_gaps(cls: type, protocol: type) -> list[str]:
    """What `cls` lacks of `protocol` (a typing.Protocol whose members are its methods and its
    annotated attributes, its protocol bases' included): each member it does not have, and each
    method whose parameters are not the protocol's (names and kinds, in order). Empty: it provides it."""
    gaps = []
    for base in reversed(protocol.__mro__):
        if not getattr(base, "_is_protocol", False) or base.__module__ == "typing":
            continue
        for name in getattr(base, "__annotations__", {}):
            if not hasattr(cls, name):
                gaps.append(f"{cls.__qualname__} has no {name}")
        for name, method in vars(base).items():
            method = method.__func__ if isinstance(method, staticmethod) else method  # compared without self
            if name.startswith("_") or not inspect.isfunction(method):
                continue
            mine = getattr(cls, name, None)
            if not callable(mine):
                gaps.append(f"{cls.__qualname__} has no method {name}")
                continue
            want = [(p.name, p.kind) for p in inspect.signature(method).parameters.values()]
            got = [(p.name, p.kind) for p in inspect.signature(mine).parameters.values()]
            if got != want:
                gaps.append(f"{cls.__qualname__}.{name}{inspect.signature(mine)} is not the protocol's "
                            f"{name}{inspect.signature(method)}")
    return gaps


def family_chain(where: str, base: type) -> list[str]:
    """Where a family of `where` (a families package) inherits through another family's adapter:
    each `Adapter` whose MRO holds an `Adapter` of another family module other than `base`, the
    base family's. Families compose their adapter from concern parts placed ahead of `base`, so
    none inherits through more than two levels of families (base -> family). Empty: none does."""
    adapters = {module.Adapter: module.__name__ for module in families(where)}
    found = []
    for module in families(where):
        for cls in module.Adapter.__mro__[1:]:
            if cls is not base and cls in adapters:
                found.append(f"{module.__name__}.Adapter inherits {adapters[cls]}.Adapter")
    return found


def family_borrowing(where: str) -> list[str]:
    """Where a family of `where` reaches sideways into another family's `Adapter` instead of
    composing the part that holds what it shares: an adapter member that is another family's
    `Adapter` method (`cpu_platform = v0_11.Adapter.cpu_platform`), and a call of one in a
    family's source (`v0_11.Adapter.set_capture(self, ...)`). Empty: none does."""
    modules = families(where)
    names = {module.__name__ for module in modules}
    found = []
    for module in modules:
        own = [cls for cls in module.Adapter.__mro__ if cls.__module__ == module.__name__]
        for name, member in ((name, member) for cls in own for name, member in vars(cls).items()):
            member = getattr(member, "__func__", member)
            home = getattr(member, "__module__", None)
            if (inspect.isfunction(member) and home in names and home != module.__name__
                    and member.__qualname__.startswith("Adapter.")):
                found.append(f"{module.__name__}.Adapter.{name} is {home}.{member.__qualname__}")
        siblings = {alias for alias, value in vars(module).items()
                    if isinstance(value, ModuleType) and value.__name__ in names and value is not module}
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            func = node.func if isinstance(node, ast.Call) else None
            if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute)
                    and func.value.attr == "Adapter" and isinstance(func.value.value, ast.Name)
                    and func.value.value.id in siblings):
                found.append(f"{module.__name__} calls {func.value.value.id}.Adapter.{func.attr} (line {node.lineno})")
    return found
