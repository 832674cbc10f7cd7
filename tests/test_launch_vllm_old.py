"""The launch contract under vLLM releases before 0.33 (0.8.5, 0.9, 0.11, 0.16, 0.17, 0.22, 0.28 families): each
resolves `vllm serve MODEL ARGS` with its own parser, EngineArgs and SpeculativeConfig, and
answers "EAGLE-3 or not" with its own code (docs/launch.md). The mutation case edits 0.22's
installed proposer in a linked copy of its environment."""

from __future__ import annotations

import json

import pytest

from .helpers import edit_in_shadow
from .test_launch import VLLM_EAGLE3, vllm_serving, vllm_shadow

pytestmark = [pytest.mark.slow, pytest.mark.exhaustive]  # one release's cells: ./dev test --all (docs/development.md)

PROPOSER = "EagleProposer._get_eagle3_use_aux_hidden_state_from_config"


RUNNER_0_11 = "SpeculativeConfig.use_eagle() and method 'eagle3' (as 0.11's GPUModelRunner.__init__ decides)"


@pytest.mark.parametrize("version, answer", [
    ("0.8.5", RUNNER_0_11), ("0.10.2", RUNNER_0_11), ("0.11.0", RUNNER_0_11),
    ("0.16.0", PROPOSER), ("0.17.0", PROPOSER), ("0.22.0", PROPOSER), ("0.28.0", PROPOSER)])
def test_an_older_vllm_resolves_the_serve_command_with_its_own_code(version, answer):
    """The draft's max model len is capped to the target's --max-model-len by the release's own
    SpeculativeConfig; the EAGLE-3 answer is the release's own function (0.11: its runner's rule)."""
    proc = vllm_serving(VLLM_EAGLE3 + " --max-model-len 4096", version)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]  # an older release's capture may differ: not judged here
    contract = json.loads(proc.stdout)
    assert contract["provenance"]["version"] == version
    launch = contract["launch"]
    assert launch["requested"] == {"method": "eagle3", "num_speculative_tokens": 3, "model_config.max_model_len": 4096}
    effective = launch["effective"]
    assert (effective["method"], effective["num_speculative_tokens"], effective["max_model_len"]) == ("eagle3", 3, 4096)
    assert effective["draft_model_config.hf_config.max_position_embeddings"] == 131072
    assert launch["overrides"] == [] and launch["algorithm_is_eagle3"] is True
    assert launch["algorithm_answer"] == answer


def test_an_older_vllm_refuses_a_misspelled_flag_in_its_words():
    proc = vllm_serving(VLLM_EAGLE3 + " --max-model-lenn 4096", "0.11.0")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("parity: --serve-args: vllm 0.11.0's argument parser refused them: "
                                   "unrecognized arguments: --max-model-lenn 4096")


def test_an_edit_of_an_older_releases_installed_answer_is_followed(tmp_path):
    """With 0.22's installed proposer edited (in a linked copy of its environment) to say eagle3
    heads use no aux states, the same command is not EAGLE-3: a drift naming the method."""
    file = "lib/python3.11/site-packages/vllm/v1/spec_decode/llm_base_proposer.py"
    old = "        # Assume that eagle3 heads use aux hidden states by default\n        use_aux_hidden_state = True\n"
    original, shadow, env = vllm_shadow("0.22.0", file, old, tmp_path)
    edit_in_shadow(shadow, file, old, old + "        return False  # the edit\n")
    after = vllm_serving(VLLM_EAGLE3, "0.22.0", env=env)
    assert after.returncode == 1, after.stderr[-2000:]
    launch = json.loads(after.stdout)["launch"]
    assert launch["algorithm_is_eagle3"] is False and launch["algorithm_answer"] == PROPOSER
    assert old + "        return False" not in (original / file).read_text()  # the original is untouched
