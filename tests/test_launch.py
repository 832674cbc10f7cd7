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

from .helpers import MAIN_BYTECODE, run_parity as parity, LLAMA, ROOT, edit_in_shadow, shadow_env, shadow_run_env

KIMI = ROOT / "fixtures" / "targets" / "kimi-k2.5" / "config.json"
KIMI_FIXED = ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3-fixed"
LLAMA_DRAFT = ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3"
SEED = ("--model-path moonshotai/Kimi-K2.5 --speculative-algorithm EAGLE3 --speculative-draft-model-path my/draft "
        "--speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 16 --trust-remote-code")
EAGLE3 = "--speculative-algorithm EAGLE3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 16"


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
def test_a_misspelled_flag_stops_check_and_lock_before_any_model_is_built(tmp_path):
    """The release's own parser refuses the serve arguments first: the only child that ran is
    the engine's probe resolving them alone (`launch_only`), no training probe, no extraction."""
    serve = "--speculative-algorithm EAGLE3 --speculative-num-stepz 3"
    for argv in (["check", "--target-config", str(LLAMA), "--draft", str(LLAMA_DRAFT), "--dump-layout",
                  "h2,h16,h29,h32", "--serve-args", serve],
                 ["lock", str(tmp_path / "x.json"), "--target-config", str(LLAMA), "--draft", str(LLAMA_DRAFT),
                  "--dump-layout", "h2,h16,h29,h32", "--serve-args", serve]):
        log = tmp_path / f"{argv[0]}.log"
        proc = parity(*argv, env={**os.environ, "PARITY_RUN_LOG": str(log)})
        assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
        assert proc.stderr.strip() == ("parity: --serve-args: sglang 0.5.23's argument parser refused them: "
                                       "unrecognized arguments: --speculative-num-stepz 3")
        ran = [json.loads(line)["module"] for line in log.read_text().splitlines()]
        assert ran == ["parity.extract.engines.sglang.probe"], ran
    assert not (tmp_path / "x.json").exists()


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
    installed speculative_hook.py (in a linked copy of the environment), 16 tokens stay 16.
    Before the edit: the environment the copy links to (the same files but the edited one)."""
    file = "lib/python3.11/site-packages/sglang/srt/arg_groups/speculative_hook.py"
    old = "        cfg.speculative_eagle_topk == 1\n        and cfg.speculative_num_draft_tokens"
    seed = "--speculative-algorithm EAGLE3 --speculative-num-steps 1 --speculative-eagle-topk 1 " \
           "--speculative-num-draft-tokens 16"
    before = llama_serving(seed)
    assert before.returncode == 1 and json.loads(before.stdout)["launch"]["effective"]["speculative_num_draft_tokens"] == 2
    shadow = shadow_env(ROOT / ".venv", tmp_path / "shadow", {file: (old, "        False\n        and cfg.speculative_num_draft_tokens")})
    after = llama_serving(seed, python=str(shadow / "bin" / "python"), env=shadow_run_env(shadow, tmp_path / "home"))
    assert after.returncode == 0, after.stderr
    launch = json.loads(after.stdout)["launch"]
    assert launch["effective"]["speculative_num_draft_tokens"] == 16 and launch["overrides"] == []


# -- vLLM: `vllm serve MODEL ARGS` through its own parser and config classes ---------------------

VLLM_EAGLE3 = """--speculative-config '{"method": "eagle3", "model": "my/draft", "num_speculative_tokens": 3}'"""


def vllm_serving(serve_args: str, version: str = "0.34.0", *extra: str, python: str = sys.executable,
                 env=None) -> subprocess.CompletedProcess:
    return parity("contract", "serving", "--engine", "vllm", "--vllm", version, "--target-config", str(LLAMA),
                  "--draft", str(LLAMA_DRAFT), "--serve-args", serve_args, "--json", *extra, python=python, env=env)


def vllm_check(serve_args: str, *extra: str) -> subprocess.CompletedProcess:
    return parity("check", "--engine", "vllm", "--vllm", "0.34.0", "--target-config", str(LLAMA), "--draft",
                  str(LLAMA_DRAFT), "--dump-layout", "h2,h16,h29,h32", "--serve-args", serve_args, *extra)


@pytest.mark.slow
@pytest.mark.parametrize("version, answer, tp", [("0.34.0", "SpeculativeConfig.uses_aux_hidden_states", 2),
                                                 ("0.33.0", "eagle3_utils.requires_aux_hidden_states", 1)])
def test_vllm_resolves_the_serve_command_with_its_own_code(version, answer, tp):
    """vllm serve's own parser, EngineArgs and SpeculativeConfig: the draft's max model len is
    the target's --max-model-len (vLLM caps the draft's 131072 to it), its tensor parallel
    size the target's; the EAGLE-3 answer is the release's own. 0.34 with --tensor-parallel-size 2
    runs the capture on 2 ranks (tests/test_parallel_layout.py); 0.33's family runs one process,
    where a layout of 2 ranks is parity's limit, so it is asked for one."""
    proc = vllm_serving(VLLM_EAGLE3 + f" --max-model-len 4096 --tensor-parallel-size {tp}", version)
    assert proc.returncode in (0, 1), proc.stderr  # 0.33's runners differ on this draft (an error finding)
    contract = json.loads(proc.stdout)
    assert contract["provenance"]["version"] == version
    launch = contract["launch"]
    assert launch["requested"] == {"method": "eagle3", "num_speculative_tokens": 3,
                                   "model_config.max_model_len": 4096, "parallel_config.tensor_parallel_size": tp}
    effective = launch["effective"]
    assert (effective["method"], effective["num_speculative_tokens"], effective["max_model_len"],
            effective["draft_tensor_parallel_size"]) == ("eagle3", 3, 4096, tp)
    assert launch["layout"]["tp"] == launch["layout"]["draft_tp"] == tp
    assert (launch["layout"].get("run") or {}).get("ranks", 1) == tp
    assert effective["draft_model_config.hf_config.max_position_embeddings"] == 131072
    assert launch["overrides"] == [] and launch["algorithm_is_eagle3"] is True
    assert (launch["algorithm_field"], launch["algorithm_answer"]) == ("method", answer)
    assert launch["replaced"].keys() == {"model", "speculative_config.model"}


