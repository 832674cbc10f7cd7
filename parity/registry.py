"""The releases a package index publishes (PEP 691 JSON simple API; PyPI by default).

`PIP_INDEX_URL` (or `UV_INDEX_URL`) points it at another index, as it does pip and uv. A
release whose every file is yanked is left out, as installers leave it out.
"""

from __future__ import annotations

import json
import os
import urllib.request

from .errors import UserError

DEFAULT_INDEX = "https://pypi.org/simple"


class RegistryError(UserError, RuntimeError):
    """The index could not be read (one line)."""


def index_url() -> str:
    return (os.environ.get("PIP_INDEX_URL") or os.environ.get("UV_INDEX_URL") or DEFAULT_INDEX).rstrip("/")


def _files(package: str) -> list[tuple]:
    """(version, file entry) of every live (not yanked) file of `package` on the index."""
    from packaging.utils import canonicalize_name, parse_wheel_filename, parse_sdist_filename
    from packaging.version import InvalidVersion

    url = f"{index_url()}/{canonicalize_name(package)}/"
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            data = json.load(reply)
    except (OSError, ValueError) as exc:
        raise RegistryError(f"cannot list {package}'s releases from {url}: {exc}") from None
    out = []
    for f in data.get("files", []):
        if f.get("yanked"):
            continue
        name = f.get("filename", "")
        try:
            version = (parse_wheel_filename(name)[1] if name.endswith(".whl") else parse_sdist_filename(name)[1])
        except (ValueError, InvalidVersion):
            continue
        out.append((version, f))
    return out


def published(package: str, since: str | None = None) -> list[str]:
    """Every release of `package` the index has (pre-releases included), oldest first, from
    `since` on."""
    from packaging.version import Version

    live = {version for version, _ in _files(package)}
    floor = Version(since) if since else None
    return [str(v) for v in sorted(live) if floor is None or v >= floor]


def uploaded(package: str, version: str) -> str:
    """When `package` `version` was published: the earliest upload time of its files (PEP 700's
    `upload-time`, RFC 3339), as uv's `--exclude-newer` takes it."""
    from packaging.version import Version

    times = sorted(f["upload-time"] for v, f in _files(package) if v == Version(version) and f.get("upload-time"))
    if not times:
        raise RegistryError(f"the index gives no upload time for {package} {version}")
    return times[0]


def provides_module(distribution: str, module: str) -> bool:
    """Whether a distribution is taken to install top-level `module`: its name is the module's,
    or has it as one of its words, or run together (`lm-format-enforcer` for `lmformatenforcer`,
    `nvidia-cutlass-dsl` for `cutlass`), as a release's `Requires-Dist` names what its code imports."""
    import re

    dist, top = distribution.lower(), module.lower()
    return top in (*re.split(r"[-_.]", dist), re.sub(r"[-_.]", "", dist))
