"""Every environment is built from a committed lock (parity/build_env.py): exact versions and
sha256 hashes, resolved from the envs.toml entry the lock names; the CPU torch pinned by hash."""

from __future__ import annotations

import os
import re
import sys

import pytest

from parity.build_env import _lock_spec, lock_path, spec_hash, stamp_hash
from parity.envs import load_specs

SPECS = load_specs()
REQUIREMENT = re.compile(r"^([A-Za-z0-9_.\-\[\],]+)(==\S+)? \\$")


@pytest.mark.parametrize("name", sorted(SPECS))
def test_each_environment_has_a_current_lock(name):
    lock = lock_path(name)
    assert lock.is_file(), f"{lock} missing: run `./dev setup --lock {name}` and commit it"
    assert _lock_spec(lock) == spec_hash(name, SPECS[name]), (
        f"{lock} was resolved from another envs.toml entry: run `./dev setup --lock {name}` and commit it")
    lines = lock.read_text().splitlines()
    pins = [REQUIREMENT.match(ln) for ln in lines if ln and not ln.startswith((" ", "#"))]
    assert pins and all(m and m.group(2) for m in pins), "every package pinned to one version"
    hashed = sum(1 for ln in lines if ln.strip().startswith("--hash=sha256:"))
    assert hashed >= len(pins)
    assert f"torch=={SPECS[name]['torch']}+cpu \\" in lines  # the CPU build, never a CUDA one


def test_the_stamp_follows_the_lock(tmp_path):
    spec = SPECS["main"]
    lock = tmp_path / "main.txt"
    lock.write_text("a==1 \\\n    --hash=sha256:00\n")
    before = stamp_hash("main", lock, spec)
    lock.write_text("a==2 \\\n    --hash=sha256:00\n")
    assert stamp_hash("main", lock, spec) != before


def test_an_envs_toml_edit_makes_the_lock_stale():
    spec = dict(SPECS["sglang-0.5.14"])
    assert spec_hash("sglang-0.5.14", spec) == _lock_spec(lock_path("sglang-0.5.14"))
    spec["deps"] = [*spec["deps"], "rich"]
    assert spec_hash("sglang-0.5.14", spec) != _lock_spec(lock_path("sglang-0.5.14"))
    assert spec_hash("x", {**spec, "path": "elsewhere"}) == spec_hash("x", spec)  # where is not what


def test_a_failed_build_step_says_why_in_the_tools_own_words(capsys):
    from parity.build_env import _run

    failing = ("import sys; print('Resolved 80 packages', file=sys.stderr); "
               "print('error: Failed to install: torch-2.13.0+cpu.whl', file=sys.stderr); "
               "print('  Caused by: failed to hardlink file', file=sys.stderr); sys.exit(1)")
    with pytest.raises(SystemExit) as exc:
        _run([sys.executable, "-c", failing], "installing x from locks/x.txt")
    assert str(exc.value) == ("[setup] installing x from locks/x.txt failed (exit 1): error: Failed to install: "
                              "torch-2.13.0+cpu.whl Caused by: failed to hardlink file")
    assert "Resolved 80 packages" in capsys.readouterr().err  # the whole output stays in the log


def test_builders_asking_at_once_install_uv_once(tmp_path, monkeypatch, capsys):
    """The sweep's builder threads (and pytest's workers) ask for uv together: one installs it,
    the others wait for it, and none runs a half-installed or re-installed one."""
    from concurrent.futures import ThreadPoolExecutor

    from parity import build_env

    monkeypatch.setenv("PARITY_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))  # no uv on PATH
    with ThreadPoolExecutor(4) as pool:
        exes = list(pool.map(lambda _: build_env.uv(), range(4)))
    assert len(set(exes)) == 1 and build_env._version(str(exes[0])) == build_env.UV_VERSION
    assert capsys.readouterr().err.count("installing uv") == 1


def _flaky_uv(tmp_path, fails: int):
    """The real pinned uv behind a wrapper whose first `fails` `pip sync` calls fail as a dropped
    download would (uv's own words); every other call, and every later sync, is uv's."""
    from parity import build_env

    real = build_env.uv()
    wrapper = tmp_path / "uv"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ "$1 $2" = "pip sync" ] && [ "$(ls {tmp_path}/failed.* 2>/dev/null | wc -l)" -lt {fails} ]; then\n'
        f'  touch "{tmp_path}/failed.$$"\n'
        '  echo "error: Failed to fetch: connection reset by peer" >&2; exit 2\n'
        "fi\n"
        f'exec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def _build_from_an_empty_lock(tmp_path, monkeypatch, fails: int):
    from parity import build_env

    uv = _flaky_uv(tmp_path, fails)
    lock = tmp_path / "x.txt"
    lock.write_text("# a lock with nothing to install\n")
    monkeypatch.setenv("PARITY_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(build_env, "uv", lambda: uv)
    monkeypatch.setattr(build_env, "current_lock", lambda name, spec: lock)
    return build_env.build("x", {"torch": "2.13.0", "deps": []})


def test_a_sync_that_fails_once_is_tried_once_more_and_the_failure_logged(tmp_path, monkeypatch, capsys):
    """Every file is pinned by hash, so the second try installs what the first would have: a
    dropped download or a busy shared cache does not fail a build (the sweep saw one)."""
    done = _build_from_an_empty_lock(tmp_path, monkeypatch, fails=1)
    err = capsys.readouterr().err
    assert done is not None and (tmp_path / "home" / "x" / "bin" / "python").exists(), err
    assert len(list(tmp_path.glob("failed.*"))) == 1
    assert ("x: installing x from " in err and "failed (exit 2): error: Failed to fetch: connection reset by peer; "
            "trying once more" in err), err


def test_a_sync_that_fails_twice_fails_the_build_in_uvs_words(tmp_path, monkeypatch, capsys):
    with pytest.raises(SystemExit) as exc:
        _build_from_an_empty_lock(tmp_path, monkeypatch, fails=2)
    assert len(list(tmp_path.glob("failed.*"))) == 2
    assert str(exc.value).endswith("failed (exit 2): error: Failed to fetch: connection reset by peer"), exc.value


def test_a_changed_lock_syncs_the_environment_in_place(tmp_path, monkeypatch, capsys):
    """A lock that changed is synced into the existing environment of the same interpreter, not
    rebuilt from nothing: a process running there meanwhile keeps its files (it lost its whole
    `lib/` to the rmtree before)."""
    from parity import build_env

    assert _build_from_an_empty_lock(tmp_path, monkeypatch, fails=0) is not None
    env = tmp_path / "home" / "x"
    inode = (env / "bin" / "python").lstat().st_ino
    (env / "still-here").write_text("a file of the environment's")
    (tmp_path / "x.txt").write_text("# a lock with nothing to install, changed\n")
    assert build_env.build("x", {"torch": "2.13.0", "deps": []}) is not None  # the stamp moved
    assert (env / "still-here").exists() and (env / "bin" / "python").lstat().st_ino == inode
    assert build_env.build("x", {"torch": "2.13.0", "deps": []}) is None  # and is current again
