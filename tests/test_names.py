"""Paths keep their names (issue 48): the engine is shown parity's files under the names the user
gave them, because engines read names, and the reply cache keys on those names.

vLLM up to 0.33 takes the speculative method from the draft path's name when the serve command
gives none ("eagle3" in it: EAGLE-3; "eagle-": EAGLE, which refuses an EAGLE-3 draft). Shown
parity's own paths, vLLM 0.33 detected no method and the check said DRIFT where the real server
serves the draft as trained; two byte-identical drafts under different names shared one cached
reply.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from parity.extract import named

from .helpers import LLAMA, ROOT, built, run_parity

DRAFT = ROOT / "fixtures" / "drafts" / "specforge-llama3-8b-eagle3"  # trained on h2, h16, h29 (SpecForge defaults)


# -- the layout (fast) ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, tail", [("org/Llama-3.1-8B-eagle3", "org/Llama-3.1-8B-eagle3"),
                                        ("/srv/models/d", "srv/models/d"), ("../../drafts/x", "drafts/x"),
                                        ("./x/../y", "x/y"), ("", ""), ("/", "")])
def test_the_tail_is_the_users_path_below_parity_s_folder(name, tail):
    assert named.tail(name) == tail


def test_a_folder_is_laid_out_under_the_users_name_with_links_to_its_files(tmp_path, monkeypatch):
    monkeypatch.setattr(named, "_laid_out", {})
    monkeypatch.setattr(named, "_names", {})
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    real = tmp_path / "real draft"
    (real / "sub").mkdir(parents=True)
    (real / "config.json").write_text("{}")
    (real / "sub" / "w.bin").write_bytes(b"1")
    shown = named.named_path(str(real), "org/Llama-3.1-8B-eagle3", "draft")
    assert shown.endswith(os.path.join("org", "Llama-3.1-8B-eagle3")) and "eagle" not in shown[:-len("org/Llama-3.1-8B-eagle3")]
    assert not os.path.islink(shown) and os.path.realpath(shown) == shown  # a real folder: realpath keeps the name
    assert os.path.realpath(os.path.join(shown, "config.json")) == str(real / "config.json")
    assert os.path.realpath(os.path.join(shown, "sub", "w.bin")) == str(real / "sub" / "w.bin")
    assert named.named_path(str(real), "org/Llama-3.1-8B-eagle3", "draft") == shown  # asked again: the same
    other = tmp_path / "other"
    other.mkdir()
    assert named.named_path(str(other), "org/Llama-3.1-8B-eagle3", "draft") != shown  # another folder, same name
    assert named.named_path(str(real), "org/Llama-3.1-8B-eagle3", "target") != shown  # a target never meets a draft
    assert named.name_of(shown) == "org/Llama-3.1-8B-eagle3"
    assert named.unnamed(json.dumps({"error": f"cannot read {shown}/config.json"})) == \
        json.dumps({"error": f"cannot read {real}/config.json"})  # a reply names the user's files
    assert named.named_path(str(real), None, "draft") == str(real)


def test_a_name_decides_a_field_only_where_a_neutral_name_resolves_it_otherwise():
    named_launch = {"effective": {"method": "eagle3", "num_speculative_tokens": 3}}
    assert named.decided_by_names(named_launch, {"effective": {"method": "eagle3", "num_speculative_tokens": 3}}) == []
    assert named.decided_by_names(named_launch, {"effective": {"method": "draft_model", "num_speculative_tokens": 3}}) \
        == [{"field": "method", "named": "eagle3", "neutral": "draft_model"}]
    refused = named.decided_by_names(named_launch, ValueError("no method"))
    assert refused[0]["neutral_refused"] == "ValueError: no method"


# -- vLLM 0.33 reads the draft's name (slow) -------------------------------------------------------

def _vllm_033() -> None:
    if not built("vllm", "0.33.0"):
        pytest.skip("vllm 0.33.0's environment is not built (./dev setup vllm-0.33.0)")


def _spec(**config) -> str:
    return f"--speculative-config '{json.dumps({'num_speculative_tokens': 3, **config})}'"


@pytest.mark.slow
def test_a_method_vllm_takes_from_the_serve_commands_draft_name_passes_and_is_said():
    """The issue's case 2: `"model": "org/Llama-3.1-8B-eagle3"`, no method: vLLM 0.33 serves it as
    EAGLE-3 (from the name), so PARITY, with a note saying the name decided the method; an
    `eagle-` name is EAGLE, which vLLM refuses for an EAGLE-3 draft: not a pass, in vLLM's words.
    On cca83e0 the first was DRIFT (parity showed vLLM its own path: no method detected)."""
    _vllm_033()
    common = ["--engine", "vllm", "--vllm", "0.33.0", "--target-config", str(LLAMA), "--draft", str(DRAFT),
              "--trainer", "specforge", "--specforge", "0.2.0", "--no-verify"]
    ok = run_parity("check", *common, "--serve-args", _spec(model="org/Llama-3.1-8B-eagle3"))
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-2000:]
    assert "PARITY" in ok.stdout
    assert ("NOTE: vllm 0.33.0 resolves method \"eagle3\" from the names of the paths" in ok.stdout
            and "'org/Llama-3.1-8B-eagle3'" in ok.stdout and "it resolves method \"draft_model\"" in ok.stdout), ok.stdout
    eagle = run_parity("check", *common, "--serve-args", _spec(model="org/EAGLE-LLaMA3.1-8B"))
    assert eagle.returncode == 2 and "refused them" in eagle.stderr and "not supported" in eagle.stderr, eagle.stderr
    assert "verified: with \"method\": \"eagle3\"" in eagle.stderr  # and the fix, as vLLM resolves it


@pytest.mark.slow
def test_two_drafts_alike_but_for_their_names_get_their_own_answers_cache_on(tmp_path):
    """The issue's case 3: byte-identical drafts named `...-EAGLE-v3` and `...-eagle3-draft`, no
    method and no model in the serve command: vLLM 0.33 reads each folder's name (EAGLE, refused;
    EAGLE-3), with the reply cache on. On cca83e0 the second got the first's cached refusal."""
    _vllm_033()
    env = {k: v for k, v in os.environ.items() if k != "PARITY_NO_CACHE"}
    answers = {}
    for name in ("Llama-3.1-8B-EAGLE-v3", "Llama-3.1-8B-eagle3-draft"):
        folder = tmp_path / name
        shutil.copytree(DRAFT, folder)
        answers[name] = run_parity("contract", "serving", "--engine", "vllm", "--vllm", "0.33.0",
                                   "--target-config", str(LLAMA), "--draft", str(folder),
                                   "--serve-args", _spec(), env=env)
    eagle, eagle3 = answers.values()
    assert eagle.returncode == 2 and "not supported" in eagle.stderr, eagle.stderr
    assert eagle3.returncode == 0, eagle3.stdout[-2000:] + eagle3.stderr[-2000:]
    assert "method" in eagle3.stdout and "eagle3" in eagle3.stdout
