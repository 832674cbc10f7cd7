"""The on-disk cache of extraction replies: a repeated `parity check` skips every extraction
whose inputs, and every file it read, have not changed.

An extraction is a child process (`parity.envs.run_module`) whose JSON reply depends on
nothing but what it runs and what it is asked. A stale reply is a false verdict, so a reply
is served only while all of that is unchanged, and when in doubt nothing is cached. Two
parts decide it:

The key, known before the child runs:
- the interpreter: its real path, `sys.version`, platform, and the `sys.path` the child sees
  (asked of the interpreter itself, once per process), and the `.pth` files on that path
  (site runs them at start-up);
- parity's own source (the child runs it first on PYTHONPATH: this checkout, or, installed,
  a fixed link to the package, `parity.envs.import_dir`): every file under `parity/`;
- the module actually run (after `PARITY_PROBE_OVERRIDES`, see `parity.envs`) and the files
  of its package chain when it lives beside parity (a test's drift module);
- the request, with every absolute path in it replaced by the hash of what it names (a
  file's bytes; a directory's names and bytes, recursively: a draft's config.json and
  weights);
- the child's environment: every variable, but for those that only say where a run's
  temporary files go or are the test runner's bookkeeping (parity.workspace.run_local) and
  parity's own switches for this run (`_ENV_IGNORED`): engines and their libraries read
  variables of their own, and SGLang enumerates the whole environment at import.

What the child read, recorded by the child itself while it ran (`parity.reads`): every file
it imported (source and bytecode), opened or mapped (shared libraries), each with its stat
and, stored with the entry, its sha256; every file it looked for and did not find; every
directory the import system searched, with the names in it. A key holds one entry per
distinct record (`MAX_VARIANTS`); an entry is served only when every file of its record is
as it was: the same stat (size, mtime, ctime, inode, device), or, when the stat differs,
the same sha256 (then the stored stats are refreshed); every file looked for still absent;
every directory still holding the same names. So an edit of an installed file (a `.pyc`
alone included), a module added or removed on PYTHONPATH or in a package, an editable
install's source edited in place, or another release installed, each sends the next run to
the child. A child that did not record what it read, or a file that changed while it ran,
is not stored.

Not cached either: a reply of a child that raised (it carries a `traceback`), a reply the
child flagged as meeting a failure outside its inputs (`parity.errors.TRANSIENT_KEY`: memory,
`OSError` and kin, timeouts, a killed subprocess; the child decides it from the exception's
type, the cache never reads the reply's words), and anything at all when
`PARITY_NO_CACHE=1`. Every reply says where it came from (`SOURCE_KEY`: hit, stored, or why
not stored, with the key's digest), and the contracts' provenance carries it.

Each entry is one JSON file, written to a temporary file in its own directory and moved
into place with `os.replace`: a reader sees a whole entry or none, never a torn one, across
threads, pytest-xdist workers and processes. When two of them miss the same key at once, a
lock (one of 256 stripes; where `fcntl` exists) lets one run the child while the others
wait and then read its reply: that only saves work, correctness does not depend on it.

The request's paths recur in replies (an error naming the draft's config.json). They are
stored as placeholders and filled with the asking request's own paths on a hit, so a reply
never names a file of an earlier run (the gate's verification copies live in fresh temp
directories, with the same contents each time). Files under those paths are keyed by their
contents in the request, so they are left out of the record.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import threading
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from . import reads, runlog
from .errors import TRANSIENT_KEY
from .home import cache_dir as home_cache
from .workspace import run_local

ROOT = Path(__file__).resolve().parent.parent
NO_CACHE = "PARITY_NO_CACHE"
FORMAT = 3  # bump when the key, the entry format or a reply's shape changes (3: one `release` field, parity.contract.reply)
MAX_VARIANTS = 8  # entries kept per key (one per distinct record of what the child read)
SOURCE_KEY = "reply_cache"  # where a reply says whether it came from the cache

# Every environment variable reaches the child and may change its reply (the engines and their
# libraries read variables of their own, and several enumerate the whole environment at import),
# except those that only say where a run's temporary files go or are the test runner's
# bookkeeping (parity.workspace.run_local), and parity's own switches that say how this cache,
# the warmed servers, the run log or a test's override behave (the module an override runs is
# keyed itself).
_ENV_IGNORED = frozenset({NO_CACHE, "PARITY_PROBE_OVERRIDES", "PARITY_HOME", "PARITY_DEBUG", "PARITY_NO_FORKSERVER",
                          "PARITY_FORKSERVERS", reads.ENV, runlog.ENV})


def keyed_env(env: dict[str, str]) -> dict[str, str]:
    """The variables of a child's environment `env` that enter its key, sorted."""
    return {k: v for k, v in sorted(env.items()) if k not in _ENV_IGNORED and not run_local(k)}


