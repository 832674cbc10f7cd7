"""parity sweep: the published table is generated from its results, changes are marked, and the
sweep never deletes an environment it did not build. (The sweep itself is a benchmark-style
command, not CI: `parity sweep` writes releases.json and docs/releases.md.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from parity import cli
from parity.report.releases import render_releases
from parity.sweep import SERVING_CASES
from parity.sweep.cases import DUMP_CASES
from parity.extract.engines import engine
from parity.sweep.run import drop_cached_wheel, drop_env, dump_cell, home_at, serving_cell

from .helpers import ROOT


def _row(version, born, family="0.5.12", build=None):
    if build is not None:
        return {"version": version, "build": build}
    return {"version": version, "build": {"seconds": 3.0, "compile_seconds": 21.5, "extra_bytes": 91_000_000,
                                          "line_from": "releases.json"},
            "family": family,
            "seconds": 30.0, "cases": {
                "deepseek61 [2,30,58]": {"fc": born},
                "deepseek61 [-1,2,30]": {"fc": [None, None, None], "error": "TypeError: Tensor + None"},
                "llama32 none": {"fc": ["h2", "h16", "h29"], "default": True}}}


DATA = {"format": 1, "cases": {"sglang": {"deepseek61 [2,30,58]": "deepseek-v3-61l (ids [2, 30, 58])",
                                          "deepseek61 [-1,2,30]": "deepseek-v3-61l (ids [-1, 2, 30])",
                                          "llama32 none": "llama-3.1-8b (no ids)"}},
        "sglang": {"releases": [_row("0.4.4", None, build={"error": "no EAGLE-3 draft class", "seconds": 1}),
                                _row("0.5.12.post1", ["h3", "h31", "h59"]),
                                _row("0.5.13", ["h2", "h30", "h58"], family="0.5.14"),
                                _row("0.5.14", ["h2", "h30", "h58"], family="0.5.14")]},
        "runs": [{"releases": 4, "seconds": 120.0}]}


def test_the_born_from_change_is_highlighted_where_it_happened():
    md = render_releases(DATA)
    lines = {ln.split(" | ")[0].lstrip("| "): ln for ln in md.splitlines() if ln.startswith("| 0.")}
    assert "| h3, h31, h59 |" in lines["0.5.12.post1"]
    assert "**h2, h30, h58**" in lines["0.5.13"]  # changed against the release above
    assert "| h2, h30, h58 |" in lines["0.5.14"] and "**" not in lines["0.5.14"]
    assert "h2, h16, h29 (default)" in lines["0.5.13"]
    assert "not built: ✗ 1" in lines["0.4.4"]
    assert "1. no EAGLE-3 draft class" in md and "2. (not classified) TypeError: Tensor + None" in md
    assert "3 of 4 sglang releases extracted" in md
    assert "| sglang | 0.5.13 | published | 3.0 | 21.5 | 91 | 30.0 |" in md


def test_the_published_table_is_the_render_of_the_published_results():
    results = ROOT / "releases.json"
    if not results.is_file():
        pytest.skip("no published sweep results")
    assert (ROOT / "docs" / "releases.md").read_text() == render_releases(json.loads(results.read_text()))


def test_render_only_rewrites_the_markdown(tmp_path, capsys):
    results = tmp_path / "r.json"
    results.write_text(json.dumps(DATA))
    assert cli.main(["sweep", "--render", "--results", str(results), "--markdown", str(tmp_path / "r.md")]) == 0
    assert (tmp_path / "r.md").read_text() == render_releases(DATA)


@pytest.mark.parametrize("argv", [["--sglang", "not a range"], ["--sglang", "none", "--vllm", "none", "--speculators", "none"],
                                  ["--limit", "0"], ["--render", "--results", "/nonexistent/r.json"]])
def test_bad_sweep_input_is_one_line_exit_2(argv, capsys):
    assert cli.main(["sweep", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("parity: ") and err.count("\n") == 1, err


def test_the_sweep_never_deletes_an_environment_it_did_not_build(tmp_path):
    home = tmp_path / "sweep-home"
    home.mkdir()
    with home_at(home):
        drop_env("sglang", "0.5.23", home)  # the environment this test runs in
        drop_env("speculators", "0.9.0", home)
    assert Path(sys.executable).exists()


def test_only_the_releases_own_wheel_leaves_the_cache(tmp_path):
    """uv's layout: wheels-v*/INDEX/NAME/VERSION-TAGS links to its unpacked archive."""
    cache = tmp_path / ".uv-cache"
    wheels, archive = cache / "wheels-v7" / "pypi" / "vllm", cache / "archive-v0"
    for version, key in (("0.12.0", "a"), ("0.12.0.post1", "b"), ("0.13.0", "c")):
        (archive / key / "vllm").mkdir(parents=True)
        wheels.mkdir(parents=True, exist_ok=True)
        (wheels / f"{version}-cp38-abi3-manylinux1_x86_64").symlink_to(archive / key)
        (wheels / f"{version}-cp38-abi3-manylinux1_x86_64.http").write_text("")
    shared = cache / "archive-v0" / "numpy"
    shared.mkdir()
    drop_cached_wheel("vllm", "0.12.0", tmp_path)
    assert sorted(p.name for p in archive.iterdir()) == ["b", "c", "numpy"]
    assert sorted(p.name for p in wheels.iterdir()) == [f"{v}-cp38-abi3-manylinux1_x86_64{e}" for v in
                                                        ("0.12.0.post1", "0.13.0") for e in ("", ".http")]


