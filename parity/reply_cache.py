"""The on-disk cache of extraction replies: a repeated `parity check` skips every extraction
whose inputs have not changed.

An extraction is a child process (`parity.envs.run_module`) whose JSON reply depends on
nothing but what it runs and what it is asked. A reply is stored under a key that changes
with every one of those (a stale reply is a false verdict, so when in doubt nothing is
cached):

- the interpreter: its real path, `sys.version`, platform, and the `sys.path` the child sees
  (asked of the interpreter itself, once per process);
- every distribution installed on that path: its RECORD file, which lists each installed
  file with its sha256 (so another version, or a reinstall with other contents, changes it),
  and the `.pth` files. A distribution without a RECORD, or an editable install other than
  parity's own, cannot be hashed this way: then that interpreter's replies are not cached;
- parity's own source (the child runs it first on PYTHONPATH: this checkout, or, installed,
  a fixed link to the package, `parity.envs.import_dir`): every file under `parity/`;
- the module actually run (after `PARITY_PROBE_OVERRIDES`, see `parity.envs`) and the files
  of its package chain when it lives beside parity (a test's drift module);
- the request, with every absolute path in it replaced by the hash of what it names (a
  file's bytes; a directory's names and bytes, recursively: a draft's config.json and
  weights);
- the environment variables that steer the child (`PARITY_*`, `SGLANG_*`, `TORCH*`,
  `TRANSFORMERS_*`, thread counts, the hash seed).

Not cached: a reply of a child that raised (it carries a `traceback`), a reply naming a
resource failure (`MemoryError`, `OSError` and kin, timeouts), and anything at all when
`PARITY_NO_CACHE=1`.

Each entry is one JSON file, written to a temporary file in its own directory and moved
into place with `os.replace`: a reader sees a whole entry or none, never a torn one, across
threads, pytest-xdist workers and processes. When two of them miss the same key at once, a
lock (one of 256 stripes; where `fcntl` exists) lets one run the child while the others
wait and then read its reply: that only saves work, correctness does not depend on it.

The request's paths recur in replies (an error naming the draft's config.json). They are
stored as placeholders and filled with the asking request's own paths on a hit, so a reply
never names a file of an earlier run (the gate's verification copies live in fresh temp
directories, with the same contents each time).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator
from urllib.parse import urlparse
from urllib.request import url2pathname

ROOT = Path(__file__).resolve().parent.parent
NO_CACHE = "PARITY_NO_CACHE"
FORMAT = 1  # bump when the key or the entry format changes

# Environment variables that reach the child and may change its reply.
_ENV_PREFIXES = ("PARITY_", "SGLANG_", "TORCH", "TRANSFORMERS_", "SPECULATORS_")
_ENV_NAMES = ("PYTHONHASHSEED", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES")
# ...except those that only say where things go or how this cache behaves.
_ENV_IGNORED = (NO_CACHE, "PARITY_PROBE_OVERRIDES", "PARITY_HOME", "PARITY_DEBUG")

# A reply that names one of these failed for a reason outside its inputs: never stored.
_TRANSIENT = ("MemoryError", "OSError", "IOError", "TimeoutError", "BlockingIOError",
              "InterruptedError", "ConnectionError", "BrokenPipeError", "KeyboardInterrupt",
              "Killed", "out of memory")


def cache_dir() -> Path:
    """Where replies are kept: the one place to change to move the cache."""
    from .home import cache_dir as home_cache

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


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def path_digest(path: Path) -> str:
    """A file's bytes, or a directory's relative names and files' bytes, recursively."""
    if path.is_file():
        return "file:" + _file_digest(path)
    if not path.is_dir():
        raise Uncacheable(f"{path} is neither a file nor a directory")
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted(filenames):
            f = Path(dirpath) / name
            rel = f.relative_to(path).as_posix()
            h.update(f"{rel}\0{_file_digest(f) if f.is_file() else 'not-a-file'}\n".encode())
        for name in dirnames:
            h.update(f"{(Path(dirpath) / name).relative_to(path).as_posix()}/\n".encode())
    return "dir:" + h.hexdigest()


def _normalize(value, paths: list[str]):
    """The request with each absolute path that exists replaced by the digest of its contents."""
    if isinstance(value, dict):
        return {k: _normalize(v, paths) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_normalize(v, paths) for v in value]
    if isinstance(value, str) and len(value) > 1 and os.path.isabs(value) and os.path.exists(value):
        paths.append(value)
        return {"path contents": path_digest(Path(value))}
    return value


_QUERY = ("import json, platform, sys; print(json.dumps({'executable': sys.executable, "
          "'version': sys.version, 'platform': platform.platform(), 'path': sys.path}))")
_interpreters: dict[tuple, dict] = {}
_digests: dict[tuple, str] = {}
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


def _installed_file_digest(path: Path) -> str:
    """A RECORD's or .pth file's digest, remembered while the file keeps its inode, size and
    modification time (RECORDs of a large environment are megabytes: read once per process)."""
    st = path.stat()
    memo = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    with _memo:
        if memo in _digests:
            return _digests[memo]
    digest = _file_digest(path)
    with _memo:
        _digests[memo] = digest
    return digest


def _is_parity_checkout(source: Path) -> bool:
    return (source / "parity" / "__init__.py").is_file()