def cache_dir() -> Path:
    """Where replies are kept: the one place to change to move the cache."""

    return home_cache() / "replies"


def enabled() -> bool:
    return os.environ.get(NO_CACHE, "") in ("", "0")


# -- the key -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Key:
    """A reply's cache key, and the request's absolute paths in the order they were hashed."""

    digest: str
    paths: tuple[str, ...]


class Uncacheable(Exception):
    """Something the reply may depend on cannot be hashed: run the child, store nothing."""


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def path_digest(path: Path) -> str:
    """A file's bytes, or a directory's relative names and files' bytes, recursively."""
    if path.is_file():
        return "file:" + reads.file_digest(str(path))
    if not path.is_dir():
        raise Uncacheable(f"{path} is neither a file nor a directory")
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted(filenames):
            f = Path(dirpath) / name
            rel = f.relative_to(path).as_posix()
            h.update(f"{rel}\0{reads.file_digest(str(f)) if f.is_file() else 'not-a-file'}\n".encode())
        for name in dirnames:
            h.update(f"{(Path(dirpath) / name).relative_to(path).as_posix()}/\n".encode())
    return "dir:" + h.hexdigest()


# A request's key whose values are the names the engine is shown (parity.extract.named): kept as
# written, never replaced by contents, since the engine reads the names themselves (two folders
# alike but for their names are two requests).
NAMES_KEY = "names"


def _normalize(value, paths: list[str]):
    """The request with each absolute path that exists replaced by the digest of its contents
    (but for the names under NAMES_KEY, kept as written)."""
    if isinstance(value, dict):
        return {k: v if k == NAMES_KEY else _normalize(v, paths) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_normalize(v, paths) for v in value]
    if isinstance(value, str) and len(value) > 1 and os.path.isabs(value) and os.path.exists(value):
        paths.append(value)
        return {"path contents": path_digest(Path(value))}
    return value


_QUERY = ("import json, platform, sys; print(json.dumps({'executable': sys.executable, "
          "'version': sys.version, 'platform': platform.platform(), 'path': sys.path}))")
_interpreters: dict[tuple, dict] = {}
_memo = threading.Lock()


def interpreter(python: str, env: dict[str, str]) -> dict:
    """What the child's interpreter is and where it imports from (asked once per process)."""
    exe = Path(python)
    stat = exe.stat() if exe.exists() else None
    memo = (str(python), env.get("PYTHONPATH", ""), stat and (stat.st_mtime_ns, stat.st_size))
    with _memo:
        if memo in _interpreters:
            return _interpreters[memo]
    query_env = {k: v for k, v in env.items() if k != "TMPDIR"}
    proc = subprocess.run([str(python), "-c", _QUERY], capture_output=True, text=True, env=query_env,
                          cwd=ROOT, timeout=120)
    if proc.returncode != 0:
        raise Uncacheable(f"{python} -c: exit {proc.returncode}")
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    info["real_executable"] = os.path.realpath(info["executable"])
    with _memo:
        _interpreters[memo] = info
    return info


def startup_digest(sys_path: list[str]) -> str:
    """The `.pth` files on `sys_path`: site runs them as the interpreter starts, before the child
    can record anything (an editable install's path hook, a path added)."""
    h = hashlib.sha256()
    for p in sys_path:
        d = Path(p or ".")
        if not d.is_dir():
            continue
        for entry in sorted(d.iterdir()):
            if entry.suffix == ".pth" and entry.is_file():
                h.update(f"{entry}\0{reads.content_digest(str(entry))}\n".encode())
    return h.hexdigest()


