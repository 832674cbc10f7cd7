"""The releases of a package that the environments pin (envs.toml), oldest first.

Release discovery for `parity matrix` and `parity can-i-deploy`: each release is run in
its own environment (see envs.py); one that is not built, or not declared, is returned
with the reason it cannot be run, so the matrix shows it as a loud cell, never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from .envs import environments
from .home import setup_command


def version_key(version: str):
    """Sort key for release versions: PEP 440 order; an unparsable version sorts last, as text."""
    try:
        from packaging.version import Version

        return (0, Version(version))
    except Exception:
        return (1, version)


@dataclass(frozen=True)
class Release:
    package: str
    version: str
    env: str | None  # the envs.toml section
    problem: str | None = None  # why it cannot be run (not built, not declared)
    installed: bool = False  # the release installed where parity runs: run as installed (parity.extract.installed)

    @property
    def bound(self) -> str | None:
        """The release a side is bound to for this row: None for the installed one (it runs as
        installed, where parity runs), else the version (its environment)."""
        return None if self.installed else self.version


def releases(package: str, wanted: list[str] | None = None) -> list[Release]:
    """The releases of `package` that envs.toml pins (or the `wanted` ones), oldest first."""
    found: dict[str, Release] = {}
    for env in environments():
        v = env.packages.get(package)
        if v is None or v in found:
            continue
        problem = None if env.built else (f"its environment {env.name!r} ({env.path}) is not built: "
                                          f"run `{setup_command(env.name)}`")
        found[v] = Release(package, v, env.name, problem)
    if wanted:
        out = []
        for v in wanted:
            out.append(found.get(v) or Release(package, v, None, (
                f"no environment pins {package}=={v} (envs.toml has {sorted(found, key=version_key)}); "
                "add a section for it to envs.toml")))
        return sorted(out, key=lambda r: version_key(r.version))
    return sorted(found.values(), key=lambda r: version_key(r.version))
