"""parity's layers (.importlinter) hold, and the check is shown to fail on a reintroduced circle.

`lint-imports` (import-linter, in the main environment) reads every import of the package,
deferred ones included: an import that runs back up a layer, or from one engine into
another, or from one trainer into another, fails the suite."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import ROOT

LINT = Path(sys.executable).parent / "lint-imports"


def lint(package_parent: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    return subprocess.run([str(LINT), "--config", str(ROOT / ".importlinter"), "--no-cache"], cwd=package_parent,
                          env=env, capture_output=True, text=True, timeout=300)


def test_the_layers_and_the_engines_and_trainers_independence_hold():
    proc = lint(ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "10 kept, 0 broken" in proc.stdout, proc.stdout


@pytest.mark.parametrize("kind", ["engines", "trainers"])
def test_every_engine_and_trainer_folder_is_in_its_independence_contract(kind):
    """A new engine or trainer folder left out of its independence contract could import another
    unseen: every folder is listed, and nothing else."""
    import configparser
    import pkgutil

    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    listed = set(config[f"importlinter:contract:{kind}"]["modules"].split())
    folders = {f"parity.extract.{kind}.{m.name}" for m in pkgutil.iter_modules([str(ROOT / "parity" / "extract" / kind)])
               if m.ispkg}
    assert listed == folders, f"not listed: {sorted(folders - listed)}; no such folder: {sorted(listed - folders)}"


def test_every_module_of_extract_is_on_one_of_its_floors():
    """import-linter's layers leave a module no floor names unchecked: a module added to
    parity/extract must be placed (the harness below the sides, or above them)."""
    import configparser
    import pkgutil

    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    floors = config["importlinter:contract:extract-floors"]["layers"].split()
    placed = {name for name in floors if name not in (":", "|")}
    present = {m.name for m in pkgutil.iter_modules([str(ROOT / "parity" / "extract")])}
    assert placed == present, f"on no floor: {sorted(present - placed)}; no such module: {sorted(placed - present)}"


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "parity", tmp_path / "parity", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


@pytest.mark.parametrize("module, line, broken", [
    # the circle the gate and export used to make (export decided with the gate that advises it)
    ("export.py", "from .gate import check as _gate_check  # noqa: F401\n", "layers"),
    # the contract reading the inputs back (contract/models.py <-> inputs.py), hidden in a function
    ("contract/models.py", "def _back_up():\n    from ..inputs import Target  # noqa: F401\n", "layers"),
    # an engine reaching into another engine's folder
    ("extract/engines/vllm/probe.py", "from ..sglang.probe import adapter_for  # noqa: F401\n",
     "engines are independent"),
    # a trainer reaching into another trainer's folder: SpecForge reading drafts with speculators' reader
    # (the reader both share is parity.extract.trainers.draft), or speculators taking SpecForge's errors
    ("extract/trainers/specforge/__init__.py", "from ..speculators import read_draft as _read  # noqa: F401\n",
     "trainers are independent"),
    ("extract/trainers/speculators/probe.py", "def _sideways():\n    from ..specforge import SpecForgeError  # noqa: F401\n",
     "trainers are independent"),
    # inside extract: the shared machinery importing the engines it serves (standins.py listed the
    # engines' folders by importing them), a family importing the probe that runs it
    ("extract/standins.py", "def _engines():\n    from . import engines  # noqa: F401\n",
     ("extract's floors", "extract has no loops")),
    # the harness reaching up to the conventions table above the sides
    ("extract/reference.py", "def _table():\n    from .numbering import conventions  # noqa: F401\n",
     ("extract's floors", "extract has no loops")),
    # a side reaching up to the table: SpecForge reading the conventions itself
    ("extract/trainers/specforge/__init__.py", "def _table():\n    from ...numbering import conventions  # noqa: F401\n",
     ("extract's floors", "extract has no loops")),
    ("extract/trainers/speculators/families/v0_9.py", "def _probe():\n    from ..probe import ProbeRun  # noqa: F401\n",
     ("extract has no loops", "speculators families are leaves")),
    # an SGLang family composed through another family's module instead of the concerns' variants
    ("extract/engines/sglang/families/v0_5_21.py", "from . import v0_5_22  # noqa: F401\n",
     "sglang families are leaves"),
    ("extract/engines/sglang/families/v0_4_8.py", "def _older():\n    from .v0_5_3_post1 import Adapter  # noqa: F401\n",
     "sglang families are leaves"),
    # a vLLM family composed through another family's module instead of the concerns' variants
    ("extract/engines/vllm/families/v0_34.py", "from . import v0_33  # noqa: F401\n",
     "vllm families are leaves"),
    ("extract/engines/vllm/families/v0_8_5.py", "def _newer():\n    from .v0_9 import Adapter  # noqa: F401\n",
     "vllm families are leaves"),
    # a speculators family composed through another family's module instead of the variants (a family
    # importing the probe is the case above), or the probe taking a family by name, not by place
    ("extract/trainers/speculators/families/v0_8.py", "from .v0_9 import default_path as _default  # noqa: F401\n",
     "speculators families are leaves"),
    ("extract/trainers/speculators/families/v0_3.py", "def _newer():\n    from . import v0_5  # noqa: F401\n",
     "speculators families are leaves"),
    ("extract/trainers/speculators/probe.py", "def _pinned():\n    from .families import v0_9  # noqa: F401\n",
     "speculators families are leaves"),
    # a capturing trainer's family composed through another family instead of its variants
    ("extract/trainers/modelopt/families/v0_43.py", "from .v0_44 import convert as _merged  # noqa: F401\n",
     "the capturing trainers' families are leaves"),
    ("extract/trainers/nemo_automodel/families/v0_5.py", "from . import v0_6  # noqa: F401\n",
     "the capturing trainers' families are leaves"),
    # a trainer reaching into an engine past its runtime module: SpecForge taking SGLang's probe
    ("extract/trainers/specforge/probe.py", "def _engine():\n    from ...engines.sglang.probe import extract  # noqa: F401\n",
     "a trainer reaches an engine only through its runtime module"),
])
def test_a_reintroduced_circle_or_cross_import_fails(tmp_path, module, line, broken):
    root = _copy(tmp_path)
    path = root / "parity" / module
    path.write_text(path.read_text() + "\n\n" + line)
    proc = lint(root)
    assert proc.returncode == 1, proc.stdout[-3000:]
    verdicts = dict(m.groups() for m in re.finditer(r"^(.+) (KEPT|BROKEN)(?: \(\d+ ignored imports?\))?$", proc.stdout, re.M))
    broken = {broken} if isinstance(broken, str) else set(broken)
    assert {name for name, said in verdicts.items() if said == "BROKEN"} == broken, proc.stdout[-3000:]  # those only
