"""A derived release line installs what the launch contract imports (issue 33): vLLM
0.11.1-0.14.1's `vllm serve` parser imports `lmformatenforcer`, which their wheels require as
`lm-format-enforcer`; `--build`/the sweep add it from the wheel's own requirement (the module
found missing by running the family's launch imports in the release's environment, never a
typed list), so the seed launch resolves with the release's own code.

Verified on vLLM 0.12.0 (a home of its own, `ensure_release("vllm", "0.12.0", derive=True)`):
its line gained `lm-format-enforcer==0.11.3` and `contract serving --vllm 0.12.0 --serve-args`
with the seed resolved (exit 0).
"""

from __future__ import annotations

import os
import subprocess

import pytest
from packaging.requirements import Requirement

from parity import ondemand
from parity.registry import provides_module

from .helpers import ROOT, shadow_env


def test_a_module_is_matched_to_the_requirement_that_installs_it():
    assert provides_module("lm-format-enforcer", "lmformatenforcer")
    assert provides_module("nvidia-cutlass-dsl", "cutlass")
    assert provides_module("diskcache", "diskcache")
    assert not provides_module("lm-format-enforcer", "format_enforcer")


def test_a_missing_launch_import_is_added_with_the_wheels_own_pin(monkeypatch, tmp_path):
    """The module name is not the distribution's: the requirement is found by its words."""
    monkeypatch.setenv("PARITY_HOME", str(tmp_path))
    ondemand.add_line("vllm", "0.12.99", {"transformers": "4.57.3", "extra": ["numba"]})
    reqs = {ondemand._norm(r.name): r for r in map(Requirement, ["lm-format-enforcer==0.11.3", "numba==0.61.2",
                                                                 "torch==2.9.0"])}
    monkeypatch.setattr(ondemand, "requirements_by_name", lambda family, version: reqs)
    rounds = iter([["lmformatenforcer"], []])
    monkeypatch.setattr(ondemand, "missing_imports", lambda python, family: next(rounds))
    monkeypatch.setattr(ondemand, "_build", lambda *a: None)
    ondemand._add_missing_imports("vllm", "0.12.99", "vllm-0.12.99")
    from parity.envs import raw_envs

    assert raw_envs()["releases"]["vllm"]["0.12.99"]["extra"] == ["numba", "lm-format-enforcer==0.11.3"]


@pytest.mark.slow
def test_the_launch_parser_imports_are_code_paths_of_the_family(tmp_path):
    """In a linked copy of vLLM 0.11.0's environment whose `cli_args.py` (the parser `vllm serve`
    builds, the 0.11 family's LAUNCH) imports a module nothing installs, the family's missing
    modules name it; the environment as installed lacks none."""
    env = ROOT / ".envs" / "vllm-0.11.0"
    file = "lib/python3.11/site-packages/vllm/entrypoints/openai/cli_args.py"
    shadow = shadow_env(env, tmp_path / "shadow", {file: ("import argparse\n",
                                                          "import argparse\nimport parity_absent_enforcer\n")})
    run = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    run.update(PYTHONPATH=str(ROOT))
    ask = "from parity.extract.engines.vllm.families import missing_modules; print(sorted(missing_modules()))"
    for where, missing in ((env, "[]"), (shadow, "['parity_absent_enforcer']")):
        proc = subprocess.run([str(where / "bin" / "python"), "-c", ask], capture_output=True, text=True,
                              env={**run, "PYTHONPYCACHEPREFIX": str(where / ".pycache")}, cwd=ROOT, timeout=600)
        assert proc.stdout.strip().splitlines()[-1] == missing, proc.stderr[-2000:]
