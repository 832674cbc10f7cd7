"""`--build` (parity.ondemand): a release's envs.toml line is read from its wheel's metadata,
never typed. The committed lines are the check: derived again, they come out the same."""

from __future__ import annotations

import tomllib

import pytest

from parity.envs import load_specs, raw_envs
from parity.ondemand import add_line, release_line

from .helpers import ROOT

SHIPPED = tomllib.loads((ROOT / "envs.toml").read_text())

pytestmark = pytest.mark.slow  # fetches the wheels (pip download --no-deps)


@pytest.mark.parametrize("family, version", [("sglang", "0.5.14"), ("speculators", "0.8.1")])
def test_the_derived_line_is_the_committed_one(family, version):
    assert release_line(family, version, SHIPPED["template"][family]) == SHIPPED["releases"][family][version]


def test_a_derived_line_lands_in_the_users_file(tmp_path, monkeypatch):
    monkeypatch.setenv("PARITY_HOME", str(tmp_path))
    add_line("sglang", "0.5.99", {"transformers": "5.19.0", "tvm_ffi": "0.1.11", "openai": "2.8.0"})
    add_line("sglang", "0.5.98", {"transformers": "5.19.0", "tvm_ffi": "0.1.11", "openai": "2.8.0",
                                  "extra": ["xgrammar==0.2.1"]})
    specs = load_specs()
    assert "sglang==0.5.99" in specs["sglang-0.5.99"]["no_deps"]
    assert "xgrammar==0.2.1" in specs["sglang-0.5.98"]["deps"]
    assert raw_envs(user=False)["releases"]["sglang"].keys() == SHIPPED["releases"]["sglang"].keys()
