"""An installed distribution's files against its RECORD, and against another installation of the
same release: what parity checks before it runs a release in its own environment instead of the
user's installed copy (parity.extract.installed).

A wheel's RECORD lists every file it installed with its sha256. A file of the user's installation
whose content no longer has that hash was edited in place; a RECORD that differs from the one of
parity's environment of the same release is another build. Either way the code parity would run
is not the code the user serves, so such files are named and the run refused. Files outside the
package's folders (console scripts, whose first line names the interpreter), the `.dist-info`
folder itself (the installer's own notes) and bytecode are not compared.

The hashes of the user's files are kept between runs (the cache: size and modification time of
each file), so a second check of an unedited installation reads no file again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from .home import cache_dir

SHOWN = 3  # files a refusal names before counting the rest


@dataclass(frozen=True)
class Installed:
    """An installed distribution: its name, version, the folder it is installed in, its RECORD's hashes
    (path relative to site-packages -> urlsafe-base64 sha256, unpadded, as RECORD writes it) and
    whether it is an editable install (and from where)."""

    name: str
    version: str
    site: Path
    hashes: dict[str, str]
    editable: str | None


def _compared(path: str) -> bool:
    return not (path.startswith("..") or ".dist-info/" in path or "__pycache__/" in path
                or path.endswith((".pyc", ".pyo")))


def read(dist: metadata.Distribution) -> Installed:
    """What `dist` says of itself (nothing imported)."""
    hashes = {str(f): f.hash.value for f in dist.files or () if f.hash is not None and f.hash.mode == "sha256"
              and _compared(str(f))}
    editable = None
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except (OSError, ValueError):
        direct = {}
    if isinstance(direct, dict) and (direct.get("dir_info") or {}).get("editable"):
        editable = str(direct.get("url") or "a local directory").removeprefix("file://")
    return Installed(dist.metadata["Name"], dist.version, Path(str(dist.locate_file(""))), hashes, editable)


def installed(name: str, where: Path | None = None) -> Installed | None:
    """The distribution `name` installed in this interpreter (`where`: in that site-packages
    folder instead), or None."""
    if where is None:
        try:
            return read(metadata.distribution(name))
        except metadata.PackageNotFoundError:
            return None
    wanted = _norm(name)
    for dist in metadata.distributions(path=[str(where)]):
        if _norm(dist.metadata["Name"] or "") == wanted:
            return read(dist)
    return None


def _norm(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def _sha(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def edited(dist: Installed) -> list[str]:
    """The files of `dist` whose content is not what its RECORD says it installed (edited, or
    removed), sorted. Hashes are kept in the cache by size and modification time."""
    site = dist.site
    key = f"{site}\0{_norm(dist.name)}\0{dist.version}".encode()
    memo_file = cache_dir() / "record" / (hashlib.sha256(key).hexdigest()[:24] + ".json")
    try:
        memo = json.loads(memo_file.read_text())
    except (OSError, ValueError):
        memo = {}
    fresh, out = {}, []
    for rel, want in dist.hashes.items():
        path = site / rel
        try:
            st = path.stat()
        except OSError:
            out.append(f"{rel} (removed)")
            continue
        stamp = [st.st_size, st.st_mtime_ns]
        seen = memo.get(rel)
        got = seen[2] if isinstance(seen, list) and seen[:2] == stamp else _sha(path)
        fresh[rel] = [*stamp, got]
        if got != want:
            out.append(rel)
    try:
        memo_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo_file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(fresh))
        os.replace(tmp, memo_file)
    except OSError:
        pass  # a cache: the next check hashes again
    return sorted(out)


def differing(mine: Installed, theirs: Installed) -> list[str]:
    """The files the two installations' RECORDs list with different content, or in one only."""
    paths = set(mine.hashes) | set(theirs.hashes)
    return sorted(p for p in paths if mine.hashes.get(p) != theirs.hashes.get(p))


def named(files: list[str]) -> str:
    """A few of `files`, then how many more."""
    shown = ", ".join(files[:SHOWN])
    return shown + (f" and {len(files) - SHOWN} more" if len(files) > SHOWN else "")
