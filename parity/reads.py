"""What a process read: every file it imported, opened or mapped, and every directory it
searched, with each one's state (stat) when it was read.

A reply of a parity child is worth keeping (parity.reply_cache) only while everything the
child ran is unchanged, and a warmed interpreter (parity.forkserver) may serve forks only
while what it imported is unchanged. Neither can know in advance what the installed engine
will import, so the child records it while it runs:

- files opened (the `open` audit event: `open()`, `io.open_code`, which the import system
  uses for every source and bytecode file, and `os.open`), recorded with their stat on first
  sight, or as absent when they did not exist (an optional module looked for and missing:
  its appearing later changes what runs);
- every module's `__file__` and, when it exists, its bytecode (`__cached__`): what was
  imported before the audit hook was installed (the interpreter's own start-up) included;
- every shared library mapped into the process (`/proc/self/maps`, where it exists): the
  extension modules and what they load in turn (libtorch);
- every directory the import system searched (`sys.path_importer_cache`, `os.listdir` and
  `os.scandir` audit events), with a digest of the names in it: a module added on
  PYTHONPATH, or to a package, is a new name in a directory that was searched.

Files under the process's own temporary directories, and /proc, /sys and /dev, are left out:
they are the child's own scratch, removed when it ends.

Stdlib only: it runs first in every environment parity builds, whatever it has installed.
"""

from __future__ import annotations

import hashlib
import os
import stat as stat_module
import sys
import tempfile

ENV = "PARITY_RECORD_READS"  # set in a child's environment: record, and add the record to the reply
REPLY_KEY = "__reads__"  # where reply_over_stdio puts the record in the reply

_SKIP = ("/proc/", "/sys/", "/dev/")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

_files: dict[str, list[int] | None] = {}  # path -> stat when first read (None: absent)
_dirs: set[str] = set()
_scratch: set[str] = set()  # temp dirs seen by this process: its own, not inputs
_installed = False


