"""No memo hides what the installed code does now: an edit of an installed trainer's or
engine's file (the way the case parity was born from was fixed: a patch in site-packages) is
followed by the next `parity contract`, while a repeat with nothing changed is still served
from the reply cache (parity.reply_cache).

Each case runs the real CLI in a copy of an environment (tests.helpers.shadow_env: links to
the original, the edited file a real copy), with a reply cache of its own (PARITY_HOME): a
first run stores the reply, a second is a hit, the edit, a third follows it. Before the
cache keyed entries by what the child read, the third was a hit with the old contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import MAIN_BYTECODE, LLAMA, ROOT, edit_in_shadow, shadow_env

pytestmark = pytest.mark.slow

SITE = "lib/python3.11/site-packages"
LLAMA_DRAFT = ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3"
DEEPSEEK_61 = ROOT / "fixtures" / "targets" / "deepseek-v3-61l" / "config.json"
MAIN = ROOT / ".venv"
VLLM = "0.34.0"

CASES = {
    # The issue's own reproduction: speculators' data path slices the other end of the dump.
    "speculators": dict(
        env=MAIN, file=f"{SITE}/speculators/train/data.py",
        old='loaded_hs["hidden_states"][:, :-1]', new='loaded_hs["hidden_states"][:, 1:]',
        args=["contract", "training", "--target-config", str(DEEPSEEK_61), "--dump-layout", "h0,h3,h31,h59"],
        before=["h0", "h3", "h31"], after=["h3", "h31", "h59"]),
    # SGLang's Llama capture forgets its +1 (set_eagle3_layers_to_capture).
    "sglang": dict(
        env=MAIN, file=f"{SITE}/sglang/srt/models/llama.py",
        old="self.model.layers_to_capture = [val + 1 for val in layer_ids]",
        new="self.model.layers_to_capture = [val for val in layer_ids]",
        args=["contract", "serving", "--target-config", str(LLAMA), "--draft", str(LLAMA_DRAFT)],
        before=["h2", "h16", "h29"], after=["h1", "h15", "h28"]),
    # vLLM's V2 runner hands the model each aux layer one later.
    "vllm": dict(
        env=None, file=f"{SITE}/vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py",
        old="eagle3_model.set_aux_hidden_state_layers(aux_layers)",
        new="eagle3_model.set_aux_hidden_state_layers(tuple(i + 1 for i in aux_layers))",
        args=["contract", "serving", "--engine", "vllm", "--vllm", VLLM, "--target-config", str(LLAMA),
              "--draft", str(LLAMA_DRAFT)],
        before=["h2", "h16", "h29"], after=["h3", "h17", "h30"]),
}


def _vllm_env() -> Path:
    from parity.envs import find_env

    return find_env("vllm", VLLM).path


@pytest.mark.parametrize("name", CASES)
def test_an_edit_of_installed_code_is_followed_and_a_repeat_is_a_hit(name, tmp_path):
    case = CASES[name]
    home = tmp_path / "home"
    home.mkdir()
    original = case["env"] or _vllm_env()
    where = home / (original.name if case["env"] is None else "shadow")
    shadow = shadow_env(original, where, {case["file"]: (case["old"], case["old"])})  # a real copy, unedited
    python = str(shadow / "bin" / "python") if case["env"] is not None else sys.executable
    env = {k: v for k, v in os.environ.items() if k not in ("PARITY_NO_CACHE", "PYTHONDONTWRITEBYTECODE")}
    env.update(PARITY_HOME=str(home), PYTHONPYCACHEPREFIX=str(shadow / ".pycache") if case["env"] is not None else MAIN_BYTECODE)

    def contract() -> dict:
        proc = subprocess.run([python, "-m", "parity", *case["args"], "--json"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout)

    first = contract()
    assert first["fc_input"] == case["before"]
    assert first["provenance"]["reply_cache"]["status"] == "stored"
    again = contract()
    assert again["fc_input"] == case["before"]
    assert again["provenance"]["reply_cache"] == {**first["provenance"]["reply_cache"], "status": "hit"}

    edit_in_shadow(shadow, case["file"], case["old"], case["new"])
    edited = contract()
    assert edited["fc_input"] == case["after"], f"the {name} edit was not followed: {edited['fc_input']}"
    assert edited["provenance"]["reply_cache"]["status"] == "stored"
    assert case["old"] in (original / case["file"]).read_text()  # the original environment is untouched


BUILD = """
import sys
from parity.fixtures import DraftRecipe, speculators_draft
print(speculators_draft(DraftRecipe(ids=(2, 4, 5), seed=7)))
"""


def test_the_fixture_cache_follows_an_edit_of_the_code_that_builds_it(tmp_path):
    """A built draft is reused while speculators, transformers, safetensors and torch are as they
    were, and built again after an edit of one of their files (it used to be keyed by the
    speculators version alone)."""
    file = f"{SITE}/speculators/models/eagle3/core.py"
    shadow = shadow_env(MAIN, tmp_path / "shadow", {file: ("import copy\n", "import copy\n")})
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PARITY_HOME=str(tmp_path / "home"), PYTHONPYCACHEPREFIX=str(shadow / ".pycache"))

    def build() -> Path:
        proc = subprocess.run([str(shadow / "bin" / "python"), "-c", BUILD], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return Path(proc.stdout.strip().splitlines()[-1])

    first = build()
    assert build() == first  # nothing changed: the cached copy
    edit_in_shadow(shadow, file, "import copy\n", "import copy  # patched in site-packages\n")
    rebuilt = build()
    assert rebuilt != first and rebuilt.is_dir() and first.is_dir()
    assert (rebuilt / "config.json").read_text() == (first / "config.json").read_text()  # a comment: same draft
