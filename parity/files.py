"""Files parity writes for the user (locks, exports, generated docs): the modes a plain
`open(path, "w")` or `mkdir` would give, under the user's umask, and atomic replacement.

A lock is committed and read by CI jobs and teammates, often as another user on a shared
runner: written through `tempfile.mkstemp` (mode 0600) and renamed into place, it would stay
unreadable to them. So the file parity renames into place gets the mode any other file the
user writes gets: 0666 less the umask (0644 under the usual 022).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable


def umask() -> int:
    """The process's umask, read without changing it where the system says it (Linux's
    /proc/self/status: no window in which another thread creates a file under umask 0)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)  # the strictest value while it is read, never a looser one
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a new file gets from `open(path, "w")`: 0666 less the umask."""
    return 0o666 & ~umask()


def dir_mode() -> int:
    """The mode a new directory gets from `mkdir`: 0777 less the umask."""
    return 0o777 & ~umask()


def write_atomically(path: Path, text: str, error: Callable[[str], Exception]) -> None:
    """Write `text` beside `path`, then rename it over `path`: an interruption or a full disk
    leaves the old file (or none), never half of one. The new file has the umask's mode
    (`file_mode`), as a plain write would give it. Any OSError becomes `error(reason)`."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        if hasattr(os, "fchmod"):  # mkstemp's 0600 would hide the file from everyone else
            os.fchmod(fd, file_mode())
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise error(str(exc.strerror or exc)) from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
