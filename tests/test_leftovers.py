"""Nothing parity runs writes into its inputs or leaves files behind, whatever the exit path.

Each command runs as `python -m parity ...` with TMPDIR set to an empty directory, so its
probes inherit it, and that directory must be empty when the command has exited: the probes
end with os._exit, so only a workspace owned by the parent can promise this. Export must
never write into (or around) its inputs and must replace its output directory whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from parity import cli
from parity.fixtures import MANIFEST, DraftRecipe, speculators_draft
from parity.workspace import CACHE_ROOTS

from .helpers import DEEPSEEK, ROOT, ctrl_c_reaches_it

pytestmark = pytest.mark.slow

KIMI = ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3"
TINY = ROOT / "fixtures" / "targets" / "tiny-llama-32l" / "config.json"
README_CHECK = ["check", "--target-config", "fixtures/targets/deepseek-v3-61l/config.json",
                "--draft", "fixtures/drafts/kimi-k2.5-eagle3", "--dump-layout", "h0,h3,h31,h59"]
EXPORT = ["--target-config", str(TINY), "--dump-layout", "h2,h16,h29,h32"]


def _env(tmpdir: Path, own_servers: bool = True) -> dict[str, str]:
    # The probes must really run (and be interrupted): no reply from parity.reply_cache.
    env = {**os.environ, "TMPDIR": str(tmpdir), "PARITY_NO_CACHE": "1"}
    env.pop("PARITY_DEBUG", None)
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)  # a test process that imported speculators has one set
    if own_servers:
        # run as a user runs it: no warmed servers of the test run (parity.forkserver.SHARED),
        # which outlive a command by design and are not what the command leaves behind
        env.pop("PARITY_FORKSERVERS", None)
    return env


def parity(tmpdir: Path, *args: str, home: Path | None = None, own_servers: bool = True) -> subprocess.CompletedProcess:
    """The CLI of this checkout (cwd first on sys.path) with TMPDIR=tmpdir (and, with `home`,
    HOME=home and no cache location of its own). With `own_servers` False, its children fork
    from the test run's warm servers: each still runs, in its own directory under TMPDIR, and
    the command's own servers are left to the tests that keep them (the README's check, Ctrl-C)."""
    env = _env(tmpdir, own_servers)
    if home is not None:
        env["HOME"] = str(home)
        for variable in ("XDG_CACHE_HOME", *CACHE_ROOTS):
            env.pop(variable, None)
    return subprocess.run([sys.executable, "-m", "parity", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


def left_in(tmpdir: Path) -> list[str]:
    return sorted(str(p.relative_to(tmpdir)) for p in tmpdir.rglob("*"))


def hashes(*paths: Path) -> dict[str, str]:
    files = [f for p in paths for f in ([p] if p.is_file() else sorted(p.rglob("*"))) if f.is_file()]
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


@pytest.fixture
def tmpdir_(tmp_path) -> Path:
    d = tmp_path / "TMPDIR"
    d.mkdir()
    return d


@pytest.fixture
def draft(tmp_path) -> Path:
    """A private copy of a seeded speculators draft (the inputs an export must not touch)."""
    d = tmp_path / "inputs" / "draft"
    shutil.copytree(speculators_draft(DraftRecipe()), d)
    return d


# -- 12. no temporary directory survives a command ---------------------------------------------


# `contract serving` and `contract training` run the children `check` runs (each side's probe,
# through the same workspace): `exhaustive`, with `check` in the suite.
@pytest.mark.parametrize("command", [
    pytest.param(["contract", "serving", "--target-config", str(DEEPSEEK), "--draft", str(KIMI)],
                 id="contract-serving", marks=pytest.mark.exhaustive),
    pytest.param(["contract", "training", "--target-config", str(DEEPSEEK), "--dump-layout",
                  "h0,h3,h31,h59"], id="contract-training", marks=pytest.mark.exhaustive),
    pytest.param(README_CHECK, id="check-readme-example"),
    pytest.param(["forward", "--fixture", "llama-8l", "--steps", "1", "--seq-len", "3", "--brief"],
                 id="forward"),
    pytest.param(["replay", "--draft", "fixtures/replay/draft", "--data", "fixtures/replay/data",
                  "--dump-layout", "h0,h2,h5,h7", "--no-search", "--samples", "2"], id="replay"),
])
def test_no_temp_dirs_left_by_command(tmpdir_, command):
    """The README's check starts its own servers, as a user's command does (and must stop them and
    leave nothing); the others fork from the run's (each server start is 15-30 s of imports)."""
    out = parity(tmpdir_, *command, own_servers=command is README_CHECK)
    assert out.returncode in (0, 1), out.stderr
    assert left_in(tmpdir_) == []