@pytest.mark.slow
def test_vllm_a_consistent_command_passes():
    proc = vllm_check(VLLM_EAGLE3)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("parity check: PARITY")
    assert "method                  \"eagle3\"  \"eagle3\"  -       ok" in proc.stdout


@pytest.mark.slow
def test_vllm_a_misspelled_flag_is_refused_in_its_words():
    proc = vllm_serving(VLLM_EAGLE3 + " --max-model-lenn 4096")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("parity: --serve-args: vllm 0.34.0's argument parser refused them: "
                                   "unrecognized arguments: --max-model-lenn 4096")


@pytest.mark.slow
def test_vllm_an_unquoted_json_value_is_refused_in_its_words_saying_why():
    """The shell's splitting removes the quotes of a JSON value given unquoted (as docs/launch.md
    once showed it): vLLM's refusal comes with what parity can see and vLLM cannot."""
    proc = vllm_serving('--speculative-config {"method": "eagle3", "num_speculative_tokens": 3}')
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "argument --speculative-config/-sc: Value {method: cannot be converted" in proc.stderr
    assert "the argument '{method:' is not JSON" in proc.stderr and "@FILE" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("config, says", [
    ('"eagle3"', """AttributeError: 'str' object has no attribute 'items' (--speculative-config "eagle3" is a JSON string;"""),
    ("[1, 2]", "AttributeError: 'list' object has no attribute 'items' (--speculative-config [1, 2] is a JSON array;"),
    ("3", "AttributeError: 'int' object has no attribute 'items' (--speculative-config 3 is a JSON number;"),
    ('{"method": "eagle3", "draft_max_model_len": 2048}', "SpeculativeConfig: draft_max_model_len: Unexpected keyword argument"),
])
def test_vllm_refuses_a_speculative_config_it_cannot_take_in_its_words_naming_what(capsys, config, says):
    """vLLM's parser reads any JSON after --speculative-config; its resolution takes an object
    and its SpeculativeConfig the keys it knows. Each refusal is vLLM's, exit 2, one line naming
    the shape or the key (before: exit 3, `TypeError: 'str' object is not a mapping` in parity's
    own launch code; the unknown key refused without its name). Run in this process, so that
    every case forks from the one vLLM server this test session warmed (parity.forkserver)."""
    from parity import cli

    rc = cli.main(["contract", "serving", "--engine", "vllm", "--vllm", "0.34.0", "--target-config", str(LLAMA),
                   "--draft", str(LLAMA_DRAFT), "--serve-args", f"--speculative-config '{config}'"])
    out, err = capsys.readouterr()
    assert rc == 2, out + err
    line = err.strip()
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith("parity: --serve-args: vllm 0.34.0's resolution refused them: " + says), line


