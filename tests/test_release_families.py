"""Families, not versions: a release no family's range lists runs with the newest family whose
code paths are all in its installed source, and every report says so; a moved code path is
still a loud refusal naming what was looked for (parity.extract.families.place).

An unseen release is simulated by the serving probe's own override mechanism
(PARITY_PROBE_OVERRIDES, tests/drift/serving_unseen_release*.py): the installed 0.5.23's code
reporting itself as 0.5.99, and the same with its aux-id reader deleted. speculators is
simulated in-process: the probe's version lookup reports an unseen release."""

from __future__ import annotations

import json

import pytest

from parity import cli
from parity.extract.families import UnsupportedRelease, place
from parity.extract.run_until import CodePathMoved, ModuleAbsent, require

from .helpers import ROOT

LOCK = ROOT / "contracts" / "llama-3.1-8b-eagle3.json"
SGLANG = "parity.extract.engines.sglang.families"
NEWER = "sglang 0.5.99 is newer than any release parity has verified; extracted with the 0.5.23-family adapter"


# -- placement (no engine runs) -------------------------------------------------------------------

def _fits_only(*names: str):
    def fits(module):
        if module.__name__.rsplit(".", 1)[-1] not in names:
            raise CodePathMoved(f"looked for {module.__name__}.X; there is none")
    return fits


def test_vllm_releases_are_placed_the_same_way():
    vllm = "parity.extract.engines.vllm.families"
    assert place("vllm", "0.11.0", vllm, _fits_only()).family == "0.11"
    newer = place("vllm", "0.35.0", vllm, _fits_only("v0_34", "v0_11"))
    assert newer.family == "0.34" and newer.note == ("vllm 0.35.0 is newer than any release parity has verified; "
                                                     "extracted with the 0.34-family adapter")
    older_fits = place("vllm", "0.35.0", vllm, _fits_only("v0_33", "v0_11"))  # newest first: 0.34 does not fit
    assert older_fits.family == "0.33" and older_fits.note.endswith("extracted with the 0.33-family adapter")
    with pytest.raises(UnsupportedRelease, match="0.34-family adapter: looked for"):
        place("vllm", "0.35.0", vllm, _fits_only())
    for version, family in (("0.16.0", "0.16"), ("0.17.0", "0.17"), ("0.21.0", "0.17"), ("0.22.0", "0.22"),
                            ("0.27.1", "0.22")):
        assert place("vllm", version, vllm, _fits_only()).family == family  # in range: fits is never asked
    assert place("vllm", "0.27.1", vllm, _fits_only()).note == (
        "vllm 0.27.1 is not a release parity has verified; it is in the 0.22 family's range (<0.28,>=0.22), "
        "whose adapter extracted it")
    between = place("vllm", "0.15.1", vllm, _fits_only("v0_11"))  # newest first: 0.34 ... 0.16 do not fit
    assert between.family == "0.11" and "(verified: 0.8.5, 0.10.2, 0.11.0, 0.16.0, 0.17.0, 0.22.0, 0.28.0, 0.33.0, 0.34.0)" in between.note
    for version, family in (("0.8.5", "0.8.5"), ("0.8.5.post1", "0.8.5"), ("0.9.0", "0.9"), ("0.10.2", "0.9")):
        assert place("vllm", version, vllm, _fits_only()).family == family  # in range: fits is never asked


def test_a_verified_release_gets_its_family_and_no_note():
    p = place("sglang", "0.5.14", SGLANG, _fits_only())  # in range: fits is never asked
    assert p.family == "0.5.14" and p.note is None


def test_an_unverified_release_in_a_range_gets_its_family_with_a_note():
    p = place("sglang", "0.5.14.post1", SGLANG, _fits_only())
    assert p.family == "0.5.14" and p.note.startswith("sglang 0.5.14.post1 is not a release parity has verified")


def test_a_newer_release_runs_with_the_newest_family_whose_code_paths_fit():
    assert place("sglang", "0.5.99", SGLANG, _fits_only("v0_5_23", "v0_5_14")).note == NEWER
    older = place("sglang", "0.5.99", SGLANG, _fits_only("v0_5_14"))
    assert older.family == "0.5.14"
    assert older.note.endswith("newer than any release parity has verified; extracted with the 0.5.14-family adapter")


def test_a_release_between_families_says_it_is_unverified():
    p = place("sglang", "0.4.3", SGLANG, _fits_only("v0_5_12"))
    assert p.family == "0.5.12"
    assert p.note == ("sglang 0.4.3 is not a release parity has verified (verified: 0.4.8.post1, 0.5.3.post1, "
                      "0.5.3.post3, 0.5.7, 0.5.10, 0.5.12.post1, 0.5.14, 0.5.18, 0.5.21, 0.5.22, 0.5.23); extracted "
                      "with the 0.5.12-family adapter, whose code paths were all found in it")


