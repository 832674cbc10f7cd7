"""Where parity finds what it ships, and where it keeps what it builds (its home).

What it ships: `envs.toml` (how each environment is built), the bundled fixtures (target and
draft configs, the trained replay fixture) and the bundled locks (`contracts/`, whose paths
point into the fixtures). In a source checkout they are the checkout's own files, at its root;
installed from a wheel, the copy the build put inside the package (`parity/_shipped/`, written
by setup.py with the same layout).

Its home: `PARITY_HOME` when set; otherwise `.envs/` in a source checkout (git-ignored, so the
dev workflow and CI on a clean clone build into and find the same place inside the clone), and
the platform's cache directory when installed (`$XDG_CACHE_HOME/parity`, else
`~/.cache/parity`; `~/Library/Caches/parity` on macOS; `%LOCALAPPDATA%\\parity` on Windows).
It holds one directory per release environment (`FAMILY-VERSION`, e.g. `sglang-0.5.14`),
`cache/` (fixtures built from seeds), and an optional `envs.toml` whose releases, templates and
environments are added to (or replace) the shipped ones.

Stdlib only: tools/setup_env.py reads it before any environment exists.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .errors import UserError

PACKAGE = Path(__file__).resolve().parent
_ABOVE = PACKAGE.parent
# A source checkout: the package sits next to the project's own pyproject.toml and envs.toml
# (an installed package sits in site-packages, next to other distributions).
CHECKOUT: Path | None = (_ABOVE if (_ABOVE / "pyproject.toml").is_file() and (_ABOVE / "envs.toml").is_file()
                         else None)
SHIPPED = CHECKOUT if CHECKOUT is not None else PACKAGE / "_shipped"
USER_ENVS = "envs.toml"  # the file in the home that adds releases to the shipped envs.toml


def shipped(*parts: str) -> Path:
    """A file parity ships: `shipped("fixtures", "targets")`, `shipped("envs.toml")`."""
    return SHIPPED.joinpath(*parts)


class HomeError(UserError):
    """PARITY_HOME names a place parity cannot keep its home in (exit 2, one line)."""


def home() -> Path:
    """Where release environments, the fixture cache and the user's envs.toml live."""
    given = os.environ.get("PARITY_HOME")
    if given:
        return usable_home(Path(given).expanduser().absolute(), given)
    if CHECKOUT is not None:
        return CHECKOUT / ".envs"
    return _platform_cache() / "parity"


def usable_home(path: Path, given: str) -> Path:
    """`path` when it is a directory this user can write, or one it can create (its nearest
    existing ancestor is such a directory); else HomeError saying which, and why. Otherwise
    every later step fails on a path inside it ('the environment ... is not built', naming
    $PARITY_HOME/NAME under a file) and `setup` cannot build there either."""
    where = path
    while not os.path.lexists(where) and where.parent != where:
        where = where.parent
    fix = "point PARITY_HOME at a directory you can write, or unset it"
    if not where.is_dir():
        what = "a file" if where.is_file() else ("a broken link" if where.is_symlink() else "not a directory")
        why = f"it is {what}" if where == path else f"and cannot be made one: {where} is {what}"
        raise HomeError(f"PARITY_HOME={given}: not a directory ({why}); {fix}")
    if not os.access(where, os.W_OK | os.X_OK):
        why = "not writable" if where == path else f"cannot be created: {where} is not writable"
        raise HomeError(f"PARITY_HOME={given}: {why} by this user (parity builds environments and keeps "
                        f"its cache there); {fix}")
    return path


def cache_dir() -> Path:
    """What parity builds from seeds and may rebuild at any time (fixtures/, ...)."""
    return home() / "cache"


def user_envs() -> Path:
    return home() / USER_ENVS


def setup_command(name: str | None = None) -> str:
    """The command that builds an environment, as the reader would type it here."""
    cmd = "./dev setup" if CHECKOUT is not None else "parity setup"
    return f"{cmd} {name}" if name else cmd


def _platform_cache() -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    if os.name == "nt":
        return Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
