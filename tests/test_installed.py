"""parity installed from its wheel, outside the checkout, works (issue 13, item 10).

The wheel is built from a copy of the checkout's package sources and data, and installed with
pip (--no-deps) into a fresh virtual environment made outside the checkout. That environment
gets its other packages (torch, sglang, speculators, pytest) from the test suite's own
environment through a .pth line, which adds a folder to the path without running the
editable-install hook kept there: `import parity` resolves to the installed wheel (asserted),
never to the checkout. Every command runs with its working directory outside the checkout and
a fresh, empty PARITY_HOME, except `parity matrix`, whose PARITY_HOME is where the suite's
release environments are. The four commands run at once: each is a chain of single-threaded
engine processes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

from parity.envs import find_env

from .helpers import ROOT, build_wheel

pytestmark = pytest.mark.slow

@dataclass(frozen=True)
class Installed:
    python: Path
    bin: Path
    site: Path  # the fresh environment's site-packages, where the wheel went
    work: Path  # a working directory outside the checkout


def _run(cmd: list, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert proc.returncode == 0, (cmd, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    tmp = tmp_path_factory.mktemp("installed")
    wheel = build_wheel(tmp)

    venv = tmp / "venv"
    _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip())
    (site / "_test_suite_packages.pth").write_text(sysconfig.get_path("purelib") + "\n")
    _run([python, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check", wheel])

    work = tmp / "work"
    work.mkdir()
    return Installed(python, venv / "bin", site, work)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PARITY_DEBUG")}
    return {**env, "PARITY_HOME": str(home)}


def test_installed_commands_run_outside_the_checkout(installed, tmp_path):
    where = _run([installed.python, "-c", "import parity, parity.home as h; print(parity.__file__); "
                  "print(h.CHECKOUT); print(h.SHIPPED)"], cwd=installed.work, env=_env(tmp_path / "home"))
    module, checkout, shipped = where.stdout.split()
    assert Path(module).is_relative_to(installed.site), module  # the wheel, not the checkout
    assert checkout == "None" and Path(shipped) == installed.site / "parity" / "_shipped"

    # The user's own lock and files, in a directory of theirs (a copy of the bundled ones).
    user = installed.work / "repo"
    shutil.copytree(Path(shipped) / "fixtures", user / "fixtures")
    shutil.copytree(Path(shipped) / "contracts", user / "contracts")
    locks = user / "only-kimi"  # one lock: the plugin runs one item
    locks.mkdir()
    shutil.copy2(user / "contracts" / "kimi-k2.5-eagle3.json", locks / "kimi.json")  # ../fixtures/ holds
    release_home = find_env("sglang", "0.5.14").path.parent  # the suite's release environments

    parity = str(installed.bin / "parity")
    runs = {
        "example": ([parity, "example", "--no-verify"], tmp_path / "home-example"),
        "check": ([parity, "check", "--contract", Path(shipped) / "contracts" / "llama-3.1-8b-eagle3.json",
                   "--no-verify"], tmp_path / "home-check"),
        "matrix": ([parity, "matrix", "--contract", "repo/contracts/kimi-k2.5-eagle3.json",
                    "--sglang", "0.5.14", "--speculators", "0.9.0", "--no-verify"], release_home),
        "plugin": ([installed.python, "-m", "pytest", "-m", "parity", "-p", "no:cacheprovider",
                    "--parity-contracts", "repo/only-kimi", "--parity-no-verify",
                    "--rootdir", installed.work, "repo/only-kimi"], tmp_path / "home-plugin"),
    }
    before = sorted(p.relative_to(installed.work) for p in installed.work.rglob("*"))
    procs = {}
    for name, (cmd, home) in runs.items():
        out = open(tmp_path / f"{name}.out", "w+")
        procs[name] = (subprocess.Popen([str(c) for c in cmd], stdout=out, stderr=subprocess.STDOUT,
                                        text=True, cwd=installed.work, env=_env(home)), out)
    results = {}
    for name, (proc, out) in procs.items():
        rc = proc.wait(timeout=900)
        out.seek(0)
        results[name] = (rc, out.read())
        out.close()

    for name, (rc, text) in results.items():
        assert "Traceback" not in text, (name, text[-3000:])
    rc, text = results["example"]
    assert rc == 1, text[-3000:]  # the bundled example drifts
    assert "parity check: DRIFT" in text and "MISMATCH: embedding output vs decoder-layer output" in text
    assert 'FIX: write {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 3, 31]}}' in text
    rc, text = results["check"]
    assert rc == 0 and "PARITY" in text.upper(), text[-3000:]
    rc, text = results["matrix"]  # a release environment runs the installed parity too
    assert rc == 0, text[-3000:]
    assert "0.5.14" in text and "PARITY" in text and "ALL PARITY" in text, text[-3000:]
    rc, text = results["plugin"]
    assert rc == 0 and "1 passed" in text, text[-3000:]
    # Nothing was written into the working directory.
    assert sorted(p.relative_to(installed.work) for p in installed.work.rglob("*")) == before