def test_no_family_fitting_is_refused_naming_what_each_looked_for():
    with pytest.raises(UnsupportedRelease) as exc:
        place("sglang", "0.5.99", SGLANG, _fits_only())
    msg = str(exc.value)
    assert msg.startswith("no parity release family can run sglang 0.5.99") and "\n" not in msg
    for family in ("0.5.23", "0.5.14", "0.5.12"):
        assert f"{family}-family adapter: looked for" in msg


def test_require_names_what_it_looked_for():
    require("json.JSONDecoder.decode")
    with pytest.raises(CodePathMoved, match=r"looked for json\.JSONDecoder\.nothing; json\.JSONDecoder has no "):
        require("json.JSONDecoder.nothing")
    with pytest.raises(ModuleAbsent, match="no_such_package_parity"):
        require("no_such_package_parity.x")


# -- sglang end to end: the real probe under an unseen release --------------------------------------

pytestmark = pytest.mark.slow


def test_an_unseen_sglang_release_extracts_with_the_note(inject_drift, capsys):
    """The installed code reporting 0.5.99: extracted with the 0.5.23-family adapter, every
    captured state named, the note in the text and the JSON."""
    inject_drift("tests.drift.serving_unseen_release")
    rc = cli.main(["check", "--contract", str(LOCK), "--no-verify"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert f"  NOTE      {NEWER}" in text and "serving   sglang 0.5.99 (installed, run here):" in text
    rc = cli.main(["check", "--contract", str(LOCK), "--no-verify", "--json"])  # the reply cache: no re-run
    out = json.loads(capsys.readouterr().out)
    serving = out["serving"]
    assert rc == 0 and out["verdict"] == "parity"
    assert serving["provenance"]["release_note"] == NEWER and serving["provenance"]["family"] == "0.5.23"
    assert None not in serving["fc_input"]  # every captured tensor still identified


def test_an_unseen_release_whose_code_path_moved_is_loud(inject_drift, capsys):
    inject_drift("tests.drift.serving_unseen_release_moved")
    rc = cli.main(["check", "--contract", str(LOCK), "--no-verify"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "", (out, err)
    assert err.count("\n") == 1, err
    assert err.startswith("parity: cannot extract under sglang 0.5.99: no parity release family can run "
                          "sglang 0.5.99"), err
    assert ("0.5.23-family adapter: looked for sglang.srt.model_executor.model_runner_components."
            "spec_aux_hidden_state.resolve_spec_aux_hidden_state_config") in err
    assert "0.5.14-family adapter: looked for" in err


# -- speculators: the real probe, in process, under an unseen release --------------------------------

PROBE_REQUEST = {"num_slots": 4, "hidden_size": 8, "seq_len": 6}


def test_an_unseen_speculators_release_extracts_with_the_note(monkeypatch):
    from parity.extract.trainers.speculators import probe

    monkeypatch.setattr(probe, "speculators_version", lambda: ("0.9.7", None))
    reply = probe.probe(PROBE_REQUEST)
    assert "error" not in reply, reply.get("error")
    assert reply["family"] == "0.9" and reply["release_note"] == (
        "speculators 0.9.7 is not a release parity has verified; it is in the 0.9 family's range (==0.9.*), "
        "whose adapter extracted it")
    monkeypatch.setattr(probe, "speculators_version", lambda: ("1.2.0", None))
    reply = probe.probe(PROBE_REQUEST)
    assert reply["release_note"] == ("speculators 1.2.0 is newer than any release parity has verified; "
                                     "extracted with the 0.9-family adapter")
    assert reply["paths"] and not reply["errors"]


def test_an_unseen_speculators_release_whose_code_path_moved_is_refused(monkeypatch):
    import hs_connectors.transfer

    from parity.extract.trainers.speculators import probe

    monkeypatch.setattr(probe, "speculators_version", lambda: ("1.2.0", None))
    monkeypatch.delattr(hs_connectors.transfer, "HiddenStatesBackend")
    reply = probe.probe(PROBE_REQUEST)
    assert not reply["paths"] and reply["cannot_extract"]["package"] == "speculators"
    assert reply["error"].startswith("cannot extract under speculators 1.2.0: no parity release family can run "
                                     "speculators 1.2.0")
    assert "0.9-family adapter: looked for hs_connectors.transfer.HiddenStatesBackend" in reply["error"]
    assert "0.7-family adapter: looked for speculators.train.data.standardize_data_v1" in reply["error"]


def test_missing_modules_are_only_packages_an_environment_could_add():
    """What an on-demand build adds: a package that is not installed. Not one that is installed but
    lacks a module (a newer transformers' module an older one has not), nor a stood-in one."""
    from parity.extract.families import missing_modules

    def fits(module):
        raise CodePathMoved("No module named 'transformers.masking_utils'; No module named "
                            "'vllm.model_executor.layers.quantization'; No module named 'parity_absent_pkg'")

    assert missing_modules(SGLANG, fits) == {"parity_absent_pkg"}