@pytest.mark.slow
def test_vllm_eagle_with_an_eagle3_draft_is_refused_by_vllm_with_a_verified_method():
    """vLLM's own answer to `"method": "eagle"` with an EAGLE-3 draft: its SpeculativeConfig
    refuses it (`vllm serve` would not start); the line says so, with eagle3 verified."""
    proc = vllm_serving(VLLM_EAGLE3.replace('"eagle3"', '"eagle"'))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith("parity: --serve-args: vllm 0.34.0's resolution refused them: Value error, Model "
                           "architectures ['EagleLlamaForCausalLMEagle3'] are not supported for now.")
    assert line.endswith("""(verified: with "method": "eagle3" it resolves them: serve with --speculative-config """
                         """'{"method": "eagle3", "model": "my/draft", "num_speculative_tokens": 3}')""")


@pytest.mark.slow
@pytest.mark.parametrize("serve_args, asked", [
    (VLLM_EAGLE3.replace('"eagle3"', '"draft_model"'), '"draft_model"'),  # vLLM runs it: no aux states
    ("--max-model-len 4096", "(not given)"),  # no draft at all
    ("--spec-method draft_model --spec-tokens 3", '"draft_model"'),  # 0.34's shorthand flags, merged by vLLM
])
def test_vllm_a_method_that_captures_no_aux_states_is_never_a_pass(serve_args, asked):
    proc = vllm_check(serve_args)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith("parity check: DRIFT: vllm 0.34.0 will not serve the draft as the serve command asks")
    row = next(line for line in proc.stdout.splitlines() if line.strip().startswith("method "))
    assert asked in row and "MISMATCH: not EAGLE-3: the aux hidden states are never captured" in row
    if asked != "(not given)":  # the method eagle3, verified by resolving again
        assert """FIX (launch): serve with --speculative-config '{"method": "eagle3",""" in proc.stdout
        assert 'resolves these to method "eagle3", which captures the aux hidden states' in proc.stdout
    result = json.loads(vllm_check(serve_args, "--json").stdout)
    assert [(d["kind"], d["where"]) for d in result["differences"]] == [("launch", "method")]


def vllm_shadow(version: str, file: str, old: str, tmp_path):
    """(the vLLM `version` environment, a linked copy of it whose `file` (holding `old`) can be
    edited, the process environment that makes parity find the copy as that release's)."""
    from parity.envs import find_env

    original = find_env("vllm", version).path
    home = tmp_path / "home"
    home.mkdir()
    shadow = shadow_env(original, home / original.name, {file: (old, old)})
    env = shadow_run_env(shadow, home, bytecode=MAIN_BYTECODE)
    env.pop("PARITY_NO_CACHE", None)
    return original, shadow, env


