"""The parallel layout of the serve command (docs/launch.md, "The parallel layout"): resolved by the
engine's own parser and resolution, and the capture run under it, one CPU process per rank, with
the engine's own partition, parallel state, rank guard and stage-to-stage transfer.

The issue's case (issue 51): the bundled Llama-3.1-8B draft (ids [1, 15, 28]) on SGLang 0.5.23
with `--pp-size 2`. Its `LlamaForCausalLM.set_eagle3_layers_to_capture` returns at once on a
rank that is not the last pipeline stage, and nothing carries an earlier stage's states to the
last one, so h2 (layer 2 sits on stage 0 of layers 0-15) never reaches the draft: a drift naming
the stage and the slot. With `--tp-size 2` every rank captures and the draft is fed as trained.
An edit of the installed rank guard (in a linked copy of the environment) changes the verdict:
the capture is run, not read. A layout parity does not run is its limit, exit 2, never a pass.
Each case runs the real CLI on the bundled files."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from parity.report.check import render_check
from parity.verdict import CheckResult

from .helpers import MAIN_BYTECODE, LLAMA, ROOT, shadow_env, shadow_run_env
from .helpers import run_parity as parity

pytestmark = pytest.mark.slow

LLAMA_DRAFT = ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3"
SPEC = ("--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 4")
GUARD = "lib/python3.11/site-packages/sglang/srt/models/llama.py"
GUARDED = ("    def set_eagle3_layers_to_capture(self, layer_ids: Optional[List[int]] = None):\n"
           "        if not self.pp_group.is_last_rank:\n            return\n")


def llama_check(serve_args: str) -> subprocess.CompletedProcess:
    return parity("check", "--target-config", str(LLAMA), "--draft", str(LLAMA_DRAFT), "--dump-layout",
                  "h2,h16,h29,h32", "--serve-args", serve_args, "--json")


def llama_serving(serve_args: str, python: str = sys.executable, env=None) -> subprocess.CompletedProcess:
    return parity("contract", "serving", "--target-config", str(LLAMA), "--draft", str(LLAMA_DRAFT),
                  "--serve-args", serve_args, "--json", python=python, env=env)


def test_two_pipeline_stages_lose_the_first_stages_slot_named():
    proc = llama_check(f"{SPEC} --pp-size 2")
    assert proc.returncode == 1, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["verdict"] == "drift"
    serving = result["serving"]
    assert serving["fc_input"] == ["h16", "h29", None]  # what the last stage hands the draft
    layout = serving["launch"]["layout"]
    assert (layout["tp"], layout["pp"], layout["fields"]["pp_size"]) == (1, 2, 2)
    assert layout["run"]["ranks"] == 2 and layout["run"]["stages"] == [
        {"stage": 0, "layers": [0, 16], "capture": []},  # the rank guard returned: nothing set
        {"stage": 1, "layers": [16, 32], "capture": [2, 16, 29]}]
    [lost] = [f for f in serving["findings"] if f["kind"] == "stage_not_captured"]
    assert lost["slot"] == 0 and "slot 0 (h2, captured at layer index 2) is on pipeline stage 0 of 2 " \
        "(layers 0-15)" in lost["message"] and "captures nothing there" in lost["message"]
    assert "under the serve command's parallel layout (pp 2)" in result["unfixable"]  # searched under it
    text = render_check(CheckResult.model_validate(result))
    assert "parallel layout, as sglang 0.5.23 resolves it: pp 2 (pp_size 2); the capture ran under it on 2 CPU " \
        "processes" in text
    assert "    0      0-15    nothing" in text and "    1      16-31   2, 16, 29" in text
    assert "- serving: slot 0 (h2, captured at layer index 2) is on pipeline stage 0 of 2" in text


def test_two_tensor_ranks_feed_the_draft_as_trained():
    proc = llama_check(f"{SPEC} --tp-size 2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    serving = result["serving"]
    assert result["verdict"] == "parity" and serving["fc_input"] == ["h2", "h16", "h29"]
    run = serving["launch"]["layout"]["run"]
    assert (run["ranks"], run["tp"], run["pp"]) == (2, 2, 1)
    assert run["stages"] == [{"stage": 0, "layers": [0, 32], "capture": [2, 16, 29]}]


def test_an_edit_of_the_installed_rank_guard_changes_the_verdict(tmp_path):
    """With the guard gone (in a linked copy of the main environment), stage 0 sets its capture
    too, and SGLang 0.5.23's own forward then fails there: the model's forward unpacks its output
    as (states, aux states), which a non-last stage's PPProxyTensors is not. The verdict follows
    the code that runs: UNSERVABLE, naming the stage, where the guarded release drifts."""
    shadow = shadow_env(ROOT / ".venv", tmp_path / "shadow",
                        {GUARD: (GUARDED, GUARDED.replace("        if not self.pp_group.is_last_rank:\n"
                                                          "            return\n", ""))})
    proc = llama_serving(f"{SPEC} --pp-size 2", python=str(shadow / "bin" / "python"),
                         env=shadow_run_env(shadow, tmp_path / "home"))
    assert proc.returncode == 1, proc.stderr[-2000:]
    contract = json.loads(proc.stdout)
    [error] = [f for f in contract["findings"] if f["kind"] == "engine_error"]
    assert "pipeline stage 0 of 2 (layers 0-15, tensor rank 0): sglang 0.5.23's forward raised ValueError" \
        in error["message"]
    assert contract["launch"]["layout"]["run"]["stages"][0]["capture"] == [2, 16, 29]  # the edit: set on stage 0
    assert GUARDED in (ROOT / ".venv" / GUARD).read_text()  # the original environment is untouched


def test_a_layout_parity_does_not_run_is_its_limit():
    proc = llama_serving(f"{SPEC} --tp-size 2 --enable-dp-attention --dp-size 2")
    assert proc.returncode == 2, proc.stdout[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "parity: parity's CPU harness cannot run sglang 0.5.23 here: under the serve command's parallel layout "
        "(tp_size 2, attn_dp_size 2), parity's multi-process capture does not run data-parallel attention "
        "(attn_dp_size 2), so the states the draft is fed under this layout are not known. This is a limit of "
        "parity's CPU run, not sglang refusing the draft: no verdict is given")


# -- vLLM 0.34: V2 carries aux states over pipeline stages for a model that declares it --------------

DEEPSEEK_61 = ROOT / "fixtures" / "targets" / "deepseek-v3-61l" / "config.json"
SPECFORGE_DEEPSEEK = ROOT / "fixtures" / "drafts" / "specforge-deepseek-v3-eagle3"
VLLM_SPEC = "--speculative-config.method eagle3 --speculative-config.num_speculative_tokens 3"


def test_vllm_carries_llamas_aux_states_over_pipeline_stages():
    """Llama declares supports_aux_hidden_states_over_pp: stage 0 captures h2 and h16 and passes them
    on in its intermediate tensors, the last stage hands the draft all three."""
    proc = parity("check", "--engine", "vllm", "--vllm", "0.34.0", "--target-config", str(LLAMA), "--draft",
                  str(LLAMA_DRAFT), "--dump-layout", "h2,h16,h29,h32", "--serve-args",
                  f"{VLLM_SPEC} --pipeline-parallel-size 2", "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    serving = result["serving"]
    assert result["verdict"] == "parity" and serving["fc_input"] == ["h2", "h16", "h29"]
    layout = serving["launch"]["layout"]
    assert layout["fields"]["parallel_config.pipeline_parallel_size"] == 2
    assert layout["run"]["stages"] == [{"stage": 0, "layers": [0, 16], "capture": [2, 16, 29]},
                                       {"stage": 1, "layers": [16, 32], "capture": [2, 16, 29]}]


def test_vllm_refuses_deepseek_v3_under_pipeline_parallelism_in_its_own_words():
    """DeepSeek-V3 does not declare it: V2's start-up (set_eagle3_aux_hidden_state_layers with
    use_pp, run on each rank) refuses, verify_supports_aux_hidden_states_over_pp's ValueError."""
    proc = parity("contract", "serving", "--engine", "vllm", "--vllm", "0.34.0", "--target-config", str(DEEPSEEK_61),
                  "--draft", str(SPECFORGE_DEEPSEEK), "--serve-args", f"{VLLM_SPEC} --pipeline-parallel-size 2",
                  "--json")
    assert proc.returncode == 1, proc.stderr[-2000:]
    contract = json.loads(proc.stdout)
    [error] = [f for f in contract["findings"] if f["kind"] == "engine_error"]
    assert "raised ValueError: DeepseekV3ForCausalLM does not support eagle3 with pipeline parallelism" \
        in error["message"] and "the V2 runner's start-up, so no server starts" in error["message"]
    assert contract["fc_input"] == [None]


