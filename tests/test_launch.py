"""The launch contract: the user's serve arguments as the installed SGLang parses and resolves
them (parity.extract.engines.sglang.launch), and the verdict on a value it silently changes.

The seed is the first breakage of the case parity was born from: `--speculative-num-steps 1
--speculative-eagle-topk 1 --speculative-num-draft-tokens 16` runs 2 draft tokens, with only a
log line. Every case runs the real CLI on the bundled files; the mutation case runs it in a
linked copy of the main environment whose resolution code is edited."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .helpers import LLAMA, ROOT, edit_in_shadow, shadow_env

KIMI = ROOT / "fixtures" / "targets" / "kimi-k2.5" / "config.json"
KIMI_FIXED = ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3-fixed"
LLAMA_DRAFT = ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3"
SEED = ("--model-path moonshotai/Kimi-K2.5 --speculative-algorithm EAGLE3 --speculative-draft-model-path my/draft "
        "--speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 16 --trust-remote-code")
EAGLE3 = "--speculative-algorithm EAGLE3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 16"


def parity(*args: str, python: str = sys.executable, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", "parity", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=900, env=env)


def kimi_check(serve_args: str, *extra: str) -> subprocess.CompletedProcess:
    return parity("check", "--target-config", str(KIMI), "--draft", str(KIMI_FIXED),
                  "--dump-layout", "h0,h3,h31,h59", "--serve-args", serve_args, *extra)


def llama_serving(serve_args: str, *extra: str, python: str = sys.executable, env=None) -> subprocess.CompletedProcess:
    return parity("contract", "serving", "--target-config", str(LLAMA), "--draft", str(LLAMA_DRAFT),
                  "--serve-args", serve_args, "--json", *extra, python=python, env=env)


@pytest.mark.slow
def test_the_seed_command_is_a_drift_naming_the_field_with_a_verified_fix():
    proc = kimi_check(SEED, "--json")
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert result["verdict"] == "drift"
    assert [(d["kind"], d["where"], d["training"], d["serving"]) for d in result["differences"]] == [
        ("launch", "speculative_num_draft_tokens", 16, 2)]
    launch = result["serving"]["launch"]
    assert launch["overrides"] == [{"field": "speculative_num_draft_tokens", "requested": 16, "effective": 2,
                                    "by": "_handle_eagle_family"}]
    assert launch["replaced"].keys() == {"model_path", "speculative_draft_model_path", "trust_remote_code"}
    [fix] = launch["fixes"]
    assert fix["argv"][-2:] == ["--speculative-num-steps", "15"]
    assert fix["effective"]["speculative_num_draft_tokens"] == 16  # resolved again by the engine
    assert launch["effective"]["max_running_requests"] == 48  # a default the user did not give: reported only
    text = kimi_check(SEED)
    assert text.returncode == 1
    assert "speculative_num_draft_tokens  16        2         _handle_eagle_family  MISMATCH" in text.stdout
    assert "FIX (launch): serve with" in text.stdout and "--speculative-num-steps 15" in text.stdout


@pytest.mark.slow
def test_steps_that_give_the_tokens_asked_pass():
    proc = kimi_check(EAGLE3 + " --speculative-num-steps 15")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("parity check: PARITY")


@pytest.mark.slow
def test_eagle_with_an_eagle3_draft_is_never_a_pass():
    proc = kimi_check("--speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1 "
                      "--speculative-num-draft-tokens 4")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "MISMATCH: not EAGLE-3: the aux hidden states are never captured" in proc.stdout


@pytest.mark.slow
def test_a_misspelled_flag_is_refused_in_the_engines_words():
    proc = llama_serving("--speculative-algorithm EAGLE3 --speculative-num-stepz 3")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("parity: --serve-args: sglang 0.5.23's argument parser refused them: "
                                   "unrecognized arguments: --speculative-num-stepz 3")


@pytest.mark.slow
def test_sglang_0_5_14_resolves_with_its_own_code():
    """0.5.14 has no resolve_once: its __post_init__ assigns the fields, recorded with the function."""
    proc = llama_serving("--speculative-algorithm EAGLE3 --speculative-num-steps 1 --speculative-eagle-topk 1 "
                         "--speculative-num-draft-tokens 16", "--sglang", "0.5.14")
    assert proc.returncode == 1, proc.stderr
    contract = json.loads(proc.stdout)
    assert contract["provenance"]["version"] == "0.5.14"
    assert contract["launch"]["overrides"] == [{"field": "speculative_num_draft_tokens", "requested": 16,
                                                "effective": 2, "by": "_handle_eagle_family"}]


@pytest.mark.slow
def test_an_edit_of_the_installed_resolution_code_is_followed(tmp_path):
    """The rule is read from the engine, not typed: with SGLang's adjustment edited out of the
    installed speculative_hook.py (in a linked copy of the environment), 16 tokens stay 16."""
    file = "lib/python3.11/site-packages/sglang/srt/arg_groups/speculative_hook.py"
    old = "        cfg.speculative_eagle_topk == 1\n        and cfg.speculative_num_draft_tokens"
    shadow = shadow_env(ROOT / ".venv", tmp_path / "shadow", {file: (old, old)})
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PARITY_HOME=str(tmp_path / "home"), PYTHONPYCACHEPREFIX=str(tmp_path / "pycache"))
    seed = "--speculative-algorithm EAGLE3 --speculative-num-steps 1 --speculative-eagle-topk 1 " \
           "--speculative-num-draft-tokens 16"
    python = str(shadow / "bin" / "python")
    before = llama_serving(seed, python=python, env=env)
    assert before.returncode == 1 and json.loads(before.stdout)["launch"]["effective"]["speculative_num_draft_tokens"] == 2
    edit_in_shadow(shadow, file, old, "        False\n        and cfg.speculative_num_draft_tokens")
    after = llama_serving(seed, python=python, env=env)
    assert after.returncode == 0, after.stderr
    launch = json.loads(after.stdout)["launch"]
    assert launch["effective"]["speculative_num_draft_tokens"] == 16 and launch["overrides"] == []


def test_vllm_says_the_launch_contract_is_not_run_for_it_yet():
    proc = parity("contract", "serving", "--engine", "vllm", "--target-config", str(LLAMA), "--draft",
                  str(LLAMA_DRAFT), "--serve-args", "--speculative-config '{\"method\": \"eagle3\"}'")
    assert proc.returncode == 2
    assert "vLLM's (EngineArgs, SpeculativeConfig) is not run yet" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("given, says", [
    ("--speculative-num-steps '1", "No closing quotation"),
    ("   # only a comment", "no arguments"),
    ("@/nonexistent/serve-args.txt", "cannot be read"),
])
def test_serve_args_that_cannot_be_read_are_refused_before_any_extraction(given, says):
    from parity.inputs import InputError, parse_serve_args

    with pytest.raises(InputError, match=says):
        parse_serve_args(given)


def test_serve_args_from_a_file_keep_their_quoting(tmp_path):
    from parity.inputs import parse_serve_args

    file = tmp_path / "serve.args"
    file.write_text("# the production command\n--speculative-algorithm EAGLE3\n--json-model-override-args '{\"a\": 1}'\n")
    assert parse_serve_args(f"@{file}") == ("--speculative-algorithm", "EAGLE3", "--json-model-override-args",
                                            '{"a": 1}')


@pytest.mark.slow
def test_a_lock_holds_the_launch_and_pytest_fails_naming_the_field_when_a_bump_changes_the_resolution(tmp_path):
    """`parity lock --serve-args` stores the arguments and the launch contract; `pytest -m parity`
    on the lock resolves them again with the installed engine. The "bump" is the installed
    speculative_hook.py edited (in a linked copy of the environment) to derive steps + 2 tokens."""
    good = "--speculative-algorithm EAGLE3 --speculative-num-steps 15 --speculative-eagle-topk 1 " \
           "--speculative-num-draft-tokens 16"
    contracts = tmp_path / "contracts"
    lock = contracts / "llama.json"
    proc = parity("lock", str(lock), "--target-config", str(LLAMA), "--draft", str(LLAMA_DRAFT),
                  "--dump-layout", "h2,h16,h29,h32", "--serve-args", good)
    assert proc.returncode == 0, proc.stderr
    stored = json.loads(lock.read_text())
    assert stored["serve_args"] == good.split()
    assert stored["launch"]["effective"]["speculative_num_draft_tokens"] == 16 and stored["launch"]["overrides"] == []

    file = "lib/python3.11/site-packages/sglang/srt/arg_groups/speculative_hook.py"
    old = "speculative_num_draft_tokens != cfg.speculative_num_steps + 1"
    shadow = shadow_env(ROOT / ".venv", tmp_path / "shadow", {file: (old, old)})
    edit_in_shadow(shadow, file, old, "speculative_num_draft_tokens != cfg.speculative_num_steps + 2")
    edit_in_shadow(shadow, file, "speculative_num_draft_tokens=cfg.speculative_num_steps + 1",
                   "speculative_num_draft_tokens=cfg.speculative_num_steps + 2")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PARITY_HOME=str(tmp_path / "home"), PYTHONPYCACHEPREFIX=str(tmp_path / "pycache"))
    run = subprocess.run([str(shadow / "bin" / "python"), "-m", "pytest", "-m", "parity", "-p", "no:cacheprovider",
                          "--parity-contracts", str(contracts), "--parity-no-verify",
                          "--rootdir", str(tmp_path), str(contracts)], capture_output=True, text=True, cwd=tmp_path,
                         env=env, timeout=900)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-2000:]
    assert "1 failed" in run.stdout
    assert "speculative_num_draft_tokens  16        17" in run.stdout  # the override, in the launch table
    assert "launch speculative_num_draft_tokens: the lock resolved 16, the installed engine now resolves 17" \
        in run.stdout
    assert proc.returncode == 0 and parity("check", "--lock", str(lock), "--no-verify").returncode == 0
