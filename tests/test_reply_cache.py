"""The reply cache (parity.reply_cache): an unchanged input hits, a changed one misses (the
interpreter, the installed files, parity's source, the module, the request, the contents a
path in it names), and processes writing the same key at once never give a torn read.

The child is `tests.reply_echo` (a real subprocess through `run_module`): its reply carries a
fresh nonce, so a cached reply is told from a fresh one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from parity import reads, reply_cache
from parity.errors import TRANSIENT_KEY, transient
from parity.envs import PROBE_OVERRIDES, EnvError, module_to_run, run_module
from parity.reply_cache import Key, ReplyCache, key_of

from .helpers import ROOT

ECHO = "tests.reply_echo"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "replies"
    monkeypatch.setattr(reply_cache, "cache_dir", lambda: root)
    monkeypatch.delenv(reply_cache.NO_CACHE, raising=False)
    monkeypatch.delenv(PROBE_OVERRIDES, raising=False)
    return root


def ask(request: dict, module: str = ECHO) -> dict:
    return run_module(sys.executable, module, request, cache=True)


def entries(root: Path) -> list[Path]:
    return sorted(root.glob("*/*/*.json")) if root.exists() else []  # one folder per key


# -- hits and misses through run_module -----------------------------------------------------------

def test_an_unchanged_request_hits_and_a_changed_one_misses(cache):
    first = ask({"n": 1})
    assert ask({"n": 1})["nonce"] == first["nonce"]
    assert ask({"n": 2})["nonce"] != first["nonce"]
    assert run_module(sys.executable, ECHO, {"n": 1})["nonce"] != first["nonce"]  # not cached: runs
    assert len(entries(cache)) == 2


def test_a_path_is_keyed_by_its_contents_and_a_hit_names_the_asking_path(cache, tmp_path):
    a = tmp_path / "draft-a"
    a.mkdir()
    (a / "config.json").write_text('{"ids": [1, 2]}')
    (a / "model.safetensors").write_bytes(b"weights-1")
    b = tmp_path / "draft-b"
    shutil.copytree(a, b)
    first = ask({"path": str(a)})
    assert first["says"] == f"read {a}/config.json"
    again = ask({"path": str(b)})  # the same contents elsewhere (the gate's fresh fix copies)
    assert again["nonce"] == first["nonce"]
    assert again["says"] == f"read {b}/config.json" and again["asked"]["path"] == str(b)
    (b / "model.safetensors").write_bytes(b"weights-2")
    changed = ask({"path": str(b)})
    assert changed["nonce"] != first["nonce"]  # other weights: a miss
    (b / "model.safetensors").write_bytes(b"weights-1")
    (b / "config.json").write_text('{"ids": [1, 3]}')
    assert ask({"path": str(b)})["nonce"] not in (first["nonce"], changed["nonce"])  # other config
    (b / "config.json").write_text('{"ids": [1, 2]}')
    (b / "README").write_text("")
    assert ask({"path": str(b)})["nonce"] != first["nonce"]  # a file added
    (b / "README").unlink()
    assert ask({"path": str(b)})["nonce"] == first["nonce"]  # back to the first contents


def test_an_override_runs_and_is_keyed_as_its_replacement(cache, monkeypatch):
    first = ask({"n": 1})
    monkeypatch.setenv(PROBE_OVERRIDES, f"tests.no_such_probe={ECHO}")
    assert module_to_run("tests.no_such_probe") == ECHO and module_to_run("parity.x") == "parity.x"
    assert ask({"n": 1}, module="tests.no_such_probe")["nonce"] == first["nonce"]  # ECHO ran, ECHO's key


@pytest.mark.parametrize("value", ["parity.x", "parity.x=", "=tests.y", "a.b=c d", "a.b=c,,d"])
def test_a_malformed_override_is_refused_loudly(monkeypatch, value):
    monkeypatch.setenv(PROBE_OVERRIDES, value)
    with pytest.raises(EnvError, match="MODULE=REPLACEMENT"):
        module_to_run("parity.x")


def test_failed_children_and_resource_failures_are_not_stored(cache):
    raised = ask({"raise": True})
    assert "traceback" in raised and "nonce" not in raised
    # A failure outside the inputs, whatever its words: the child flags it, nothing is stored.
    for failure in (["MemoryError", "the engine raised on these ids"], ["OSError", "[Errno 28] No space left"],
                    ["BrokenPipeError", "a plain sentence"], ["TimeoutError", ""], ["killed", ""]):
        first = ask({"fail": failure})
        assert first[TRANSIENT_KEY] is True and first["reply_cache"]["status"] == "not stored", failure
        assert ask({"fail": failure})["nonce"] != first["nonce"], failure
    assert "SIGKILL" in first["error"] or "-9" in first["error"]  # the killed subprocess, named
    assert not entries(cache)
    # The engine's own refusal is an answer, stored even when its message names a resource failure.
    for failure in (["TypeError", "MemoryError: out of memory; OSError: Killed"], ["FileNotFoundError", "no d2t"],
                    ["KeyError", "the engine raised on these ids"]):
        engine = ask({"fail": failure})
        assert TRANSIENT_KEY not in engine and engine["reply_cache"]["status"] == "stored", failure
        assert ask({"fail": failure})["nonce"] == engine["nonce"], failure
    assert len(entries(cache)) == 3


def test_cacheability_reads_the_childs_flag_never_the_words():
    assert reply_cache.cacheable({"error": "OSError: Killed, out of memory (MemoryError)"})
    assert not reply_cache.cacheable({"error": "TypeError: bad ids", TRANSIENT_KEY: True})
    assert not reply_cache.cacheable({"error": "TypeError: bad ids", "traceback": []})


def test_the_child_decides_transience_by_the_exceptions_type():
    def raised_from(exc, cause):
        exc.__cause__ = cause
        return exc

    for exc in (MemoryError(), OSError(28, "No space left"), TimeoutError(), ConnectionResetError(), BrokenPipeError(),
                InterruptedError(), subprocess.CalledProcessError(-9, ["x"]), subprocess.TimeoutExpired(["x"], 1),
                type("OutOfMemoryError", (RuntimeError,), {})("CUDA"), raised_from(ValueError("x"), MemoryError())):
        assert transient(exc), exc
    for exc in (TypeError("MemoryError: out of memory"), ValueError("OSError Killed"), FileNotFoundError("w.bin"),
                PermissionError(), KeyError("x"), subprocess.CalledProcessError(1, ["x"]), None):
        assert not transient(exc), exc
    context = ValueError("bad config")
    context.__context__ = OSError("while handling")  # raised while handling another: its own error
    assert not transient(context)


def test_no_cache_turns_it_off(cache, monkeypatch):
    monkeypatch.setenv(reply_cache.NO_CACHE, "1")
    assert ask({"n": 1})["nonce"] != ask({"n": 1})["nonce"]
    assert not entries(cache)


def test_an_unreadable_entry_is_a_miss_and_is_replaced(cache):
    first = ask({"n": 1})
    [entry] = entries(cache)
    entry.write_text('{"key": "')  # cut short
    second = ask({"n": 1})
    assert second["nonce"] != first["nonce"]
    assert ask({"n": 1})["nonce"] == second["nonce"]


# -- the key --------------------------------------------------------------------------------------

def key(module: str = ECHO, request: dict | None = None, python: str = sys.executable, **env: str) -> str:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return key_of(python, module, request or {"n": 1}, full).digest


def test_the_key_follows_the_module_the_environment_and_the_interpreter():
    base = key()
    assert key() == base
    assert key(module="tests.other") != base
    assert key(request={"n": 2}) != base
    assert key(OMP_NUM_THREADS="7") != base and key(PARITY_SOMETHING="1") != base
    assert key(TMPDIR="/elsewhere") == base  # where temp files go changes no reply
    # Every variable an engine or its libraries may read keys, not a list of prefixes (vLLM's
    # VLLM_*, the hub's HF_*, one a library reads when it enumerates the environment) ...
    for name in ("VLLM_USE_V1", "SGLANG_ENABLE_SPEC_V2", "HF_HUB_OFFLINE", "FLA_USE_FAST_OPS", "SOME_LIBRARY_KNOB"):
        assert key(**{name: "1"}) != base, name
    # ... but for the test runner's bookkeeping, which differs between xdist workers and tests
    assert key(PYTEST_XDIST_WORKER="gw1", PYTEST_CURRENT_TEST="t.py::x (call)") == base
    assert key(COLUMNS="200", LINES="50", PARITY_FORKSERVERS="/tmp/run-servers") == base  # nor the terminal's size
    other = ROOT / ".envs" / "speculators-0.7.0.2" / "bin" / "python"
    if other.exists():
        assert key(python=str(other)) != base


def test_names_the_engine_is_shown_are_keyed_as_written_not_by_contents(tmp_path):
    """Engines read path names (parity.extract.named): two folders alike but for their names are two
    requests; a name is never replaced by the contents of the folder it names (issue 48, case 3:
    `...-EAGLE-v3` got `...-eagle3-draft`'s cached answer)."""
    a, b = tmp_path / "Llama-EAGLE-v3", tmp_path / "Llama-eagle3-draft"
    for folder in (a, b):
        folder.mkdir()
        (folder / "config.json").write_text("{}")
    by_name = {f: key(request={"draft_dir": str(a), "names": {"draft": str(f)}}) for f in (a, b)}
    assert by_name[a] != by_name[b]
    assert key(request={"draft_dir": str(a)}) == key(request={"draft_dir": str(b)})  # contents, as before


def test_the_key_follows_the_pth_files_site_runs_at_start_up(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    path = f"{ROOT}{os.pathsep}{site}"
    base = key(PYTHONPATH=path)
    assert key(PYTHONPATH=path) == base != key()
    (site / "extra.pth").write_text("/somewhere\n")
    added = key(PYTHONPATH=path)
    assert added != base
    (site / "extra.pth").write_text("/elsewhere\n")
    assert key(PYTHONPATH=path) not in (base, added)


# -- what the child read: an edit of anything it imported sends the next run to the child ----------

@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    """A directory on the children's PYTHONPATH holding `fakemod` (VALUE = 1)."""
    where = tmp_path / "site"
    where.mkdir()
    (where / "fakemod.py").write_text("VALUE = 1\n")
    monkeypatch.setenv("PYTHONPATH", str(where))
    return where


def source(reply: dict) -> str:
    return reply[reply_cache.SOURCE_KEY]["status"]


def test_an_edited_imported_file_is_seen_and_an_unchanged_one_hits(cache, site):
    first = ask({"import": ["fakemod"]})
    assert first["values"] == {"fakemod": 1} and source(first) == "stored"
    again = ask({"import": ["fakemod"]})
    assert again["nonce"] == first["nonce"] and source(again) == "hit"
    assert again[reply_cache.SOURCE_KEY]["key"] == first[reply_cache.SOURCE_KEY]["key"]
    assert reads.REPLY_KEY not in again
    # (another size: Python itself reuses bytecode whose source has the same size and second)
    (site / "fakemod.py").write_text("VALUE = 22\n")
    edited = ask({"import": ["fakemod"]})
    assert edited["values"] == {"fakemod": 22} and source(edited) == "stored"
    (site / "fakemod.py").write_text("VALUE = 1\n")  # back (its bytecode is rewritten: run again)
    assert ask({"import": ["fakemod"]})["values"] == {"fakemod": 1}


def test_a_touch_with_the_same_contents_still_hits(cache, site):
    first = ask({"import": ["fakemod"]})
    text = (site / "fakemod.py").read_text()
    (site / "fakemod.py").unlink()
    (site / "fakemod.py").write_text(text)  # another inode and times, the same bytes
    assert ask({"import": ["fakemod"]})["nonce"] == first["nonce"]


def test_a_bytecode_only_change_is_seen(cache, tmp_path, monkeypatch):
    import py_compile

    where = tmp_path / "sourceless"
    where.mkdir()
    for value in (1, 2):
        (tmp_path / "fakemod.py").write_text(f"VALUE = {value}\n")
        py_compile.compile(str(tmp_path / "fakemod.py"), cfile=str(where / "fakemod.pyc"), doraise=True)
        if value == 1:
            monkeypatch.setenv("PYTHONPATH", str(where))
            first = ask({"import": ["fakemod"]})
            assert first["values"] == {"fakemod": 1} and ask({"import": ["fakemod"]})["nonce"] == first["nonce"]
    assert ask({"import": ["fakemod"]})["values"] == {"fakemod": 2}


def test_a_module_added_in_front_on_the_path_or_removed_is_seen(cache, site, tmp_path, monkeypatch):
    front = tmp_path / "front"
    front.mkdir()
    monkeypatch.setenv("PYTHONPATH", f"{front}{os.pathsep}{site}")
    first = ask({"import": ["fakemod"]})
    assert first["values"] == {"fakemod": 1}
    (front / "fakemod.py").write_text("VALUE = 333\n")  # shadows the one behind it
    assert ask({"import": ["fakemod"]})["values"] == {"fakemod": 333}
    (front / "fakemod.py").unlink()
    assert ask({"import": ["fakemod"]})["nonce"] == first["nonce"]
    (site / "fakemod.py").unlink()
    assert "No module named 'fakemod'" in ask({"import": ["fakemod"]})["error"]


def test_a_module_added_to_an_imported_package_is_seen(cache, site):
    (site / "fakepkg").mkdir()
    (site / "fakepkg" / "__init__.py").write_text(
        "try:\n    from .extra import VALUE\nexcept ImportError:\n    VALUE = 'no extra'\n")
    assert ask({"import": ["fakepkg"]})["values"] == {"fakepkg": "no extra"}
    (site / "fakepkg" / "extra.py").write_text("VALUE = 'extra'\n")
    assert ask({"import": ["fakepkg"]})["values"] == {"fakepkg": "extra"}


def test_an_editable_install_is_cached_and_follows_its_source(cache, tmp_path):
    """A `pip install -e` of a source folder (what pip lays down for it: a .pth naming the folder
    and a dist-info saying editable) in a virtual environment: served from the cache while the
    folder is unchanged, and run again after an edit in place (it used to be never cached)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    src = tmp_path / "checkout" / "src"
    (src / "fakemod").mkdir(parents=True)
    (src / "fakemod" / "__init__.py").write_text("VALUE = 'as cloned'\n")
    (Path(purelib) / "__editable__.fakemod-1.0.pth").write_text(f"{src}\n")
    dist = Path(purelib) / "fakemod-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fakemod\nVersion: 1.0\n")
    (dist / "RECORD").write_text("")
    (dist / "direct_url.json").write_text(json.dumps({"url": src.parent.as_uri(), "dir_info": {"editable": True}}))
    python = str(venv / "bin" / "python")
    first = run_module(python, ECHO, {"import": ["fakemod"]}, cache=True)
    assert first["values"] == {"fakemod": "as cloned"}
    again = run_module(python, ECHO, {"import": ["fakemod"]}, cache=True)
    assert again["nonce"] == first["nonce"] and source(again) == "hit"
    (src / "fakemod" / "__init__.py").write_text("VALUE = 'edited in place'\n")
    assert run_module(python, ECHO, {"import": ["fakemod"]}, cache=True)["values"] == {"fakemod": "edited in place"}


def test_a_file_read_by_the_child_is_seen(cache, tmp_path, monkeypatch):
    """Not only imports: a data file the installed code opens (a kernel config, a table)."""
    data = tmp_path / "table.txt"
    data.write_text("one")
    reader = tmp_path / "site"
    reader.mkdir()
    (reader / "fakereader.py").write_text(f"VALUE = open({str(data)!r}).read()\n")
    monkeypatch.setenv("PYTHONPATH", str(reader))
    assert ask({"import": ["fakereader"]})["values"] == {"fakereader": "one"}
    data.write_text("two")  # same size: its ctime and contents tell
    assert ask({"import": ["fakereader"]})["values"] == {"fakereader": "two"}


def test_a_child_that_records_nothing_is_not_stored(cache):
    first = reply_cache.cached_reply(sys.executable, ECHO, {"n": 9}, dict(os.environ),
                                     lambda: {"nonce": "x"})  # a child whose reply holds no record
    assert source(first) == "not stored" and "did not record" in first[reply_cache.SOURCE_KEY]["why"]
    assert entries(cache) == []


def test_the_key_follows_parity_source_and_a_drift_module(tmp_path, monkeypatch):
    root = tmp_path / "checkout"
    for f in ["parity/__init__.py", "parity/probe.py", "tests/__init__.py", "tests/drift/__init__.py",
              "tests/drift/slice.py", "tests/drift/other.py"]:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text(f"# {f}\n")
    monkeypatch.setattr(reply_cache, "ROOT", root)
    digest = reply_cache.source_digest
    probe, drift = digest("parity.probe"), digest("tests.drift.slice")
    (root / "tests/drift/other.py").write_text("# another drift, not run\n")
    assert (digest("parity.probe"), digest("tests.drift.slice")) == (probe, drift)
    (root / "tests/drift/slice.py").write_text("# the drift module changed\n")
    assert digest("tests.drift.slice") != drift and digest("parity.probe") == probe
    drift = digest("tests.drift.slice")
    (root / "tests/drift/__init__.py").write_text("# its package changed\n")
    assert digest("tests.drift.slice") != drift
    (root / "parity/probe.py").write_text("# parity changed\n")
    assert digest("parity.probe") != probe


# -- concurrency ----------------------------------------------------------------------------------

WRITER = """
import sys
from pathlib import Path
from parity.reply_cache import Key, ReplyCache
cache, letter = ReplyCache(Path(sys.argv[1])), sys.argv[2]
for i in range(int(sys.argv[3])):
    cache.put(Key("ab" * 32, ()), {"fill": letter * 300_000, "i": i}, {"files": {}, "dirs": {}})
"""


def test_processes_writing_one_key_at_once_never_give_a_torn_read(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), letter, "60"], env=env)
               for letter in "ab"]
    entry = ReplyCache(tmp_path)._variant(Key("ab" * 32, ()), {"files": {}, "dirs": {}})
    reads, seen = 0, set()
    while any(w.poll() is None for w in writers):
        try:
            text = entry.read_text()
        except FileNotFoundError:
            continue
        stored = json.loads(text)  # a torn file fails here
        reply = json.loads(stored["reply"])
        assert reply["fill"] in ("a" * 300_000, "b" * 300_000)  # one writer's whole reply
        reads, seen = reads + 1, seen | {reply["fill"][0]}
    assert [w.returncode for w in writers] == [0, 0]
    assert reads > 0
    assert ReplyCache(tmp_path).get(Key("ab" * 32, ()))["i"] == 59
    assert not list(tmp_path.rglob("*.tmp"))  # no temp file left behind


FLIGHT = """
import json, os, sys, time
from pathlib import Path
from parity import reads, reply_cache
from parity.errors import TRANSIENT_KEY, transient
reply_cache.cache_dir = lambda: Path(sys.argv[1])
def run():
    with open(sys.argv[2], "a") as log:
        log.write(f"{os.getpid()}\\n")
    time.sleep(2)
    return {"by": os.getpid(), "__reads__": {"files": {}, "dirs": {}, "changed": []}}
env = {**os.environ, "PYTHONPATH": sys.argv[3]}
print(json.dumps(reply_cache.cached_reply(sys.executable, "tests.reply_echo", {"n": 1}, env, run)))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="no advisory locks: concurrent misses each compute")
def test_concurrent_misses_of_one_key_compute_it_once(tmp_path):
    log = tmp_path / "runs.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(reply_cache.NO_CACHE, None)
    procs = [subprocess.Popen([sys.executable, "-c", FLIGHT, str(tmp_path / "replies"), str(log), str(ROOT)],
                              env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    started = time.monotonic()
    replies = [json.loads(p.communicate(timeout=120)[0].strip().splitlines()[-1]) for p in procs]
    assert len(log.read_text().splitlines()) == 1, log.read_text()  # one ran, the other waited
    assert replies[0]["by"] == replies[1]["by"]
    assert sorted(r["reply_cache"]["status"] for r in replies) == ["hit", "stored"]
    assert time.monotonic() - started < 60


def test_an_installed_parity_gives_its_children_the_same_path_every_run(tmp_path, monkeypatch):
    """Installed (no checkout), the children import parity through a link in the cache that is
    the same on every run, so their sys.path, and the reply cache's key, repeat: a fresh
    temporary directory per run made every installed reply a miss."""
    from parity import envs
    from parity.home import PACKAGE

    monkeypatch.setattr(envs, "CHECKOUT", None)
    monkeypatch.setenv("PARITY_HOME", str(tmp_path / "home"))
    seen = []
    for _ in range(2):
        env: dict[str, str] = {}
        with envs.parity_on_path(env) as cwd:
            seen.append((env["PYTHONPATH"], cwd))
            where = subprocess.run([sys.executable, "-c", "import parity; print(parity.__file__)"],
                                   env={**os.environ, **env}, cwd=cwd, capture_output=True,
                                   text=True, check=True).stdout.strip()
            assert Path(where).resolve() == (PACKAGE / "__init__.py").resolve()
            assert Path(env["PYTHONPATH"]).is_relative_to(tmp_path / "home")
    assert seen[0] == seen[1]
    assert [p.name for p in Path(seen[0][1]).iterdir()] == ["parity"]  # only the link


def test_a_cache_root_an_import_sets_enters_no_key():
    """Importing speculators writes TORCHINDUCTOR_CACHE_DIR (its temp dir) into the importing
    command's environment, a value of that command's own: neither a reply's key nor a warmed
    server's may hold it (every `check --trainer specforge` missed both), while a variable that
    steers the engine still does."""
    from parity import forkserver

    base = {"PATH": "/usr/bin", "SGLANG_SOME_SWITCH": "1"}
    one = {**base, "TORCHINDUCTOR_CACHE_DIR": "/tmp/parity-aaaa/torchinductor_root"}
    other = {**base, "TORCHINDUCTOR_CACHE_DIR": "/tmp/parity-bbbb/torchinductor_root"}
    assert reply_cache.keyed_env(one) == reply_cache.keyed_env(other) == reply_cache.keyed_env(base)
    assert forkserver._key("python", "m", "/", one) == forkserver._key("python", "m", "/", other)
    steered = {**base, "SGLANG_SOME_SWITCH": "2"}
    assert reply_cache.keyed_env(steered) != reply_cache.keyed_env(base)
    assert forkserver._key("python", "m", "/", steered) != forkserver._key("python", "m", "/", base)