def test_vllms_answer_follows_the_installed_models_declaration(tmp_path):
    """The answer is vLLM's, read off the installed model class: with Llama's
    `supports_aux_hidden_states_over_pp` edited to False (in a linked copy of the vLLM 0.34
    environment), V2's start-up refuses Llama under pipeline parallelism as it refuses DeepSeek-V3."""
    from parity.envs import find_env

    file = "lib/python3.11/site-packages/vllm/model_executor/models/llama.py"
    declared = "    supports_aux_hidden_states_over_pp = True\n"
    home = tmp_path / "home"
    home.mkdir()
    original = find_env("vllm", "0.34.0").path
    shadow = shadow_env(original, home / original.name, {file: (declared, declared.replace("True", "False"))})
    env = shadow_run_env(shadow, home, bytecode=MAIN_BYTECODE)
    env.pop("PARITY_NO_CACHE", None)
    proc = parity("contract", "serving", "--engine", "vllm", "--vllm", "0.34.0", "--target-config", str(LLAMA),
                  "--draft", str(LLAMA_DRAFT), "--serve-args", f"{VLLM_SPEC} --pipeline-parallel-size 2", "--json",
                  env=env)
    assert proc.returncode == 1, proc.stderr[-2000:]
    [error] = [f for f in json.loads(proc.stdout)["findings"] if f["kind"] == "engine_error"]
    assert "raised ValueError: LlamaForCausalLM does not support eagle3 with pipeline parallelism" in error["message"]
    assert declared in (original / file).read_text()  # the original environment is untouched
