"""The capture under the serve command's own algorithm (issue 33, item 3): every SGLang family
runs the capture under the speculative algorithm the user's `--serve-args` resolve to, never
under parity's default (EAGLE3), and the algorithm must serve the draft's kind.

- `--speculative-algorithm EAGLE` with an EAGLE-3 draft: the release's own start-up reads no aux
  ids and captures nothing (the draft's fc is handed the final state): never a PARITY, on older
  families (0.5.14, 0.5.3.post1: the ServerArgs each family builds name the algorithm) as on 0.5.23;
  EAGLE3 with the same draft passes.
- DFLASH (0.5.23) with a DFlash draft passes (its resolution refuses the CPU device parity sets,
  so it is resolved as on a GPU, said in `replaced`); EAGLE3 on a DFlash draft and DFLASH on an
  EAGLE-3 draft are drifts on the algorithm, named with the engine's own answer.
- The mutation case edits the installed rule (EAGLE3 only captures) in a linked copy of the main
  environment: the capture reported under EAGLE follows it.
"""

from __future__ import annotations

import json

import pytest

from parity.contract import LaunchContract, Provenance, ServingContract, TargetModel
from parity.verdict import launch_differences

from .helpers import LLAMA, QWEN3, ROOT, built, run_parity, shadow_env, shadow_run_env

KIMI = ROOT / "fixtures" / "targets" / "kimi-k2.5" / "config.json"
KIMI_FIXED = ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3-fixed"
LLAMA_DRAFT = ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3"
DFLASH = ROOT / "fixtures" / "drafts" / "qwen3-8b-dflash"  # ids [1, 9, 17, 25, 33]
QWEN3_EAGLE3 = ROOT / "fixtures" / "drafts" / "qwen3-8b-eagle3"
DFLASH_TRAINED = "h2,h10,h18,h26,h34,h36"
EAGLE = "--speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
EAGLE3 = "--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
DFLASH_ARGS = "--speculative-algorithm DFLASH --speculative-num-draft-tokens 16"


def serving(target, draft, serve_args: str, *extra: str, python: str | None = None, env=None):
    proc = run_parity("contract", "serving", "--json", "--target-config", str(target), "--draft", str(draft),
                      "--serve-args", serve_args, *extra, **({"python": python} if python else {}), env=env)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


def launch(**fields) -> LaunchContract:
    return LaunchContract(argv=(), requested={}, effective={"speculative_algorithm": fields.pop("algorithm")},
                          **fields)


def contract(launch_contract: LaunchContract) -> ServingContract:
    return ServingContract(target_model=TargetModel(architecture="Qwen3ForCausalLM", num_hidden_layers=36),
                           fc_input=("h2",), provenance=Provenance(package="sglang", version="0.5.23", code_path="x"),
                           engine="sglang", requested_ids=None, ids_source="x", launch=launch_contract)


# -- fast: the verdict asks the answer for the draft's kind ------------------------------------------

def test_the_algorithm_is_judged_against_the_drafts_kind():
    eagle3_draft = launch(algorithm="DFLASH", algorithm_is_eagle3=False)
    assert eagle3_draft.serves_the_draft is False
    [diff] = launch_differences(contract(eagle3_draft))
    assert (diff.where, diff.training, diff.serving) == ("speculative_algorithm", "EAGLE3", "DFLASH")
    dflash_draft = launch(algorithm="DFLASH", algorithm_is_eagle3=False, draft_kind="dflash", algorithm_is_dflash=True)
    assert dflash_draft.serves_the_draft is True and launch_differences(contract(dflash_draft)) == []
    wrong = launch(algorithm="EAGLE3", algorithm_is_eagle3=True, draft_kind="dflash", algorithm_is_dflash=False)
    [diff] = launch_differences(contract(wrong))
    assert (diff.training, diff.serving) == ("DFLASH", "EAGLE3") and "is not DFlash" in diff.message
    # an EAGLE-3 launch contract serialises as before (old locks read unchanged)
    assert "draft_kind" not in json.loads(launch(algorithm="EAGLE3", algorithm_is_eagle3=True).model_dump_json())


# -- slow: each release's own capture under the resolved algorithm --------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.5.14", "0.5.3.post1", "0.5.23"])
def test_eagle_with_an_eagle3_draft_captures_what_the_release_does_under_it(version):
    rc, got = serving(LLAMA, LLAMA_DRAFT, EAGLE, "--sglang", version)
    assert rc == 1
    assert got["launch"]["algorithm_is_eagle3"] is False
    assert got["capture_ids"] == [] and got["fc_input"] == ["final"]  # nothing captured: the final state only
    assert got["ids_source"] == (f"none: sglang {version}'s start-up under speculative_algorithm EAGLE reads no aux "
                                 "ids and captures no aux hidden states")
    assert not [f for f in got["findings"] if f["kind"] == "default_layers_fallback"]


@pytest.mark.slow
@pytest.mark.parametrize("serve_args, verdict", [(EAGLE, "DRIFT"), (EAGLE3 + " --speculative-num-steps 15 "
                                                                    "--speculative-num-draft-tokens 16", "PARITY")])
