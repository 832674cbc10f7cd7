"""The README's CI recipe ("In your CI"), run as written on a fresh machine for a vLLM lock, and a
vLLM bump it must catch (issue 47, item 4).

A fresh virtual environment (made by the pinned uv the checkout builds its environments with)
gets what the recipe's install step installs, from the package cache, offline: the pull
request's pinned stack (the main environment's packages from its committed lock, less SGLang,
which a vLLM deployment does not serve), vLLM 0.34.0 with `--no-deps` as the recipe installs it
(so its code cannot be imported there: parity runs its own environment of that release), and
parity's wheel, built from this checkout. PARITY_HOME starts empty but for the package cache
(the same hard-linked cache every environment of the checkout is built from).

The lock is written once, as a developer would, by the checkout's parity under vLLM 0.34.0
(`--vllm 0.34.0`): the bundled Llama-3.1-8B draft with SGLang's nested ids, dumped as
h2,h16,h29,h32, which 0.34 serves at parity (V2 reads no nested ids: its default layers) and
0.33.0's V1 runner reads (tests/test_verdict_table.py). Then every other step of the recipe's
workflow runs in the user's repository exactly as the README writes it (the set-up step and
`pytest`): it passes. The venv's vLLM is bumped to 0.33.0 and the same steps run again: pytest
fails, naming the release change and the difference, with the fix naming the file to edit.
Removing the recipe's set-up step makes the first pytest fail (the test run builds no
environment), so this test fails too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from parity.build_env import torch_source, uv, uv_env

from .helpers import ROOT, build_wheel

pytestmark = [pytest.mark.slow, pytest.mark.exhaustive]  # a wheel, a venv, two releases: ./dev test --all

TARGET = ROOT / "fixtures" / "targets" / "llama-3.1-8b"
DRAFT = ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3"
LAYOUT = "h2,h16,h29,h32"


def workflow() -> list[list[str]]:
    """The README's workflow file: each step's shell lines, in order (comments dropped)."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```yaml\n# \.github/workflows/eagle-parity\.yml\n(.*?)```", text, re.S)
    assert block, "the README shows no .github/workflows/eagle-parity.yml"
    steps, lines = [], block.group(1).splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)(?:-\s+)?run: (.*)$", line)  # `run:` under a `- name:`, or a step `- run: ...` of its own
        if not m:
            continue
        if m.group(2).strip() != "|":
            steps.append([m.group(2)])
            continue
        indent, body = None, []
        for nxt in lines[i + 1:]:
            here = len(nxt) - len(nxt.lstrip())
            if nxt.strip() and here <= len(m.group(1)):
                break
            body.append(nxt.strip())
        steps.append([ln for ln in body if ln])
    return [[ln.split("  #")[0].strip() for ln in step if not ln.startswith("#")] for step in steps]


