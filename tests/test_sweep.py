"""parity sweep: the published table is generated from its results, changes are marked, and the
sweep never deletes an environment it did not build. (The sweep itself is a benchmark-style
command, not CI: `parity sweep` writes releases.json and docs/releases.md.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pydantic import ValidationError

from parity import cli
from parity.contract.swept import Swept
from parity.report.releases import render_releases
from parity.sweep import SERVING_CASES
from parity.sweep.cases import DUMP_CASES
from parity.extract.engines import engine
from parity.sweep.run import drop_cached_wheel, drop_env, dump_cell, home_at, save, serving_cell

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


def test_the_published_results_read_through_their_model_as_written():
    """releases.json reads through parity.contract.swept whole: nothing in it is left unread."""
    data = json.loads((ROOT / "releases.json").read_text())
    assert Swept.read(data).model_dump(mode="json", exclude_unset=True) == data


@pytest.mark.parametrize("where", ["cell", "row", "build"])
def test_a_key_the_model_does_not_know_is_refused_before_the_results_are_written(tmp_path, where):
    data = json.loads(json.dumps(DATA))
    row = data["sglang"]["releases"][1]
    {"cell": row["cases"]["llama32 none"], "row": row, "build": row["build"]}[where]["fcc"] = ["h2"]
    with pytest.raises(ValidationError, match="fcc"):
        save(tmp_path / "releases.json", data)
    assert not list(tmp_path.iterdir())
    save(tmp_path / "releases.json", DATA)  # the same results, as the sweep writes them: saved
    assert json.loads((tmp_path / "releases.json").read_text()) == DATA


def test_render_only_rewrites_the_markdown(tmp_path, capsys):
    results = tmp_path / "r.json"
    results.write_text(json.dumps(DATA))
    assert cli.main(["sweep", "--render", "--results", str(results), "--markdown", str(tmp_path / "r.md")]) == 0
    assert (tmp_path / "r.md").read_text() == render_releases(DATA)


@pytest.mark.parametrize("argv", [["--sglang", "not a range"], ["--sglang", "none", "--vllm", "none", "--speculators", "none"],
                                  ["--sglang", "none", "--vllm", "none", "--speculators", "none", "--specforge", "none"],
                                  ["--specforge", "not a range"],
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


# -- SpecForge: swept when asked, over the capture cases --------------------------------------------

SPECFORGE_WHY = ("cannot fetch specforge 0.1.0's wheel to read its metadata: specforge 0.1.0 was published as a "
                 "source archive only, which pip cannot build (FileNotFoundError: [Errno 2] No such file or "
                 "directory: 'requirements.txt'), so no one can install it from the registry")
SPECFORGE = {"format": 2, "cases": {"specforge": {
    "llama32 default ids": "llama-3.1-8b, no run ids (the trainer's own default), states captured by the trainer itself",
    "llama32 [-1,15,28]": "llama-3.1-8b, run ids [-1, 15, 28], states captured by the trainer itself"}},
    "specforge": {"releases": [
        {"version": "0.1.0", "build": {"error": SPECFORGE_WHY, "seconds": 9.0}},
        {"version": "0.2.0", "build": {"seconds": 150.0, "line": {"sglang": "0.5.14"}, "line_from": "declared"},
         "family": "0.2", "note": None, "seconds": 90.0, "cases": {
             "llama32 default ids": {"fc": ["h2", "h16", "h29"], "target": "final", "family": "0.2",
                                     "outcome": "extracted"},
             "llama32 [-1,15,28]": {"error": "specforge 0.2.0 refuses this run: ValueError: model."
                                    "aux_hidden_state_layer_ids must contain exactly three distinct non-negative "
                                    "layer ids", "outcome": "engine refuses"}}}]}}


def test_the_specforge_section_has_its_rows_and_the_unbuilt_release_in_the_installers_words():
    md = render_releases(SPECFORGE)
    section = md.split("## specforge\n", 1)[1].split("\n## ", 1)[0]
    assert section.strip().startswith("1 of 2 specforge releases extracted (at least one case's states named)")
    assert "1 extracted, 1 the engine refuses, 0 parity cannot run; 1 release(s) not built." in section
    lines = {ln.split(" | ")[0].lstrip("| "): ln for ln in section.splitlines() if ln.startswith("| 0.")}
    assert "| not built: ✗ 1 |" in lines["0.1.0"]
    assert "| 0.2.0 | 0.2 | fc [h2, h16, h29], target final | ✗ 2 |" == lines["0.2.0"]
    assert ("1. cannot fetch specforge X's wheel to read its metadata: specforge X was published as a source "
            "archive only, which pip cannot build (FileNotFoundError: [Errno 2] No such file or directory: "
            "'requirements.txt'), so no one can install it from the registry") in section
    assert "2. (the engine refuses) specforge X refuses this run: ValueError" in section
    assert "seed launch" not in section  # a trainer has none


@pytest.fixture
def swept_with(monkeypatch, tmp_path):
    """`parity sweep`'s arguments as far as the sweep is asked for (the ranges, by package): the
    sweep itself is not run."""
    asked: list[dict] = []

    def sweep(results, home, *, wanted, **_):
        asked.append(wanted)
        return {"format": 2, "cases": {}}

    monkeypatch.setattr("parity.cli.sweep.sweep", sweep)

    def run(*argv: str) -> dict:
        assert cli.main(["sweep", *argv, "--results", str(tmp_path / "r.json"),
                         "--markdown", str(tmp_path / "r.md")]) == 0
        return asked[-1]
    return run


def test_specforge_is_swept_only_when_its_range_is_given(swept_with):
    from packaging.specifiers import SpecifierSet

    assert swept_with("--sglang", "none", "--vllm", "none") == {"speculators": "all"}  # the invocations of before
    assert swept_with("--sglang", "none", "--vllm", "none", "--speculators", "none", "--specforge", "all") == {
        "specforge": "all"}
    assert swept_with("--sglang", "none", "--vllm", "none", "--speculators", "none", "--specforge", ">=0.2") == {
        "specforge": SpecifierSet(">=0.2")}


def test_a_trainer_that_captures_its_states_is_swept_over_the_capture_cases():
    from parity.extract.trainers import trainer
    from parity.sweep import CAPTURE_CASES, TRAINING_CASES
    from parity.sweep.run import cases_of, describe_cases, side

    assert cases_of(trainer("specforge")) == list(CAPTURE_CASES)  # its CAPTURES_STATES
    assert cases_of(trainer("speculators")) == list(TRAINING_CASES)
    assert side("specforge").sweep_from == "0.1.0" and side("specforge").sweep_default == "none"
    assert list(describe_cases()["specforge"]) == [c.name for c in CAPTURE_CASES]
    for case in CAPTURE_CASES:
        assert case.target_config.is_file()


class CapturingTrainer:
    """A trainer that captures its states itself, registered as trainer folders are: what the
    sweep hands it is recorded (the row is reached through the Trainer protocol alone). It names
    the fc states by SGLang's rule (id k: h(k+1)) and refuses a negative id, as a trainer would."""

    NAME, FLAG, TITLE = "capturer", "--capturer", "Capturer"
    CAPTURES_STATES, IDS_FLAG, OWN_FLAGS, DATAGEN_ENGINE = True, "--capturer-ids", (), None
    ERRORS = ()
    FORWARD_MODULE = "parity.extract.trainers.capturer.forward_side"
    FORWARD_REPLY = dict
    PROBE_MODULE = "parity.extract.trainers.capturer.probe"
    SWEEP_FROM = "1.0"

    def __init__(self):
        self.calls: list[tuple] = []

    def training_contract(self, target, dump_layout=None, *, datagen_ids=None, release=None, **kwargs):
        from parity.contract import Provenance, Tap, TrainingContract
        from parity.inputs import InputError

        self.calls.append((target.model.num_hidden_layers, dump_layout, datagen_ids, release, kwargs))
        ids = datagen_ids if datagen_ids is not None else [1, target.model.num_hidden_layers // 2 - 1]
        if min(ids) < 0:
            raise InputError(f"the capturer refuses ids {ids}")
        layout = tuple(Tap.parse(f"h{i + 1}") for i in ids) + (Tap.parse("final"),)
        return TrainingContract(target_model=target.model, fc_input=layout[:-1], dump_layout=layout,
                                dump_layout_source="trainer_capture", fc_slots=tuple(range(len(ids))),
                                target=layout[-1], target_slot=len(ids), alignment="t+1",
                                provenance=Provenance(package=self.NAME, version=release, code_path="tests",
                                                      family="1"))

    def add_options(self, parser, command):
        if command == "sweep":
            parser.add_argument(self.FLAG, metavar="RANGE")

    def release_from(self, args):
        return getattr(args, "capturer", None)

    def ids_from(self, args):
        return None

    def read_draft(self, draft_dir):
        raise AssertionError("the sweep's capture cases have no draft")

    def is_trained_draft(self, config):
        return False


def test_each_capture_case_gives_the_trainer_its_run_ids_and_no_dump():
    from parity.extract.trainers import register_trainer, unregister_trainer
    from parity.sweep import CAPTURE_CASES
    from parity.sweep.run import run_release

    fake = register_trainer(CapturingTrainer())
    try:
        row = run_release("capturer", "1.0", {"seconds": 0.0})
    finally:
        unregister_trainer(fake.NAME)
    assert [(n, dump, ids, release, kw) for n, dump, ids, release, kw in fake.calls] == [
        (32, None, None, "1.0", {}), (32, None, [-1, 15, 28], "1.0", {}),
        (61, None, None, "1.0", {}), (61, None, [2, 30, 58], "1.0", {})]
    assert [c.name for c in CAPTURE_CASES] == list(row["cases"])
    assert row["cases"]["llama32 default ids"] == {"fc": ["h2", "h16"], "target": "final", "family": "1",
                                                   "note": None, "outcome": "extracted"}
    assert row["cases"]["llama32 [-1,15,28]"] == {"error": "the capturer refuses ids [-1, 15, 28]",
                                                  "outcome": "engine refuses"}  # its InputError
    assert row["family"] == "1"


@pytest.mark.slow  # asks the registry (pip download) for SpecForge 0.1.0's archive
def test_specforge_0_1_0_is_a_row_saying_why_it_is_not_built(tmp_path):
    """SpecForge 0.1.0 is on the registry as a source archive whose setup.py reads a
    requirements.txt it does not ship: the sweep's row says so in pip's words, as the row of any
    release whose environment did not build."""
    from parity.sweep.run import build

    with home_at(tmp_path):
        built = build("specforge", "0.1.0")
    assert "source archive only" in built["error"] and "requirements.txt" in built["error"], built
    assert not (tmp_path / "specforge-0.1.0").exists()
