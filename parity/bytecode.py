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
package), a single-file module, a folder whose bytecode already exists and cannot be moved
into the store, and anything in an environment that is not parity's. Stdlib only.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

STORE = ".bytecode"  # beside the environments, in parity's home
MARKER = ".shared-1"  # in ENV/.pycache once share() has run (bump when the layout below changes)


def share(env: Path, prefix: Path) -> None:
    """Link each installed package's bytecode folder under `prefix` (ENV/.pycache) to the
    store's folder for that installed copy. Safe to run from several processes at once: a
    link another one made first is left, and a failure leaves the folder to compile in place."""
    marker = prefix / MARKER
    if marker.exists():
        return
    site = _site_packages(env)
    if site is None:
        return
    store = env.parent / STORE  # the home the environment was built in
    here = prefix / str(Path(os.path.abspath(site))).lstrip("/")
    for top, key in _packages(site).items():
        target = store / key / top
        link = here / top
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            here.mkdir(parents=True, exist_ok=True)
            if link.is_symlink():
                continue
            if link.is_dir():  # compiled here before: its bytecode moves into the store, once
                if target.exists():
                    continue
                os.rename(link, target)
            else:
                target.mkdir(exist_ok=True)
            link.symlink_to(target, target_is_directory=True)
        except OSError:
            continue  # another process got there first, or the store is not writable: compile in place
    try:
        marker.write_text("")
    except OSError:
        pass


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
            with open(info / "RECORD", newline="") as f:
                rows = [row[0] for row in csv.reader(f) if row]
        except OSError:
            continue
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
