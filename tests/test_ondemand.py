"""`--build` (parity.ondemand): a release's envs.toml line is read from its wheel's metadata,
never typed. The committed lines are the check: derived again, they come out the same."""

from __future__ import annotations

import tomllib

import pytest

from parity.envs import load_specs, raw_envs
from parity import ondemand
from parity.ondemand import LineSource, add_line, ensure_release, release_line, swept_line

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


@pytest.fixture
def no_build(monkeypatch, tmp_path):
    """A home of its own, and each environment build recorded instead of run (building one is
    what the sweep and `tests/test_cli.py`'s --build runs do; here only the line chosen is under test)."""
    monkeypatch.setenv("PARITY_HOME", str(tmp_path))
    built: list = []
    monkeypatch.setattr(ondemand, "_build", lambda family, version, name, spec: built.append((name, spec)))
    return built


def test_a_release_the_published_sweep_ran_is_built_from_its_line(no_build, monkeypatch):
    monkeypatch.setattr(ondemand, "release_line", lambda *a: pytest.fail("derived a line releases.json has"))
    line = swept_line("sglang", "0.5.19")
    assert line is not None and "0.5.19" not in SHIPPED["releases"]["sglang"]
    assert ensure_release("sglang", "0.5.19") is LineSource.SWEPT
    assert raw_envs()["releases"]["sglang"]["0.5.19"] == line
    [(name, spec)] = no_build
    assert name == "sglang-0.5.19" and spec == load_specs()["sglang-0.5.19"]
    assert f"transformers=={line['transformers']}" in spec["deps"]


def test_a_release_no_sweep_ran_has_its_line_derived(no_build, monkeypatch):
    derived, ran = [], []
    monkeypatch.setattr(ondemand, "release_line", lambda family, version, template: derived.append(version) or
                        {"transformers": "5.19.0", "tvm_ffi": "0.1.11", "openai": "2.8.0"})
    for step in ("_step_back_too_new", "_add_missing_imports"):  # the checks that run its imports
        monkeypatch.setattr(ondemand, step, lambda family, version, name, step=step: ran.append((step, version)))
    assert swept_line("sglang", "0.5.99") is None
    assert ensure_release("sglang", "0.5.99") is LineSource.DERIVED
    assert ensure_release("sglang", "0.5.19", derive=True) is LineSource.DERIVED  # asked to derive again
    assert derived == ["0.5.99", "0.5.19"]
    assert [v for _, v in ran] == ["0.5.99", "0.5.99", "0.5.19", "0.5.19"]
    assert [name for name, _ in no_build] == ["sglang-0.5.99", "sglang-0.5.19"]


def test_a_release_published_as_an_unbuildable_source_archive_says_so(no_build):
    """SpecForge 0.1.0 is on the registry as a source archive only, whose setup.py reads a
    requirements.txt it does not ship: the refusal names that (pip's own words), not "no
    matching distribution", which would send the user looking for a typo."""
    with pytest.raises(ondemand.BuildError) as err:
        ensure_release("specforge", "0.1.0")
    assert "source archive only" in str(err.value) and "requirements.txt" in str(err.value)
    assert no_build == []
