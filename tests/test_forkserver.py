"""parity.forkserver: a run forked from a warmed server is the run a fresh `python -m` gives.

The cheap child (tests.forked_child) shows the mechanics: a fork, not a fresh process, and
everything a fresh process would have (its environment, TMPDIR, working directory, session,
exit codes, stderr, kill on a timeout), with PARITY_NO_FORKSERVER=1 as the fresh control.
The real probes show the point: the same reply, forked or fresh."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from parity import forkserver
from parity.envs import EnvError, run_module
from parity.workspace import workspace

from .helpers import DEEPSEEK, LLAMA, ROOT, drift_overrides

CHILD = "tests.forked_child"
LLAMA_DRAFT = str(ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3")
KIMI_DRAFT = str(ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3")


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setenv(forkserver.OFF, "1")


def test_a_run_is_a_fork_of_the_warmed_server_with_its_own_everything(monkeypatch):
    monkeypatch.setenv("FORKED_CHILD_VAR", "first")
    first = run_module(sys.executable, CHILD, {})
    monkeypatch.setenv("FORKED_CHILD_VAR", "second")
    second = run_module(sys.executable, CHILD, {})
    assert first["warmed_in"] is not None and first["warmed_in"] != first["pid"]
    assert first["env"] == "first" and second["env"] == "second"  # its own environment...
    assert first["pid"] != second["pid"] and first["tmpdir"] != second["tmpdir"]  # ...and TMPDIR
    assert "parity-child-" in first["tmpdir"] and not os.path.exists(first["tmpdir"])  # removed
    assert first["main"] == "__main__" and first["session_leader"]
    assert first["cwd"] == str(ROOT)


def test_the_fresh_control_is_not_warmed(fresh):
    reply = run_module(sys.executable, CHILD, {})
    assert reply["warmed_in"] is None and reply["main"] == "__main__"


@pytest.mark.parametrize("mode", ["forked", "fresh"])
def test_exit_codes_and_errors_are_those_of_python_dash_m(mode, monkeypatch):
    if mode == "fresh":
        monkeypatch.setenv(forkserver.OFF, "1")
    assert "asked to raise" in run_module(sys.executable, CHILD, {"raise": True})["error"]
    for request, code in (({"exit": 3}, 3), ({"sys_exit": 4}, 4)):
        with pytest.raises(EnvError, match=f"exit {code}"):
            run_module(sys.executable, CHILD, {**request, "stderr": "said on stderr"})
    with pytest.raises(EnvError, match="said on stderr"):
        run_module(sys.executable, CHILD, {"exit": 5, "stderr": "said on stderr"})


def test_a_timeout_kills_the_forked_child(tmp_path):
    pid_file = tmp_path / "pid"
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_module(sys.executable, CHILD, {"sleep": 60, "pid_file": str(pid_file)}, timeout=3)
    assert time.monotonic() - started < 30
    pid = int(pid_file.read_text())
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"forked child {pid} still runs after the timeout")


@pytest.fixture
def private(monkeypatch):
    """This process's own servers, outside the run's shared ones (the plugin's run_servers)."""
    monkeypatch.delenv(forkserver.SHARED, raising=False)


def test_servers_and_their_directories_end_with_the_workspace(tmp_path, monkeypatch, private):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    forkserver.forget()  # this test's own servers, started inside its own workspace
    from parity import workspace as ws

    saved = ws._active
    monkeypatch.setattr(ws, "_active", None)
    with workspace(prefix="forkserver-test-") as root:
        run_module(sys.executable, CHILD, {})
        servers = list(forkserver._servers.values())
        assert servers and all(s.tmp.is_relative_to(root) and s.proc.poll() is None for s in servers)
    assert all(s.proc.poll() is not None for s in servers)
    assert not list(tmp_path.iterdir())  # nothing left behind
    monkeypatch.setattr(ws, "_active", saved)
    forkserver.forget()


def test_an_unreachable_server_falls_back_to_a_fresh_process(monkeypatch, private):
    forkserver.forget()
    monkeypatch.setattr(forkserver, "_start", lambda *a: (_ for _ in ()).throw(forkserver.Unavailable("no")))
    reply = run_module(sys.executable, CHILD, {})
    assert reply["warmed_in"] is None  # ran, fresh


# -- the run's shared servers ------------------------------------------------------------------------

ASK_IN_ANOTHER_PROCESS = ("import json, sys; from parity.envs import run_module; from parity.workspace import workspace\n"
                          "with workspace():\n    print(json.dumps(run_module(sys.executable, 'tests.forked_child', {})))")


def _in_another_process(env: dict | None = None) -> dict:
    done = subprocess.run([sys.executable, "-c", ASK_IN_ANOTHER_PROCESS], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def test_the_processes_of_a_run_share_one_server_and_it_ends_with_the_run(monkeypatch):
    """Inside run_servers every parity process of the run (this one, a `parity` it starts) forks
    from one server per key: the imports are paid once per run, not once per process (the slow
    tier's CLI tests paid them in every command). On leaving the run, its servers end and its
    directory goes."""
    monkeypatch.delenv(forkserver.SHARED, raising=False)
    with forkserver.run_servers() as root:
        assert (root.stat().st_mode & 0o777) == 0o700
        here = run_module(sys.executable, CHILD, {})
        there = _in_another_process()
        again = run_module(sys.executable, CHILD, {})
        assert here["warmed_in"] == there["warmed_in"] == again["warmed_in"] is not None  # one server
        assert here["pid"] != there["pid"] != again["pid"]  # a fork each
        server = here["warmed_in"]
        assert _alive(server)
    for _ in range(100):
        if not _alive(server):
            break
        time.sleep(0.05)
    assert not _alive(server) and not root.exists()


def test_a_run_s_server_ends_when_the_run_s_owner_is_gone(tmp_path):
    """A run killed outright (SIGKILL: no teardown) leaves no server behind: each checks every 2 s
    that the process owning the run is alive."""
    script = ("import json, os, sys, time; from parity import forkserver; from parity.envs import run_module\n"
              "from parity.workspace import workspace\n"
              "with forkserver.run_servers() as root, workspace():\n"
              "    for _ in range(3):  # a server that finds its imports changed (another test writing\n"
              "        # beside them) ends, and that run goes fresh: the next starts a server again\n"
              "        reply = run_module(sys.executable, 'tests.forked_child', {})\n"
              "        if reply['warmed_in'] is not None: break\n"
              "    print(json.dumps({**reply, 'how': forkserver.last.how}), flush=True)\n"
              "    time.sleep(600)")
    env = {k: v for k, v in os.environ.items() if k != forkserver.SHARED}
    env["TMPDIR"] = str(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        reply = json.loads(proc.stdout.readline())
        server = reply["warmed_in"]
        assert server is not None, f"no run was forked from a server (the last ran {reply['how']!r})"
        assert _alive(server)
    finally:
        proc.kill()
        proc.wait()
    for _ in range(200):
        if not _alive(server) and not list(tmp_path.glob("parity-fs-*")):
            break
        time.sleep(0.05)
    assert not _alive(server), "the run's server outlived its owner"
    assert not list(tmp_path.glob("parity-fs-*"))  # nor the run's directory (its workspace is SIGKILL's to leave)


def test_a_shared_server_is_only_this_user_s(tmp_path, monkeypatch):
    """A directory another user could enter is no run's: each process keeps servers of its own."""
    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o755)
    open_dir.chmod(0o755)
    monkeypatch.setenv(forkserver.SHARED, str(open_dir))
    assert forkserver.shared_dir() is None
    monkeypatch.setenv(forkserver.SHARED, str(tmp_path / "missing"))
    assert forkserver.shared_dir() is None


def test_room_for_a_server_is_made_least_recently_used_first(tmp_path, monkeypatch):
    """A run's directory keeps MAX_SHARED servers at most, and, while the machine has less
    memory available than it keeps, stops idle ones (at most MEMORY_STOPS per start): the least
    recently used first, the others left running. A server that began a run within BUSY_SECONDS
    is never stopped for memory, and a pid file whose pid is no parity.forkserver any more
    (reused after its server died) stops nothing."""
    def server(*argv: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *argv])

    procs = [server("parity.forkserver") for _ in range(4)] + [server("not-a-server")]
    try:
        for age, proc in zip((500, 400, 300, 5, 600), procs):  # procs[0]: the least recently used server
            pid_file = tmp_path / f"{proc.pid}.pid"
            pid_file.write_text(str(proc.pid))
            os.utime(pid_file, (time.time() - age, time.time() - age))
        monkeypatch.setattr(forkserver, "_wanted", lambda: forkserver.MIN_AVAILABLE)
        monkeypatch.setattr(forkserver, "_available", lambda: forkserver.MIN_AVAILABLE)
        monkeypatch.setattr(forkserver, "MAX_SHARED", 5)
        forkserver._evict(tmp_path)  # 5 alive: room for a sixth, and the oldest pid is no server
        assert procs[4].poll() is None and all(p.poll() is None for p in procs[:4])
        monkeypatch.setattr(forkserver, "MAX_SHARED", 4)
        forkserver._evict(tmp_path)  # the next least recently used is a server: stopped
        assert procs[0].wait(5) is not None and all(p.poll() is None for p in procs[1:])
        monkeypatch.setattr(forkserver, "MAX_SHARED", 10)
        # short of memory until one more server has ended: the next least recently used goes
        monkeypatch.setattr(forkserver, "_available", lambda: forkserver.MIN_AVAILABLE - (procs[1].poll() is None))
        forkserver._evict(tmp_path)
        assert procs[1].wait(5) is not None and all(p.poll() is None for p in procs[2:])
        # short of memory for good: two more at most, never the one that began a run 5 s ago
        monkeypatch.setattr(forkserver, "_available", lambda: 0)
        forkserver._evict(tmp_path)
        assert procs[2].wait(5) is not None and procs[3].poll() is None and procs[4].poll() is None
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def _without_volatile(reply: dict) -> dict:
    """A probe reply without what differs between any two runs (timings)."""
    return {k: v for k, v in reply.items() if k not in ("seconds",)}


@pytest.mark.slow
@pytest.mark.parametrize("probe, request_", [
    ("parity.extract.engines.sglang.probe", "llama"),
    ("parity.extract.engines.sglang.probe", "deepseek"),
    ("parity.extract.trainers.speculators.probe", "slots"),
])
def test_a_forked_probe_replies_what_a_fresh_one_does(probe, request_, monkeypatch):
    requests = {
        "llama": {"target_config": json.loads(LLAMA.read_text()), "draft_dir": LLAMA_DRAFT, "seq_len": 8, "seed": 0,
                  "candidates": [[1, 15, 28], [-1, 2, 30]]},
        "deepseek": {"target_config": json.loads(DEEPSEEK.read_text()), "draft_dir": KIMI_DRAFT, "seq_len": 8,
                     "seed": 0, "candidates": [[0, 3, 31]]},
        "slots": {"num_slots": 4, "hidden_size": 8, "seq_len": 6},
    }
    monkeypatch.setenv("PARITY_NO_CACHE", "1")
    forked = run_module(sys.executable, probe, requests[request_])
    monkeypatch.setenv(forkserver.OFF, "1")
    fresh = run_module(sys.executable, probe, requests[request_])
    assert "error" not in fresh, fresh["error"]
    assert _without_volatile(forked) == _without_volatile(fresh)


@pytest.mark.slow
def test_an_injected_drift_runs_in_the_child_on_the_warmed_engine(monkeypatch):
    """The override is never imported by the server: a drift module that patches the engine at
    import patches the child's copy, once, as in a fresh process; the next plain run is clean."""
    monkeypatch.setenv("PARITY_NO_CACHE", "1")
    request = {"target_config": json.loads(LLAMA.read_text()), "draft_dir": LLAMA_DRAFT, "seq_len": 8, "seed": 0,
               "candidates": [[1, 15, 28]]}

    def fed() -> list[str]:
        return run_module(sys.executable, "parity.extract.engines.sglang.probe", request)["candidates"][0]["fc_input"]

    assert fed() == ["h2", "h16", "h29"]
    monkeypatch.setenv("PARITY_PROBE_OVERRIDES", drift_overrides("tests.drift.serving_no_plus_one"))
    assert fed() == ["h1", "h15", "h28"]
    monkeypatch.delenv("PARITY_PROBE_OVERRIDES")
    assert fed() == ["h2", "h16", "h29"]


WARMED_PROBE = """
import os
import fakedep
from parity.envs import reply_over_stdio

def warm():
    pass

if __name__ == "__main__":
    reply_over_stdio(lambda request: {"value": fakedep.VALUE, "pid": os.getpid(), "ppid": os.getppid()})
"""


def test_a_server_started_before_an_edit_does_not_answer_after_it(tmp_path, monkeypatch):
    """The server imported `fakedep` (through the module it warms); after fakedep.py is edited a
    fork would still run the old code from memory: the server forks nothing, the run is a fresh
    process, and the next run a fork of a fresh server that imported the edited file."""
    (tmp_path / "fakeprobe.py").write_text(WARMED_PROBE)
    (tmp_path / "fakedep.py").write_text("VALUE = 'before'\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with workspace():
        first = run_module(sys.executable, "fakeprobe", {})
        again = run_module(sys.executable, "fakeprobe", {})
        assert first["value"] == again["value"] == "before"
        assert first["ppid"] == again["ppid"] != os.getpid()  # forks of one server
        (tmp_path / "fakedep.py").write_text("VALUE = 'after the edit'\n")
        edited = run_module(sys.executable, "fakeprobe", {})
        assert edited["value"] == "after the edit"
        assert edited["ppid"] != first["ppid"]  # not a fork of the server that imported the old file
        later = run_module(sys.executable, "fakeprobe", {})
        assert later["value"] == "after the edit" and later["ppid"] not in (first["ppid"], os.getpid())
        (tmp_path / "fakedep2.py").write_text("VALUE = 'new module'\n")  # a name added where it searched
        assert run_module(sys.executable, "fakeprobe", {})["ppid"] != later["ppid"]