@pytest.mark.parametrize("command", [
    pytest.param(["serving", "--engine", "sglang", "--target-config", str(DEEPSEEK), "--draft", str(KIMI)], id="sglang"),
    pytest.param(["serving", "--engine", "vllm", "--vllm", "0.34.0", "--target-config", str(DEEPSEEK), "--draft", str(KIMI)], id="vllm"),
])
def test_nothing_left_in_the_users_caches(tmpdir_, tmp_path, command):
    """Each engine caches under the user's home by default (SGLang's ~/.cache/sglang, vLLM's
    ~/.cache/vllm/modelinfos): a probe must point those into its private temp dir."""
    home = tmp_path / "home"
    home.mkdir()
    out = parity(tmpdir_, "contract", *command, home=home)
    assert out.returncode == 0, out.stderr
    assert "layer" in out.stdout  # a contract was extracted: the engine really ran
    assert left_in(home) == []
    assert left_in(tmpdir_) == []


# What transformers 4.48 (SGLang 0.4.4.x's) does when imported: HF_HOME/hub/version.txt, HF_HOME
# defaulting to ~/.cache/huggingface; and the same for every other cache root a child may write.
_WRITES_INTO_CACHES = r"""
import json, os, sys
from pathlib import Path
wrote = []
for variable, default in json.loads(sys.argv[1]).items():
    path = Path(os.environ.get(variable) or Path.home() / ".cache" / default) / "version.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("1")
    wrote.append(str(path))
print(json.dumps(wrote))
"""


def test_a_child_writing_into_its_cache_roots_leaves_nothing_in_the_users_home(tmp_path, monkeypatch):
    """Every child parity starts (parity.children.run_child, the forkserver's servers, the
    on-demand import checks) has its cache roots in its private directory, removed when it ends."""
    from parity.children import run_child

    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir(), tmp.mkdir()
    env = {**_env(tmp), "HOME": str(home)}
    for variable in CACHE_ROOTS:
        env.pop(variable, None)
    monkeypatch.setattr("tempfile.tempdir", str(tmp))
    defaults = {"HF_HOME": "huggingface", "SGLANG_CACHE_DIR": "sglang", "VLLM_CACHE_ROOT": "vllm",
                "TORCHINDUCTOR_CACHE_DIR": "torchinductor"}
    assert defaults.keys() == CACHE_ROOTS.keys()
    proc = run_child([sys.executable, "-c", _WRITES_INTO_CACHES, json.dumps(defaults)], "", env, 60)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)) == len(defaults)  # it did write, somewhere
    assert left_in(home) == []
    assert left_in(tmp) == []