@pytest.mark.slow
def test_vllm_an_edit_of_the_installed_resolution_code_is_followed(tmp_path):
    """The effective values are vLLM's: with its installed speculator_config.py edited (in a
    linked copy of the 0.34 environment) to cap the draft tokens at 2, the 3 asked become 2,
    an override naming the edited function, and the verdict drift."""
    file = "lib/python3.11/site-packages/vllm/v1/worker/gpu/spec_decode/speculator_config.py"
    old = "        config_cls.resolve_num_speculative_tokens(spec)\n"
    before = vllm_serving(VLLM_EAGLE3)  # the environment the copy links to
    assert before.returncode == 0, before.stderr
    original, shadow, env = vllm_shadow("0.34.0", file, old, tmp_path)
    assert json.loads(before.stdout)["launch"]["effective"]["num_speculative_tokens"] == 3
    edit_in_shadow(shadow, file, old, old + "        spec.num_speculative_tokens = min(spec.num_speculative_tokens, 2)\n")
    after = vllm_serving(VLLM_EAGLE3, env=env)
    assert after.returncode == 1, after.stderr
    launch = json.loads(after.stdout)["launch"]
    assert launch["overrides"] == [{"field": "num_speculative_tokens", "requested": 3, "effective": 2,
                                    "by": "DraftModelSpeculatorConfig.configure"}]
    assert old in (original / file).read_text()  # the original environment is untouched


def test_the_launch_verdict_names_the_engines_own_algorithm_field():
    """Engine-neutral: vLLM's `method` and its own answer, SGLang's speculative_algorithm as before."""
    from parity.contract import LaunchContract
    from parity.verdict import launch_differences

    class Serving:  # what launch_differences reads of a serving contract
        engine = "vllm"
        provenance = type("P", (), {"version": "0.34.0"})()
        launch = LaunchContract(argv=("-sc", "{}"), requested={"method": "draft_model"},
                                effective={"method": "draft_model"}, algorithm_is_eagle3=False,
                                algorithm_field="method", algorithm_answer="SpeculativeConfig.uses_aux_hidden_states")

    [d] = launch_differences(Serving)
    assert (d.where, d.training, d.serving) == ("method", "eagle3", "draft_model")
    assert "(SpeculativeConfig.uses_aux_hidden_states is False)" in d.message
    sglang = LaunchContract(argv=(), requested={}, effective={"speculative_algorithm": "EAGLE"}, algorithm_is_eagle3=False)
    assert set(json.loads(sglang.model_dump_json())) == {"argv", "replaced", "requested", "effective", "overrides",
                                                        "fixes", "algorithm_is_eagle3"}


def test_a_vllm_family_whose_parser_is_not_in_the_release_is_parity_s_limit_not_a_refusal():
    """A family's resolver that looks for `vllm serve`'s parser where the installed release keeps
    none (0.28 run with the 0.33 family's: ModuleNotFoundError vllm.entrypoints.common, once read
    as the engine refusing the arguments) raises CodePathMoved, which the probe says is parity's."""
    from parity.extract.engines.vllm import launch
    from parity.extract.run_until import CodePathMoved

    elsewhere = launch.Launch(aux=launch.eagle_proposer_answer, parser=("parity_absent.cli_args", "parity_absent.utils"))
    with pytest.raises(CodePathMoved, match="parity_absent"):
        launch.parse(["--max-model-len", "8"], "/nonexistent", None, elsewhere)


def test_the_vllm_probe_replies_a_resolver_that_does_not_fit_as_parity_s_limit(tmp_path, monkeypatch):
    """What the probe replies for it: the harness limit (exit 2, 'parity cannot run' in the
    table), never `launch_refused` (the engine refusing the arguments, exit 1)."""
    import tempfile

    from parity.extract.child import HARNESS_LIMIT_KEY
    from parity.extract.engines.vllm import launch, probe

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the model folder it writes, kept in the test's tmp
    adapter = type("Adapter", (), {"LAUNCH": launch.Launch(aux=launch.eagle_proposer_answer,
                                                            parser=("parity_absent.cli_args", "parity_absent.utils"))})
    reply = {"family": "0.33"}
    request = {"serve_args": ["--max-model-len", "8"],
               "target_config": {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2}}
    assert probe.resolve_launch(adapter(), request, "0.33.0", reply) is False
    assert "launch_refused" not in reply, reply
    assert "the 0.33 family's launch resolver does not fit this release" in reply[HARNESS_LIMIT_KEY], reply