def hashed(lock: str) -> dict[str, str]:
    """Each package of a committed lock (locks/NAME.txt): its pinned line with its hashes."""
    out: dict[str, list[str]] = {}
    name = None
    for line in (ROOT / "locks" / lock).read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==\S+", line)
        if m:
            name = m.group(1).lower()
            out[name] = [line.rstrip(" \\")]
        elif name and line.strip().startswith("--hash="):
            out[name].append("    " + line.strip().rstrip(" \\"))
        else:
            name = None
    return {k: " \\\n".join(v) + "\n" for k, v in out.items()}


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert proc.returncode == 0, (cmd, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def test_the_readme_ci_recipe_passes_from_the_wheel_and_fails_on_a_vllm_bump(tmp_path):
    started = time.monotonic()
    steps = workflow()
    install = next(s for s in steps if any(ln.startswith("pip install") for ln in s))
    assert any('"eagle-parity[pytest]"' in ln for ln in install), install  # pytest named, with xdist
    assert any("--no-deps" in ln for ln in install), install
    job = [ln for s in steps if s is not install for ln in s]
    assert any(ln.startswith("pytest -m parity") for ln in job), job
    assert job.index("parity setup --installed") < len(job) - 1, job  # the set-up step, before pytest

    # parity's wheel, from a copy of the checkout's sources
    wheel = build_wheel(tmp_path)

    # the recipe's install step, from the package cache: the PR's pinned stack, vllm --no-deps, the wheel
    exe, env = str(uv()), uv_env()
    venv = tmp_path / "venv"
    _run([exe, "venv", "-q", "--python", getattr(sys, "_base_executable", sys.executable), venv], env=env)
    py = venv / "bin" / "python"
    main = hashed("main.txt")
    (tmp_path / "stack.txt").write_text("".join(v for k, v in main.items() if k != "sglang"))
    _run([exe, "pip", "sync", "-q", "--offline", "--python", py, "--require-hashes", *torch_source(),
          tmp_path / "stack.txt"], env=env)

    def serve(release: str) -> None:  # `pip install -r requirements-serving.txt --no-deps`: vllm==release
        (tmp_path / "serving.txt").write_text(hashed(f"vllm-{release}.txt")["vllm"])
        _run([exe, "pip", "install", "-q", "--offline", "--no-deps", "--python", py, "--require-hashes", "-r",
              tmp_path / "serving.txt"], env=env)

    serve("0.34.0")
    _run([exe, "pip", "install", "-q", "--offline", "--no-deps", "--python", py, wheel], env=env)

    # the user's repository, and its lock, written once under vLLM 0.34.0 by the checkout's parity
    repo = tmp_path / "repo"
    shutil.copytree(TARGET, repo / "deploy" / "target")
    shutil.copytree(DRAFT, repo / "deploy" / "draft")
    (repo / "contracts").mkdir()
    _run([sys.executable, "-m", "parity", "lock", "contracts/llama.json", "--engine", "vllm", "--vllm", "0.34.0",
          "--target-config", "deploy/target/config.json", "--draft", "deploy/draft", "--dump-layout", LAYOUT],
         cwd=repo, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert '"engine_release": "0.34.0"' in (repo / "contracts" / "llama.json").read_text()

    # a fresh machine: an empty PARITY_HOME but for the package cache; the venv first on PATH
    home = tmp_path / "home"
    home.mkdir()
    (home / ".uv-cache").symlink_to(Path(env["UV_CACHE_DIR"]), target_is_directory=True)
    user = {k: v for k, v in os.environ.items() if not k.startswith(("PARITY", "PYTHON", "PYTEST", "UV_"))}
    user.update(PARITY_HOME=str(home), PATH=os.pathsep.join([str(venv / "bin"), str(Path(exe).parent),
                                                             user.get("PATH", "")]))

    def the_job(steps: list[str] = job) -> subprocess.CompletedProcess:
        out = None
        for line in steps:
            out = subprocess.run(["bash", "-c", line], capture_output=True, text=True, cwd=repo, env=user,
                                 timeout=1800)
            if line.startswith("pytest"):
                return out
            assert out.returncode == 0, (line, out.stdout[-3000:], out.stderr[-3000:])
        return out

    # without its set-up step the job fails, naming it: a test run installs nothing
    unset = the_job([line for line in job if line != "parity setup --installed"])
    shown = unset.stdout[-4000:] + unset.stderr[-2000:]
    assert unset.returncode == 1 and "1 failed" in unset.stdout, shown
    assert "parity setup --installed" in unset.stdout, shown
    assert not any(home.glob("vllm-*")), sorted(p.name for p in home.iterdir())

    passed = the_job()
    shown = passed.stdout[-4000:] + passed.stderr[-2000:]
    assert passed.returncode == 0 and "1 passed" in passed.stdout, shown
    assert "Traceback" not in shown, shown

    serve("0.33.0")  # the bump: vLLM 0.33.0's V1 runner reads the draft's nested ids
    failed = the_job()
    shown = failed.stdout[-6000:] + failed.stderr[-2000:]
    assert failed.returncode == 1 and "1 failed" in failed.stdout, shown
    assert "lock      locked under vllm 0.34.0, checked under vllm 0.33.0" in failed.stdout, shown
    assert "serving   vllm 0.33.0 (installed, run in parity's environment vllm-0.33.0)" in failed.stdout, shown
    assert "the v1 runner ['h1', 'h15', 'h28']" in failed.stdout, shown  # the difference itself
    assert 'FIX: write {"eagle_aux_hidden_state_layer_ids": [2, 16, 29]} in deploy/draft/config.json' \
        in failed.stdout, shown

    # the CLI on the bumped venv: it reports and runs the installed 0.33.0 (the reply the test run stored)
    check = ["parity", "check", "--engine", "vllm", "--target-config", "deploy/target/config.json", "--draft",
             "deploy/draft", "--dump-layout", LAYOUT]
    proc = subprocess.run(check, capture_output=True, text=True, cwd=repo, env=user, timeout=1800)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "serving   vllm 0.33.0 (installed, run in parity's environment vllm-0.33.0)" in proc.stdout

    # an edit of the installed vLLM that parity would not run (its code runs in parity's copy) is refused
    site = Path(_run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                     env=user).stdout.strip())
    edited = site / "vllm" / "config" / "speculative.py"
    # saved as an editor saves it: a new file. Writing into the installed one would write into
    # the package cache it is hard-linked from, and so into every environment built from it
    patched = edited.read_text() + "\n# a local patch\n"
    edited.unlink()
    edited.write_text(patched)
    copies = list(home.glob("vllm-*/lib/python*/site-packages/vllm/config/speculative.py"))
    assert len(copies) == 2, copies  # parity's environments of 0.34.0 and 0.33.0 kept the releases' files
    assert not [copy for copy in copies if "# a local patch" in copy.read_text()], copies
    proc = subprocess.run(check, capture_output=True, text=True, cwd=repo, env=user, timeout=1800)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout[-3000:] + proc.stderr[-2000:]
    [line] = proc.stderr.splitlines()[-1:]
    assert line.startswith("parity: --engine vllm: the installed vllm 0.33.0 cannot run in this interpreter ("), line
    assert "its files were edited since they were installed (1 file): vllm/config/speculative.py;" in line, line

    # no SGLang here: the bundled example says what to install, in one line
    proc = subprocess.run(["parity", "example"], capture_output=True, text=True, cwd=repo, env=user, timeout=600)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "pip install sglang==0.5.23" in proc.stderr, \
        proc.stderr
    print(f"the recipe, a bump and both runs: {time.monotonic() - started:.0f} s")