def file_state(path: str) -> list[int] | None:
    """[size, mtime_ns, ctime_ns, inode, device] of a regular file; None when absent or not a file.
    ctime changes on every write, even one that puts the mtime back."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat_module.S_ISREG(st.st_mode):
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def dir_state(path: str) -> list | None:
    """[mtime_ns, inode, digest of the names in it] of a directory; None when absent.
    `__pycache__` is left out of the names: bytecode caches appear as code is first imported."""
    try:
        st = os.stat(path)
        if not stat_module.S_ISDIR(st.st_mode):
            return None
        names = sorted(n for n in os.listdir(path) if n != "__pycache__")
    except (OSError, ValueError):
        return None
    return [st.st_mtime_ns, st.st_ino, hashlib.sha256("\0".join(names).encode()).hexdigest()]


def _remember_scratch() -> None:
    for where in (tempfile.gettempdir(), os.environ.get("TMPDIR")):
        if where:
            _scratch.add(os.path.realpath(where).rstrip("/") + "/")


def _path(arg) -> str | None:
    if isinstance(arg, int):
        return None  # an already open descriptor
    try:
        path = os.fsdecode(os.fspath(arg))
    except TypeError:
        return None
    return os.path.abspath(path) if path else None


def _hook(event: str, args: tuple) -> None:
    if event == "open":
        path = _path(args[0])
        if path is None or path in _files:
            return
        mode, flags = args[1], args[2]
        if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS):
            return  # written, not read: what it writes is the child's output
        _files[path] = file_state(path)
    elif event in ("os.listdir", "os.scandir"):
        path = _path(args[0] if args and args[0] is not None else ".")
        if path is not None:
            _dirs.add(path)


def start() -> None:
    """Record from now on (once per process; a fork inherits what its parent recorded)."""
    global _installed
    if _installed:
        return
    _installed = True
    _remember_scratch()
    sys.addaudithook(_hook)


def _module_files() -> set[str]:
    found: set[str] = set()
    for module in list(sys.modules.values()):
        try:
            names = vars(module)  # never getattr: a lazy module (transformers') imports on it
        except TypeError:
            continue
        for attr in ("__file__", "__cached__"):
            where = names.get(attr)
            if isinstance(where, str) and where and (attr == "__file__" or os.path.isfile(where)):
                found.add(os.path.abspath(where))  # bytecode only where it was written
    return found


def _mapped_files() -> set[str]:
    try:
        with open("/proc/self/maps") as f:
            fields = [line.split(None, 5) for line in f.read().splitlines()]
    except OSError:
        return set()
    return {f[5] for f in fields if len(f) == 6 and f[5].startswith("/") and not f[5].endswith("(deleted)")}


def _searched_dirs() -> set[str]:
    found = {os.path.abspath(p or ".") for p in sys.path}
    for entry, finder in list(sys.path_importer_cache.items()):
        if finder is not None and isinstance(entry, str):
            found.add(os.path.abspath(entry or "."))
    return found


def _kept(path: str) -> bool:
    real = os.path.realpath(path)
    return not (path.startswith(_SKIP) or any(p.startswith(s) for s in _scratch for p in (path + "/", real + "/")))


def collect() -> dict:
    """What this process has read so far:
    {"files": {path: state or None}, "dirs": {path: state or None}, "changed": [paths]}.
    `changed`: files that differ now from when they were first read (edited while it ran)."""
    _remember_scratch()
    files: dict[str, list[int] | None] = {}
    changed: list[str] = []
    for path, then in list(_files.items()):
        if not _kept(path):
            continue
        now = file_state(path)
        if then is not None and now != then and not _is_bytecode(path):
            changed.append(path)
        files[path] = now
    for path in loaded_files():
        if path not in files and _kept(path):
            files[path] = file_state(path)
    dirs = {path: dir_state(path) for path in sorted(_dirs | _searched_dirs()) if _kept(path)}
    return {"files": files, "dirs": dirs, "changed": sorted(changed)}


def _is_bytecode(path: str) -> bool:
    return path.endswith((".pyc", ".pyo"))  # rewritten by the import system when its source changes


def dir_unchanged(path: str, state: list | None) -> bool:
    """Whether directory `path` still has the names `state` (a `dir_state`) recorded: by its
    stat when that is the same, else by listing it again."""
    if state is None:
        return dir_state(path) is None
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return False
    if [st.st_mtime_ns, st.st_ino] == state[:2]:
        return True
    now = dir_state(path)
    return now is not None and now[2] == state[2]


def file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


_digests: dict[tuple, str] = {}


def content_digest(path: str) -> str:
    """`file_digest(path)`, remembered in this process while the file keeps its state
    (`file_state`): a file read by many (libtorch) is hashed once per process."""
    memo = (path, tuple(file_state(path) or ()))
    if memo not in _digests:
        _digests[memo] = file_digest(path)
    return _digests[memo]


def loaded_files() -> set[str]:
    """Every file this process has loaded code from: modules (source and bytecode) and mapped
    shared libraries."""
    return _module_files() | _mapped_files()


def holds(stored: dict) -> tuple[bool, bool]:
    """(valid, refreshed) of a stored record ({"files": {path: state + [sha256] or None}, "dirs":
    {path: dir_state or None}}): whether every file and directory is as it was (a file by its
    stat, else by its contents; a directory by its stat, else by its names), and whether a stat
    differed while the contents did not (then `stored` is updated, for the next check to be
    cheap again)."""
    refreshed = False
    for path, was in stored["files"].items():
        now = file_state(path)
        if was is None or now is None:
            if (was is None) != (now is None):
                return False, False
            continue
        if now == was[:-1]:
            continue
        try:
            if content_digest(path) != was[-1]:
                return False, False
        except OSError:
            return False, False
        stored["files"][path] = [*now, was[-1]]
        refreshed = True
    for path, was in stored["dirs"].items():
        if was is None:
            if dir_state(path) is not None:
                return False, False
            continue
        try:
            st = os.stat(path)
        except OSError:
            return False, False
        if [st.st_mtime_ns, st.st_ino] == was[:2]:
            continue
        now = dir_state(path)
        if now is None or now[2] != was[2]:
            return False, False
        stored["dirs"][path] = now  # the same names, another stat (a name added and removed again)
        refreshed = True
    return True, refreshed


def baseline() -> dict:
    """`collect()`, with the contents' digest of each bytecode file: what `changed_since`
    compares against (a process that will go on running what it imported: a forkserver)."""
    record = collect()
    record["bytecode"] = {p: file_digest(p) for p, state in record["files"].items()
                          if state is not None and _is_bytecode(p)}
    return record


def changed_since(record: dict) -> list[str]:
    """The paths of `record` (a `baseline()`) that differ now: empty when none does. A file
    counts as changed when its stat does (a touch included: never stale, sometimes a
    needless restart); a bytecode file, which other processes may rewrite with the same
    bytes, when its contents do."""
    stale = []
    for path, state in record["files"].items():
        now = file_state(path)
        if now == state:
            continue
        if now is not None and path in record.get("bytecode", {}):
            try:
                if file_digest(path) == record["bytecode"][path]:
                    continue
            except OSError:
                pass
        stale.append(path)
    stale += [p for p, state in record["dirs"].items() if not dir_unchanged(p, state)]
    return stale


if os.environ.get(ENV) == "1":
    start()