def test_vllm_method_fix_rewrites_the_speculative_config_only():
    from parity.extract.engines.vllm.launch import method_fix

    argv = ["--max-model-len", "4096", "-sc", '{"method": "eagle", "model": "d", "num_speculative_tokens": 3}',
            "--spec-tokens=3"]
    fixed = method_fix(argv, {"method": "eagle", "model": "d", "num_speculative_tokens": 3},
                       {"method": "eagle", "model": "d", "num_speculative_tokens": 3})
    assert fixed == ["--max-model-len", "4096", "--speculative-config",
                     '{"method": "eagle3", "model": "d", "num_speculative_tokens": 3}']
    assert method_fix(["--max-model-len", "4096"], None, None) is None
    # 0.34's shorthand flags: merged by vLLM, the model as the user wrote it (not parity's draft path)
    assert method_fix(["--spec-method", "draft_model", "--spec-model", "my/draft", "--spec-tokens", "3"], None,
                      {"method": "draft_model", "model": "/parity/draft", "num_speculative_tokens": 3}) == [
        "--speculative-config", '{"method": "eagle3", "num_speculative_tokens": 3, "model": "my/draft"}']


def test_a_lock_resolves_its_launch_under_the_locks_engine(tmp_path, monkeypatch):
    """write_lock asks the lock's own serving engine (its `engine` field) for the launch contract,
    never SGLang by name; no engine runs here (the engine and the trainer are stand-ins)."""
    import parity.extract.engines as engines
    import parity.lock as lock
    from parity.contract import LaunchContract
    from parity.inputs import read_inputs

    training = lock.read_lock(ROOT / "contracts" / "llama-3.1-8b-eagle3.json").training
    asked = []

    class Engine:
        NAME = "sglang"

        def extract_serving(self, target, draft, version, *, serve_args):
            asked.append((self.NAME, version))
            return type("S", (), {"launch": LaunchContract(argv=serve_args, requested={}, effective={})})()

    monkeypatch.setattr(lock, "extract_for_lock", lambda *a, **k: training)
    written = lock.write_lock(tmp_path / "x.json", "x", *read_inputs(LLAMA, LLAMA_DRAFT), None,
                              serve_args=("--x",), engine=engines.BoundEngine(Engine(), "0.5.23"))
    assert asked == [(written.engine, "0.5.23")] == [("sglang", "0.5.23")]
    assert written.launch.argv == ("--x",)


@pytest.mark.parametrize("given, says", [
    ("--speculative-num-steps '1", "No closing quotation"),
    ("   # only a comment", "no arguments"),
    ("@/nonexistent/serve-args.txt", "file not found"),
])
def test_serve_args_that_cannot_be_read_are_refused_before_any_extraction(given, says):
    from parity.inputs import InputError, parse_serve_args

    with pytest.raises(InputError, match=says):
        parse_serve_args(given)


@pytest.mark.parametrize("argv, hinted", [
    (("--speculative-config", "{method:", "eagle3}"), True),
    (("--speculative-config", '{"method": "eagle3"}'), False),  # quoted whole: JSON, no hint
    (("--speculative-num-steps", "3"), False),
])
def test_a_refusal_says_when_a_json_value_lost_its_quotes(argv, hinted):
    from parity.inputs import LaunchRefused

    message = str(LaunchRefused("--serve-args: vllm 9.9's argument parser refused them: X", argv=argv))
    assert message.startswith("--serve-args: vllm 9.9's argument parser refused them: X")
    assert ("is not JSON" in message) is hinted


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
    env = shadow_run_env(shadow, tmp_path / "home")
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
