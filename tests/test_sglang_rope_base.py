"""SGLang 0.5.6.post1 serves another model than the checkpoint (issue 37, item 4): it pins
transformers 5.0.0rc0, whose config objects keep the rope theta only in `rope_parameters`, and its
model code reads `getattr(config, "rope_theta", 10000)`, so every target's rotary embeddings get
base 10000 (Llama-3.1's is 500000). The states it captures are then none of the model's, on a GPU
as here: the engine's own (`target_config_misread`, said before the unidentified states), not a
state parity cannot name (rope_base.py).

The release's read edited to take the config's theta (a shadow environment), the same case names
every state (h2, h16, h29) and says nothing of it: the misread is the whole difference. With the
check removed (a drift module) the cell reads as unidentified states only, as it did.
"""

from __future__ import annotations

import json

import pytest

from .helpers import LLAMA, built, drift_overrides, run_parity, sglang_draft, shadow_release

pytestmark = pytest.mark.slow

RELEASE = "0.5.6.post1"
SITE = "lib/python3.11/site-packages"
READ = 'rope_theta = getattr(config, "rope_theta", 10000)'


@pytest.fixture(autouse=True)
def _need():
    if not built("sglang", RELEASE):
        pytest.skip(f"sglang {RELEASE}'s environment is not built (parity.ondemand.ensure_release('sglang', "
                    f"'{RELEASE}'))")


def _contract(tmp_path, **kw) -> tuple[int, dict]:
    draft = sglang_draft(tmp_path / "draft", ids=[1, 15, 28])
    proc = run_parity("contract", "serving", "--target-config", str(LLAMA), "--draft", str(draft),
                      "--sglang", RELEASE, "--json", **kw)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _errors(contract: dict) -> list[tuple[str, str]]:
    return [(f["kind"], f["message"]) for f in contract["findings"] if f["severity"] == "error"]


def test_the_release_serves_llama_with_rotary_base_10000(tmp_path):
    code, contract = _contract(tmp_path)
    assert code == 1
    errors = _errors(contract)
    assert errors[0] == ("target_config_misread", (
        f"sglang {RELEASE} builds LlamaForCausalLM's rotary embeddings (Llama3RotaryEmbedding with base 10000), "
        "while the target's config gives rope theta 500000 (config.rope_parameters['rope_theta'] under transformers "
        "5.0.0rc0, which it runs; the config object has no rope_theta attribute): the engine computes another model "
        "than the checkpoint, on any hardware, so the states it captures are none of the model's"))
    assert {kind for kind, _ in errors[1:]} == {"unidentified_state"}
    assert contract["fc_input"] == [None, None, None]


def test_the_read_fixed_in_the_release_names_every_state(tmp_path):
    """The engine's read edited to take the config's theta: the states are the model's."""
    file = f"{SITE}/sglang/srt/models/llama.py"
    fixed = 'rope_theta = getattr(config, "rope_theta", config.rope_parameters["rope_theta"])'
    shadow, original, env = shadow_release(tmp_path, "sglang", RELEASE, {file: (READ, fixed)})
    code, contract = _contract(tmp_path, env=env)
    assert code == 0, _errors(contract)
    assert contract["fc_input"] == ["h2", "h16", "h29"]
    assert _errors(contract) == []
    assert READ in (original / file).read_text()  # the original is untouched


def test_without_the_check_the_states_are_only_unnamed(tmp_path):
    code, contract = _contract(tmp_path, overrides=drift_overrides("tests.drift.serving_rope_base_unchecked"))
    assert code == 1
    assert {kind for kind, _ in _errors(contract)} == {"unidentified_state"}