def test_no_temp_dirs_left_by_export_and_its_inputs_are_unchanged(tmpdir_, draft, tmp_path):
    before = hashes(draft, TINY)
    out = parity(tmpdir_, "export", str(draft), str(tmp_path / "served"), *EXPORT, own_servers=False)
    assert out.returncode == 0, out.stderr
    assert left_in(tmpdir_) == []
    assert hashes(draft, TINY) == before
    assert sorted(p.name for p in (tmp_path / "served").iterdir()) == ["config.json", "model.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["TMPDIR", "inputs", "served"]  # nothing beside it


@pytest.mark.parametrize("how", ["kill -INT parent", "Ctrl-C to the process group", "kill -TERM parent"])
def test_sigint_leaves_nothing_behind(tmpdir_, how):
    proc = subprocess.Popen([sys.executable, "-m", "parity", *README_CHECK], cwd=ROOT, env=_env(tmpdir_),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=ctrl_c_reaches_it)
    parent = psutil.Process(proc.pid)
    started = time.monotonic()
    children: list[psutil.Process] = []
    while time.monotonic() - started < 120:  # a probe is running and has written its temp files
        children = parent.children(recursive=True)
        if children and left_in(tmpdir_) and time.monotonic() - started > 6:
            break
        time.sleep(0.2)
    assert children, "no probe child started"
    if how == "kill -INT parent":
        os.kill(proc.pid, signal.SIGINT)
    elif how == "kill -TERM parent":  # a CI runner cancelling the job
        os.kill(proc.pid, signal.SIGTERM)
    else:
        os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == (143 if "TERM" in how else 130), err
    assert "Traceback" not in err, err
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"probe children still running: {alive}"
    assert left_in(tmpdir_) == []


# -- 11. export never writes into its inputs, and replaces its output whole -------------------


def _export(capsys, draft: Path, out: Path, *extra: str) -> tuple[int, str]:
    rc = cli.main(["export", str(draft), str(out), *EXPORT, *extra])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("where", ["the draft itself", "inside the draft", "the draft's parent",
                                   "the target config"])
def test_export_refuses_output_inside_the_draft(capsys, draft, tmp_path, where):
    target = tmp_path / "inputs" / "target" / "config.json"
    target.parent.mkdir()
    shutil.copy2(TINY, target)
    out = {"the draft itself": draft, "inside the draft": draft / "served",
           "the draft's parent": draft.parent, "the target config": target}[where]
    link = tmp_path / "link"
    link.symlink_to(out if out.exists() else draft)  # symlinks are resolved before comparing
    if where == "inside the draft":
        link = link / "served"
    before = hashes(draft, target)
    rc = cli.main(["export", str(draft), str(link), "--target-config", str(target),
                   "--dump-layout", "h2,h16,h29,h32", "--force"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "export target" in err, err
    assert hashes(draft, target) == before
    assert not (draft / "served").exists()


def test_export_force_replaces_a_sharded_checkpoint_whole(capsys, draft, tmp_path):
    out = tmp_path / "served"
    out.mkdir()
    for name in ("model.safetensors.index.json", "model-00001-of-00002.safetensors",
                 "model-00002-of-00002.safetensors", "config.json"):
        (out / name).write_text("old\n")
    before = hashes(draft, TINY)
    rc, err = _export(capsys, draft, out, "--force")
    assert rc == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inputs", "served"]  # no staging left beside
    assert hashes(draft, TINY) == before


def test_export_onto_a_file_is_exit_2(capsys, draft, tmp_path):
    out = tmp_path / "served"
    out.write_text("not a directory\n")
    for extra in ([], ["--force"]):
        rc, err = _export(capsys, draft, out, *extra)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and "not a directory" in err, err
    assert out.read_text() == "not a directory\n"


def test_export_read_only_is_exit_2(capsys, draft, tmp_path):
    if os.geteuid() == 0:  # root writes through permission bits; sysfs refuses even root
        out = Path("/sys/parity-export-test/served")
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        out = ro / "served"
    rc, err = _export(capsys, draft, out)
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"parity: export target {out}: cannot write") and "internal" not in err, err
    assert not out.exists()


# -- 13. a corrupt cache entry is rebuilt, never reused -----------------------------------------


@pytest.mark.parametrize("damage", ["truncated", "corrupted", "no manifest"])
def test_corrupt_cached_fixture_is_rebuilt(damage):
    recipe = DraftRecipe(seed=13)  # a recipe of its own: other tests' cache entries are not touched
    d = speculators_draft(recipe)
    good = hashes(d)
    weights = d / "model.safetensors"
    if damage == "truncated":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif damage == "corrupted":
        data = bytearray(weights.read_bytes())
        data[-1] ^= 0xFF
        weights.write_bytes(bytes(data))
    else:  # a copy cached before manifests existed, or a build interrupted before its last step
        (d / MANIFEST).unlink()
    assert speculators_draft(recipe) == d
    assert hashes(d) == good