def test_every_case_writes_the_draft_config_it_names(tmp_path):
    for case in SERVING_CASES:
        cfg = json.loads((case.write_draft(tmp_path / case.name.replace(" ", "_")) / "config.json").read_text())
        nested = cfg.get("eagle_config", {}).get("eagle_aux_hidden_state_layer_ids")
        top = cfg.get("eagle_aux_hidden_state_layer_ids")
        assert (nested if case.where == "nested" else top) == (list(case.ids) if case.ids else None)
        assert case.target_config.is_file()


VLLM = {"format": 1, "cases": {"vllm": {"llama32 [1,15,28]": "llama-3.1-8b (ids [1, 15, 28] in eagle_config)",
                                        "dump llama32 (default ids)": "llama-3.1-8b, the dump for the launch default ids"}},
        "vllm": {"releases": [
            {"version": "0.11.0", "build": {"seconds": 60.0}, "family": "0.11", "cases": {
                "llama32 [1,15,28]": {"fc": ["h2", "h16", "h29"], "default": True},
                "dump llama32 (default ids)": {"layout": ["h2", "h16", "h29"], "launch_ids": [2, 16, 29, 32]}}},
            {"version": "0.33.0", "build": {"seconds": 60.0}, "family": "0.33", "cases": {
                "llama32 [1,15,28]": {"fc": ["h2", "h16", "h29"], "default": True,
                                      "runners": {"v1": ["h1", "h15", "h28"], "v2": ["h2", "h16", "h29"]}},
                "dump llama32 (default ids)": {"layout": ["h2", "h16", "h29", "h32"], "launch_ids": [2, 16, 29, 32]}}}]}}


def test_vllm_rows_show_both_runners_and_the_dump():
    md = render_releases(VLLM)
    lines = {ln.split(" | ")[0].lstrip("| "): ln for ln in md.splitlines() if ln.startswith("| 0.")}
    assert "| h2, h16, h29 (default) | ids [2, 16, 29, 32]: [h2, h16, h29] |" in lines["0.11.0"]
    # the GPU-default runner first, (default) said of it; both cells changed against 0.11
    assert "| **v2: h2, h16, h29 (default) / v1: h1, h15, h28** |" in lines["0.33.0"]
    assert "**ids [2, 16, 29, 32]: [h2, h16, h29, h32]**" in lines["0.33.0"]
    assert "2 of 2 vllm releases extracted" in md


@pytest.mark.slow  # runs vLLM 0.33.0's probe
def test_a_vllm_cell_is_what_both_runners_feed(tmp_path):
    """The sweep's vLLM cells run vLLM 0.33.0's real runners and capture: nested ids are read by
    the V1 runner only (the V2 runner, the GPU default, serves the defaults), and the launch
    default dump holds the last layer too."""
    vllm = engine("vllm", "0.33.0")
    cell = serving_cell(SERVING_CASES[0], vllm, tmp_path)
    assert cell["fc"] == ["h2", "h16", "h29"] and cell["default"], cell
    assert cell["runners"] == {"v1": ["h1", "h15", "h28"], "v2": ["h2", "h16", "h29"]}
    assert "error" not in cell
    dump = dump_cell(DUMP_CASES[0], vllm)
    assert dump["layout"] == ["h2", "h16", "h29", "h32"] and dump["launch_ids"] == [2, 16, 29, 32], dump


def test_an_error_names_no_machines_paths_and_not_its_release():
    from parity.report.releases import general

    said = general("cannot import name 'f' from 'm' (/tmp/home/vllm-0.28.0/lib/python3.11/site-packages/m.py); "
                   "target config /work/x/fixtures/targets/t/config.json: vllm 0.28.0 refused", "0.28.0")
    assert said == ("cannot import name 'f' from 'm' ($PARITY_HOME/vllm-X/lib/python3.11/site-packages/m.py); "
                    "target config fixtures/targets/t/config.json: vllm X refused")