def source_digest(module: str) -> str:
    """parity's own files, plus the package chain of `module` when it lives beside parity."""
    h = hashlib.sha256()
    package = ROOT / "parity"
    for f in sorted(package.rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts and f.suffix not in (".pyc", ".pyo"):
            h.update(f"{f.relative_to(ROOT).as_posix()}\0{reads.file_digest(str(f))}\n".encode())
    parts = module.split(".")
    if parts[0] != "parity" and (ROOT / parts[0]).is_dir():
        for i in range(1, len(parts) + 1):
            base = ROOT.joinpath(*parts[:i])
            for f in (base / "__init__.py", base.with_suffix(".py")):
                if f.is_file():
                    h.update(f"{f.relative_to(ROOT).as_posix()}\0{reads.file_digest(str(f))}\n".encode())
    return h.hexdigest()


def request_digest(python: str, module: str, request: dict) -> str:
    """A digest of `python -m module` answering `request`, its paths named by their contents as a
    key names them: what tells two runs of a child that is never cached apart (parity.runlog)."""
    try:
        material = _normalize(request, [])
    except (Uncacheable, OSError):
        material = request
    return _sha(json.dumps({"python": python, "module": module, "request": material}, sort_keys=True,
                           default=str).encode())


def key_of(python: str, module: str, request: dict, env: dict[str, str]) -> Key:
    """The key of `python -m module` answering `request` in the child environment `env`.
    Raises Uncacheable when something the reply may depend on cannot be hashed."""
    info = interpreter(python, env)
    paths: list[str] = []
    material = {
        "format": FORMAT,
        "interpreter": {k: info[k] for k in ("executable", "real_executable", "version", "platform", "path")},
        "startup": startup_digest(info["path"]),
        "source": source_digest(module),
        "module": module,
        "request": _normalize(request, paths),
        "env": keyed_env(env),
    }
    return Key(_sha(json.dumps(material, sort_keys=True).encode()), tuple(paths))


# -- the record of what the child read --------------------------------------------------------


class NotStored(Exception):
    """A reply that must not be kept (the message says why)."""


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


class DigestMemo:
    """sha256s of files by path and state, kept beside the entries (`digests.json`): a new entry
    hashes only the files no earlier entry of any key has hashed in the same state (libtorch is
    hashed once, not once per process). A state includes the ctime, which every write of a file
    changes and no tool can set back, so an unchanged state is unchanged contents, the same
    rule by which an entry is served. Lost updates between processes cost time, never a
    wrong digest."""

    def __init__(self, root: Path):
        self.path = Path(root) / "digests.json"
        try:
            self.known: dict[str, list] = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.known = {}
        self.new: dict[str, list] = {}

    def digest(self, path: str, state: list[int]) -> str:
        known = self.known.get(path)
        if isinstance(known, list) and known[:-1] == state:
            return known[-1]
        digest = reads.content_digest(path)
        self.new[path] = [*state, digest]
        return digest

    def save(self) -> None:
        if not self.new:
            return
        try:
            current = json.loads(self.path.read_text())
        except (OSError, ValueError):
            current = {}
        with suppress(OSError):
            ReplyCache._write(self.path, {**current, **self.new})


def stored_reads(record: dict | None, request_paths: tuple[str, ...], memo: DigestMemo | None = None) -> dict:
    """The child's record (`parity.reads.collect`) as an entry keeps it: each file's state with
    its sha256 appended. Files under the request's paths are left out (the key holds their
    contents). NotStored when there is no record, or a file changed while the child ran or
    since it ended."""
    if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
        raise NotStored("the child did not record what it read")
    if record.get("changed"):
        raise NotStored(f"{record['changed'][0]} changed while the child ran")
    roots = tuple(os.path.realpath(p) for p in request_paths) + request_paths
    files: dict[str, list | None] = {}
    for path, state in sorted(record["files"].items()):
        if _under(path, roots):
            continue
        if reads.file_state(path) != state:
            raise NotStored(f"{path} changed since the child read it")
        files[path] = None if state is None else [*state, memo.digest(path, state) if memo
                                                  else reads.content_digest(path)]
    dirs = {p: state for p, state in sorted(record.get("dirs", {}).items()) if not _under(p, roots)}
    return {"files": files, "dirs": dirs}


# -- the entries -------------------------------------------------------------------------------


def _placeholder(i: int) -> str:
    return f"@@parity-request-path-{i}@@"


def _escaped(path: str) -> str:
    return json.dumps(path)[1:-1]  # the path as it appears inside a JSON string


def cacheable(reply: dict) -> bool:
    """Whether a reply may be stored: not when its child raised (a traceback) or flagged a
    failure outside its inputs (TRANSIENT_KEY, set by the child from the exception's type)."""
    return "traceback" not in reply and not reply.get(TRANSIENT_KEY)


class ReplyCache:
    """Entries under `root`: a directory per key, a JSON file per record of what was read."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def folder(self, key: Key) -> Path:
        return self.root / key.digest[:2] / key.digest

    def _variant(self, key: Key, record: dict) -> Path:
        return self.folder(key) / f"{_sha(json.dumps(record, sort_keys=True).encode())[:32]}.json"

    def get(self, key: Key) -> dict | None:
        """The stored reply whose record still holds, its paths filled from `key`; None on a miss
        (no entry, every entry's record broken by a change, or unreadable entries)."""
        try:
            variants = sorted(self.folder(key).glob("*.json"), key=lambda p: -p.stat().st_mtime_ns)
        except OSError:
            return None
        for entry in variants:
            try:
                stored = json.loads(entry.read_text())
            except (OSError, ValueError):
                continue
            if not isinstance(stored, dict) or stored.get("key") != key.digest or not isinstance(
                    stored.get("reply"), str) or not isinstance(stored.get("reads"), dict):
                continue
            valid, refreshed = reads.holds(stored["reads"])
            if not valid:
                continue
            if refreshed:
                self._write(entry, stored)
            else:
                with suppress(OSError):
                    os.utime(entry)  # most recently served first; the oldest are dropped first
            text = stored["reply"]
            for i in reversed(range(len(key.paths))):
                text = text.replace(_placeholder(i), _escaped(key.paths[i]))
            try:
                return json.loads(text)
            except ValueError:
                continue
        return None

    def put(self, key: Key, reply: dict, record: dict) -> None:
        """Store atomically (a temp file beside the entry, then os.replace), with `record`
        (`stored_reads`); the oldest entries past MAX_VARIANTS of the key are removed."""
        text = json.dumps(reply)
        for i in sorted(range(len(key.paths)), key=lambda i: -len(key.paths[i])):
            text = text.replace(_escaped(key.paths[i]), _placeholder(i))
        target = self._variant(key, record)
        self._write(target, {"key": key.digest, "reads": record, "reply": text})
        variants = sorted(self.folder(key).glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
        for old in variants[:-MAX_VARIANTS]:
            old.unlink(missing_ok=True)

    @staticmethod
    def _write(target: Path, content: dict) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.stem[:16]}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(content))  # one C-encoded string: json.dump's chunked encoding is pure Python
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @contextmanager
    def computing(self, key: Key) -> Iterator[None]:
        """Held while one caller computes `key`: others missing the same key wait, then hit."""
        try:
            import fcntl
        except ImportError:  # no advisory locks here: concurrent misses each compute
            yield
            return
        try:
            locks = self.root / "locks"
            locks.mkdir(parents=True, exist_ok=True)
            f = open(locks / key.digest[:2], "a")
        except OSError:  # a cache that cannot be written: compute without the lock
            yield
            return
        with f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


def _says(reply: dict, status: str, key: Key | None = None, why: str | None = None) -> dict:
    """`reply` with where it came from (SOURCE_KEY), without the child's record."""
    reply.pop(reads.REPLY_KEY, None)
    reply[SOURCE_KEY] = {"status": status, **({"key": key.digest} if key else {}), **({"why": why} if why else {})}
    return reply


def cached_reply(python: str, module: str, request: dict, env: dict[str, str],
                 run: Callable[[], dict]) -> dict:
    """`run()`'s reply, from the cache when `python -m module` already answered this request
    with everything it depends on, and every file it read, unchanged; stored after a miss.
    `run` must run the child with `env`, where `parity.reads.ENV` asks it to record its reads.
    The reply says where it came from under SOURCE_KEY: "hit", "stored", "not stored" (with
    why), or "off"."""
    if not enabled():
        return _says(run(), "off", why=f"{NO_CACHE}=1")
    try:
        key = key_of(python, module, request, env)
    except (Uncacheable, OSError, ValueError, subprocess.SubprocessError) as exc:
        return _says(run(), "not stored", why=f"the key could not be made: {exc}")
    cache = ReplyCache(cache_dir())
    hit = cache.get(key)
    if hit is not None:
        return _says(hit, "hit", key)
    with cache.computing(key):
        hit = cache.get(key)  # another process may have stored it while this one waited
        if hit is not None:
            return _says(hit, "hit", key)
        # An entry under this key whose record no longer holds: what the child read has changed.
        stale = cache.folder(key).is_dir() and any(cache.folder(key).glob("*.json"))
        reply = run()
        record = reply.pop(reads.REPLY_KEY, None)
        if not cacheable(reply):
            return _says(reply, "not stored", key, "the child failed for a reason outside its inputs")
        try:
            memo = DigestMemo(cache.root)
            cache.put(key, reply, stored_reads(record, key.paths, memo))
            memo.save()
        except NotStored as exc:
            return _says(reply, "not stored", key, str(exc))
        except OSError as exc:  # a cache that cannot be written: the reply still counts
            return _says(reply, "not stored", key, f"the cache could not be written: {exc}")
        return _says(reply, "stored", key, "a file the earlier entries read has changed" if stale else None)


__all__ = ["Key", "MAX_VARIANTS", "NO_CACHE", "NotStored", "ReplyCache", "SOURCE_KEY", "Uncacheable", "cache_dir",
           "cached_reply", "enabled", "key_of", "path_digest", "stored_reads"]