def packages_digest(sys_path: list[str]) -> str:
    """Every distribution installed on `sys_path` (its RECORD), and the .pth files there."""
    h = hashlib.sha256()
    for p in sys_path:
        d = Path(p or ".")
        if not d.is_dir() or (d.resolve() == ROOT and (ROOT / "pyproject.toml").is_file()):
            continue  # a checkout: parity's own source is hashed by source_digest (an installed
            # parity's ROOT is site-packages, hashed like any other)
        for entry in sorted(d.iterdir()):
            if entry.suffix == ".pth" and entry.is_file():
                h.update(f"{entry}\0{_installed_file_digest(entry)}\n".encode())
            elif entry.suffix in (".dist-info", ".egg-info") and entry.is_dir():
                record = entry / "RECORD"
                if not record.is_file():
                    raise Uncacheable(f"{entry} has no RECORD: its files cannot be hashed")
                direct = entry / "direct_url.json"
                if direct.is_file():
                    info = json.loads(direct.read_text())
                    if info.get("dir_info", {}).get("editable"):
                        source = Path(url2pathname(urlparse(info.get("url", "")).path))
                        if not _is_parity_checkout(source):
                            raise Uncacheable(f"{entry.name} is an editable install of {source}")
                h.update(f"{entry}\0{_installed_file_digest(record)}\n".encode())
    return h.hexdigest()


def source_digest(module: str) -> str:
    """parity's own files, plus the package chain of `module` when it lives beside parity."""
    h = hashlib.sha256()
    package = ROOT / "parity"
    for f in sorted(package.rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts and f.suffix not in (".pyc", ".pyo"):
            h.update(f"{f.relative_to(ROOT).as_posix()}\0{_file_digest(f)}\n".encode())
    parts = module.split(".")
    if parts[0] != "parity" and (ROOT / parts[0]).is_dir():
        for i in range(1, len(parts) + 1):
            base = ROOT.joinpath(*parts[:i])
            for f in (base / "__init__.py", base.with_suffix(".py")):
                if f.is_file():
                    h.update(f"{f.relative_to(ROOT).as_posix()}\0{_file_digest(f)}\n".encode())
    return h.hexdigest()


def key_of(python: str, module: str, request: dict, env: dict[str, str]) -> Key:
    """The key of `python -m module` answering `request` in the child environment `env`.
    Raises Uncacheable when something the reply may depend on cannot be hashed."""
    info = interpreter(python, env)
    paths: list[str] = []
    material = {
        "format": FORMAT,
        "interpreter": {k: info[k] for k in ("executable", "real_executable", "version", "platform", "path")},
        "packages": packages_digest(info["path"]),
        "source": source_digest(module),
        "module": module,
        "request": _normalize(request, paths),
        "env": {k: v for k, v in sorted(env.items()) if k not in _ENV_IGNORED
                and (k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES)},
    }
    return Key(_sha(json.dumps(material, sort_keys=True).encode()), tuple(paths))


# -- the entries -------------------------------------------------------------------------------


def _placeholder(i: int) -> str:
    return f"@@parity-request-path-{i}@@"


def _escaped(path: str) -> str:
    return json.dumps(path)[1:-1]  # the path as it appears inside a JSON string


def cacheable(reply: dict) -> bool:
    if "traceback" in reply:
        return False
    text = json.dumps(reply)
    return not any(word in text for word in _TRANSIENT)


class ReplyCache:
    """Entries under `root`, one JSON file per key."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def entry(self, key: Key) -> Path:
        return self.root / key.digest[:2] / f"{key.digest}.json"

    def get(self, key: Key) -> dict | None:
        """The stored reply, its paths filled from `key`; None on a miss or an unreadable entry."""
        try:
            stored = json.loads(self.entry(key).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(stored, dict) or stored.get("key") != key.digest or not isinstance(
                stored.get("reply"), str):
            return None
        text = stored["reply"]
        for i in reversed(range(len(key.paths))):
            text = text.replace(_placeholder(i), _escaped(key.paths[i]))
        try:
            return json.loads(text)
        except ValueError:
            return None

    def put(self, key: Key, reply: dict) -> None:
        """Store atomically: a temp file beside the entry, then os.replace."""
        text = json.dumps(reply)
        for i in sorted(range(len(key.paths)), key=lambda i: -len(key.paths[i])):
            text = text.replace(_escaped(key.paths[i]), _placeholder(i))
        target = self.entry(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key.digest[:16]}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"key": key.digest, "reply": text}, f)
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


def cached_reply(python: str, module: str, request: dict, env: dict[str, str],
                 run: Callable[[], dict]) -> dict:
    """`run()`'s reply, from the cache when `python -m module` already answered this request
    with everything it depends on unchanged; stored after a miss."""
    if not enabled():
        return run()
    try:
        key = key_of(python, module, request, env)
    except (Uncacheable, OSError, ValueError, subprocess.SubprocessError):
        return run()
    cache = ReplyCache(cache_dir())
    hit = cache.get(key)
    if hit is not None:
        return hit
    with cache.computing(key):
        hit = cache.get(key)  # another process may have stored it while this one waited
        if hit is not None:
            return hit
        reply = run()
        if cacheable(reply):
            try:
                cache.put(key, reply)
            except OSError:  # a cache that cannot be written: the reply still counts
                pass
        return reply


__all__ = ["Key", "NO_CACHE", "ReplyCache", "Uncacheable", "cache_dir", "cached_reply", "enabled",
           "key_of", "path_digest"]
