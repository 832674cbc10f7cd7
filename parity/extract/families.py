"""Release families: the one place a package's releases differ, one module per family.

A side (an engine such as sglang, a trainer such as speculators) keeps what differs
between its releases in a `families/` package beside its probe, one module per family,
named after the family's first release (`v0_9.py`). Each declares

    RELEASES = SpecifierSet("==0.9.*")   # the releases the family covers (packaging syntax)
    VERIFIED = ("0.9.0",)                     # the releases its code was run against by the tests

`family_for` picks the one module whose range contains the installed release. A release
no family covers is refused, naming the release and every range looked in: it is never
run through a neighbouring family's code, which could pass wrongly. Adding a release
family is adding one such file; nothing else lists them.

Imports only the standard library and `packaging`: it runs inside every release's
environment.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version


class UnsupportedRelease(LookupError):
    """An installed release no family of this side covers (one line, naming what was looked for)."""


def families(where: str) -> list[ModuleType]:
    """Every family module of the `families` package `where` (dotted), in name order."""
    package = importlib.import_module(where)
    names = sorted(m.name for m in pkgutil.iter_modules(package.__path__) if not m.ispkg)
    modules = [importlib.import_module(f"{where}.{name}") for name in names]
    for module in modules:
        if not isinstance(getattr(module, "RELEASES", None), SpecifierSet):
            raise TypeError(f"{module.__name__} declares no RELEASES SpecifierSet")
    return modules


def describe(module: ModuleType) -> str:
    """`v0_9 (==0.9.*; verified 0.9.0)`: a family as messages name it."""
    verified = ", ".join(getattr(module, "VERIFIED", ())) or "none"
    return f"{module.__name__.rsplit('.', 1)[-1]} ({module.RELEASES}; verified {verified})"


def family_for(package: str, version: str, where: str) -> ModuleType:
    """The module of the families package `where` whose RELEASES contains `package` `version`.

    UnsupportedRelease (one line) when none does, or when more than one claims it."""
    modules = families(where)
    looked = "; ".join(describe(m) for m in modules) or "none"
    try:
        release = Version(version)
    except InvalidVersion:
        raise UnsupportedRelease(f"{package} {version!r} is not a release number parity can place in a "
                                 f"family (families in {where}: {looked})") from None
    hits = [m for m in modules if m.RELEASES.contains(release, prereleases=True)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise UnsupportedRelease(f"no parity release family covers {package} {version}: looked for a range "
                                 f"containing it in {where} ({looked}); a new family is one module there")
    raise UnsupportedRelease(f"{package} {version} is claimed by more than one family in {where}: "
                             f"{'; '.join(describe(m) for m in hits)}")