def test_an_older_release_is_never_a_parity_under_eagle_and_passes_eagle3(serve_args, verdict):
    proc = run_parity("check", "--target-config", str(KIMI), "--draft", str(KIMI_FIXED), "--dump-layout",
                      "h0,h3,h31,h59", "--sglang", "0.5.14", "--serve-args", serve_args)
    assert proc.stdout.startswith(f"parity check: {verdict}"), proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.returncode == (0 if verdict == "PARITY" else 1)
    if verdict == "DRIFT":
        assert "MISMATCH: not EAGLE-3: the aux hidden states are never captured" in proc.stdout
        assert "nothing (not captured)" in proc.stdout  # the capture under EAGLE, not under EAGLE3
        assert "FIX: write" not in proc.stdout  # no ids written in the config change what EAGLE captures


@pytest.mark.slow
def test_the_capture_under_eagle_follows_an_edit_of_the_installed_rule(tmp_path):
    """With 0.5.23's start-up edited (in a linked copy of the main environment) to capture the
    aux states for every EAGLE algorithm, EAGLE captures the draft's ids: the capture reported is
    the engine's under the resolved algorithm, not a rule of parity's."""
    file = ("lib/python3.11/site-packages/sglang/srt/model_executor/model_runner_components/"
            "spec_aux_hidden_state.py")
    old = "    if spec_algorithm.is_eagle3():\n        config.eagle_use_aux_hidden_state = True"
    shadow = shadow_env(ROOT / ".venv", tmp_path / "shadow", {file: (old, old.replace("is_eagle3()", "is_eagle()"))})
    _, got = serving(LLAMA, LLAMA_DRAFT, EAGLE, python=str(shadow / "bin" / "python"),
                     env=shadow_run_env(shadow, tmp_path / "home"))
    assert got["capture_ids"] == [2, 16, 29]  # the draft's ids [1, 15, 28], captured under EAGLE now
    assert got["fc_input"] == ["h2", "h16", "h29"]


@pytest.mark.slow
def test_dflash_selected_by_the_serve_arguments_passes():
    proc = run_parity("check", "--json", "--target-config", str(QWEN3), "--draft", str(DFLASH), "--dump-layout",
                      DFLASH_TRAINED, "--serve-args", DFLASH_ARGS)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    launch_contract = result["serving"]["launch"]
    assert launch_contract["effective"]["speculative_algorithm"] == "DFLASH"
    assert launch_contract["draft_kind"] == "dflash" and launch_contract["algorithm_is_dflash"] is True
    assert launch_contract["replaced"]["device"].startswith("cuda for the resolution")  # its CPU refusal, said
    assert result["serving"]["fc_input"] == ["h2", "h10", "h18", "h26", "h34"]


@pytest.mark.slow
@pytest.mark.parametrize("version, answer", [("0.5.23", "is_dflash_family()"), ("0.5.14", "is_dflash()")])
def test_eagle3_on_a_dflash_draft_is_a_drift_on_the_algorithm(version, answer):
    """SGLang serves it as an EAGLE-3 draft: its default EAGLE-3 layers are captured, and its EAGLE-3
    draft class cannot be built from the DFlash checkpoint. The verdict names the release's own
    method, read from its SpeculativeAlgorithm: 0.5.12-0.5.15 have `is_dflash()` alone."""
    if not built("sglang", version):
        pytest.skip(f"sglang {version} environment not built")
    proc = run_parity("check", "--json", "--target-config", str(QWEN3), "--draft", str(DFLASH), "--dump-layout",
                      DFLASH_TRAINED, "--serve-args", EAGLE3, "--sglang", version)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    [launch_diff] = [d for d in result["differences"] if d["kind"] == "launch"]
    assert (launch_diff["where"], launch_diff["training"], launch_diff["serving"]) == (
        "speculative_algorithm", "DFLASH", "EAGLE3")
    assert f"EAGLE3 is not DFlash in sglang {version} (its {answer} is False)" in launch_diff["message"]
    assert result["serving"]["launch"]["algorithm_answer"] == f"its {answer}"


@pytest.mark.slow
def test_dflash_on_an_eagle3_draft_is_a_drift_on_the_algorithm():
    rc, got = serving(QWEN3, QWEN3_EAGLE3, DFLASH_ARGS)
    assert rc == 1
    assert got["launch"]["algorithm_is_eagle3"] is False and "draft_kind" not in got["launch"]
    assert got["draft_kind"] == "dflash"  # served as SGLang serves it: under DFLASH
    assert any(f["kind"] == "draft_unloadable" and "DFlash draft class" in f["message"] for f in got["findings"])


@pytest.mark.slow
@pytest.mark.parametrize("method, said", [("draft_model", True), ("eagle3", False)])
def test_vllm_says_when_the_capture_is_not_under_the_resolved_method(method, said):
    """vLLM runs only the eagle3 and dflash set-ups: under another resolved method the slot table
    shown is parity's eagle3 capture, and the contract says so (a typed finding, parity's limit)."""
    spec = json.dumps({"method": method, "model": "my/draft", "num_speculative_tokens": 3})
    rc, got = serving(LLAMA, LLAMA_DRAFT, f"--speculative-config '{spec}'", "--engine", "vllm", "--vllm", "0.34.0")
    kinds = [f["kind"] for f in got["findings"]]
    assert ("capture_not_launched" in kinds) is said
    assert rc == (1 if said else 0)
