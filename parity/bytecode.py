"""Bytecode shared between the environments parity builds, package by installed package.

A child of an environment parity built keeps the bytecode of what it imports under
ENV/.pycache (PYTHONPYCACHEPREFIX: parity.envs.keep_bytecode), where a module's bytecode lives
at .pycache/<its source's absolute path>. Every release environment installs torch, most of
transformers and their dependencies from one package cache, as hard links to the same files
(parity.build_env), yet each compiled them again under its own path: a first SGLang check in
a fresh environment took 65 s, 35 s of it compiling 5,300 modules of which about 80% were the
same files another environment had already compiled (docs/development.md, 'Environments').

`share(env)` makes ENV/.pycache's folder for each installed package a link to one folder per
installed copy of that package, in the store beside the environments (HOME/.bytecode):
named by the distribution and by the identity (device, inode) of one of its files, so two
environments meet in one folder only where their files are the same files on disk, hard links
of one cached wheel. The store is shared, never trusted: Python checks every bytecode file
against its own source's size and modification time before using it, so a file that differs
(an edited copy, another release) is compiled again, never run from another's bytecode.

Left as they are: a top-level folder that several distributions install into (a namespace
package), a single-file module, and anything in an environment that is not parity's. The
store is never pruned: removing HOME/.bytecode is always safe (the next run makes it again).
Stdlib only.
"""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
from contextlib import suppress
from pathlib import Path

STORE = ".bytecode"  # beside the environments, in parity's home
MARKER = ".shared"  # in ENV/.pycache: what share() last linked (the installed distributions), as one line
LAYOUT = "1"  # bump when the layout below changes: every environment is linked again


def share(env: Path, prefix: Path) -> None:
    """Link each installed package's bytecode folder under `prefix` (ENV/.pycache) to the
    store's folder for that installed copy. Runs again whenever the environment's distributions
    have changed since it last ran (a rebuild in place, a package added) or the store is gone:
    a link to another copy's folder is replaced, a missing store folder made again. Safe to run
    from several processes at once; a failure leaves the folder to compile in place."""
    site = _site_packages(env)
    if site is None:
        return
    store = env.parent / STORE  # the home the environment was built in
    marker = prefix / MARKER
    stamp = _stamp(site)
    with suppress(OSError):
        if marker.read_text() == stamp and store.is_dir():
            return
    here = prefix / str(Path(os.path.abspath(site))).lstrip("/")
    for top, key in _packages(site).items():
        with suppress(OSError):  # another process got there first, or the store is not writable
            _link(here / top, store / key / top)
    with suppress(OSError):
        prefix.mkdir(parents=True, exist_ok=True)
        marker.write_text(stamp)


def _link(link: Path, target: Path) -> None:
    """`link` -> `target` (a folder in the store, made if missing). Bytecode already compiled
    at `link` moves into the store when the store has none for it, and is dropped otherwise
    (Python checks every file against its source, so either copy is only ever a cache)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink():
        if os.readlink(link) == str(target):
            target.mkdir(exist_ok=True)  # the store may have been removed since
            return
        if _same_copy(link, target):  # a folder of the same installed copy in another store (a test's
            return                    # copy of an environment linking its original's bytecode)
        spare = link.with_name(f".{link.name}-{os.getpid()}")  # a link to another copy's folder: replaced
        spare.unlink(missing_ok=True)
        target.mkdir(exist_ok=True)
        spare.symlink_to(target, target_is_directory=True)
        os.replace(spare, link)
        return
    if link.is_dir():
        if not target.exists():
            os.rename(link, target)  # compiled here before: into the store
        else:
            old = link.with_name(f".{link.name}-{os.getpid()}-old")
            os.rename(link, old)
            shutil.rmtree(old, ignore_errors=True)
    target.mkdir(exist_ok=True)
    link.symlink_to(target, target_is_directory=True)


def _same_copy(link: Path, target: Path) -> bool:
    """Whether `link` leads to an existing store folder of the same key (the same installed files)."""
    real = Path(os.path.realpath(link))
    return real.is_dir() and real.name == target.name and real.parent.name == target.parent.name


def _stamp(site: Path) -> str:
    """What share() links by: the installed distributions (each one's RECORD as installed:
    a reinstall writes a new one), and this layout."""
    parts = [LAYOUT]
    for info in sorted(site.glob("*.dist-info")):
        try:
            st = os.stat(info / "RECORD")
        except OSError:
            continue
        parts.append(f"{info.name} {st.st_ino} {st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _site_packages(env: Path) -> Path | None:
    found = sorted(env.glob("lib/python3*/site-packages"))
    return found[0] if len(found) == 1 else None


def _packages(site: Path) -> dict[str, str]:
    """{top-level package folder: its store key} for the folders one distribution owns."""
    owners: dict[str, set[str]] = {}
    sample: dict[str, Path] = {}
    for info in site.glob("*.dist-info"):
        dist = info.name[:-len(".dist-info")]
        try:
            with open(info / "RECORD", newline="", encoding="utf-8") as f:
                rows = [row[0] for row in csv.reader(f) if row]
        except (OSError, ValueError, csv.Error):
            continue  # unreadable: its folders stay in the environment
        for path in rows:
            parts = Path(path).parts
            if len(parts) < 2 or parts[0] in ("..", "__pycache__") or parts[0].endswith((".dist-info", ".data")):
                continue
            owners.setdefault(parts[0], set()).add(dist)
            if path.endswith(".py") and parts[0] not in sample:
                sample[parts[0]] = site / path
    keys = {}
    for top, dists in owners.items():
        if len(dists) != 1 or top not in sample or not (site / top).is_dir():
            continue
        try:
            st = os.stat(sample[top])
        except OSError:
            continue
        keys[top] = f"{next(iter(dists))}-{st.st_dev:x}-{st.st_ino:x}"
    return keys
