"""The trained depth against the served steps (docs/launch.md, "The trained depth"): the depth
training unrolled the draft to, read by the trainer's own config classes, and a warning when
the serve command drafts deeper. Every engine-running case runs the real CLI on the bundled
files; the mutation case edits the installed speculators' converter in a linked copy of the
main environment."""

from __future__ import annotations

import json
import subprocess

import pytest

from .helpers import LLAMA, ROOT, run_parity as parity, shadow_env, shadow_run_env

LLAMA_DRAFT = ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3"
TRAINED = ROOT / "fixtures" / "replay" / "draft"  # a checkpoint speculators' trainer wrote (ttt_steps 3)
SPECFORGE_DRAFT = ROOT / "fixtures" / "drafts" / "specforge-llama3-8b-eagle3"
LAYOUT = ("--dump-layout", "h2,h16,h29,h32")
DEEPER = "drafts 5 steps deep, deeper than training unrolled the draft (3"


def sglang_steps(steps: int) -> str:
    return (f"--speculative-algorithm EAGLE3 --speculative-num-steps {steps} --speculative-eagle-topk 1 "
            f"--speculative-num-draft-tokens {steps + 1}")


def check(serve_args: str, *extra: str, python: str | None = None, env=None) -> subprocess.CompletedProcess:
    kw = {"env": env} if env is not None else {}
    if python is not None:
        kw["python"] = python
    return parity("check", "--target-config", str(LLAMA), "--draft", str(LLAMA_DRAFT), *LAYOUT,
                  "--serve-args", serve_args, "--no-verify", *extra, **kw)


@pytest.mark.slow
def test_serving_deeper_than_trained_is_a_warning_naming_both_depths():
    """The served EAGLE-3 config records no depth: speculators' Eagle3Converter loads it with its
    own 3, said so. SGLang drafting 5 steps is a note (exit 0), not a drift."""
    proc = check(sglang_steps(5), "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    depth = result["training"]["trained_depth"]
    assert (depth["steps"], depth["recorded"]) == (3, False)
    assert "Eagle3Converter" in depth["source"]
    [note] = [n for n in result["notes"] if n.startswith("launch speculative_num_steps")]
    assert DEEPER in note and "sglang 0.5.23" in note
    assert result["differences"] == []


@pytest.mark.slow
@pytest.mark.parametrize("steps", [3, 2])
def test_serving_as_deep_as_trained_or_shallower_says_nothing(steps):
    proc = check(sglang_steps(steps), "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["serving"]["launch"]["effective"]["speculative_num_steps"] == steps
    assert not [n for n in result["notes"] if "deeper than training" in n]


@pytest.mark.slow
@pytest.mark.parametrize("tokens, deeper", [(5, True), (3, False)])
def test_vllm_num_speculative_tokens_against_the_trained_depth(tokens, deeper):
    spec = json.dumps({"method": "eagle3", "model": "my/draft", "num_speculative_tokens": tokens})
    proc = check(f"--speculative-config '{spec}'", "--engine", "vllm", "--vllm", "0.34.0", "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    notes = [n for n in json.loads(proc.stdout)["notes"] if "deeper than training" in n]
    assert bool(notes) is deeper
    if deeper:
        assert notes[0].startswith("launch num_speculative_tokens: vllm 0.34.0 drafts 5 steps deep")


@pytest.mark.slow
def test_a_trained_checkpoint_records_its_depth():
    """The checkpoint speculators' trainer wrote holds its ttt_steps as the greedy proposal's
    speculative_tokens: recorded, read by its Eagle3SpeculatorConfig."""
    proc = parity("contract", "training", "--target-config", str(ROOT / "fixtures" / "replay" / "target" / "config.json"),
                  "--dump-layout", "h1,h4,h6,h8", "--draft", str(TRAINED), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    depth = json.loads(proc.stdout)["trained_depth"]
    assert (depth["steps"], depth["recorded"]) == (3, True)
    assert depth["source"].startswith("speculators_config.proposal_methods[greedy].speculative_tokens of the "
                                      "trained checkpoint")


@pytest.mark.slow
def test_specforge_reads_its_run_default_ttt_length():
    proc = parity("contract", "training", "--trainer", "specforge", "--specforge", "0.2.0", "--target-config", str(LLAMA), "--draft",
                  str(SPECFORGE_DRAFT), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    depth = json.loads(proc.stdout)["trained_depth"]
    assert (depth["steps"], depth["recorded"]) == (7, False)
    assert depth["source"].startswith("training.ttt_length of SpecForge's Config")


@pytest.mark.slow
def test_an_edit_of_the_installed_trainer_depth_is_followed(tmp_path):
    """The depth is the trainer's, not typed: with the installed converter edited (in a linked copy
    of the main environment) to load served configs with 8 tokens, the training contract's depth
    is 8 (the training side alone runs in the copy: SGLang is not edited). That 5 served steps
    are then no deeper than trained is depth_notes' (test_depth_notes_compare_the_served_steps_with_the_trained_depth)."""
    file = "lib/python3.11/site-packages/speculators/convert/eagle/eagle3_converter.py"
    old = "            speculative_tokens=3,\n"
    before = check(sglang_steps(5), "--json")  # the environment the copy links to
    assert json.loads(before.stdout)["training"]["trained_depth"]["steps"] == 3, before.stdout[-3000:]
    shadow = shadow_env(ROOT / ".venv", tmp_path / "shadow", {file: (old, "            speculative_tokens=8,\n")})
    proc = parity("contract", "training", "--target-config", str(LLAMA), "--draft", str(LLAMA_DRAFT), *LAYOUT,
                  "--json", python=str(shadow / "bin" / "python"), env=shadow_run_env(shadow, tmp_path / "home"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert json.loads(proc.stdout)["trained_depth"]["steps"] == 8


def _contracts(depth: dict | None, effective: dict, engine: str = "sglang"):
    from parity.contract import LaunchContract, TrainedDepth
    from parity.lock import read_lock

    training = read_lock(ROOT / "contracts" / "llama-3.1-8b-eagle3.json").training
    assert training.trained_depth is None  # a lock written before the field loads as before
    training = training.model_copy(update={"trained_depth": TrainedDepth(**depth) if depth else None})

    class Serving:  # what depth_notes reads of a serving contract
        provenance = type("P", (), {"version": "9.9"})()
        launch = LaunchContract(argv=(), requested={}, effective=effective)

    Serving.engine = engine
    return training, Serving


@pytest.mark.parametrize("depth, effective, noted", [
    ({"steps": 3, "recorded": True, "source": "x"}, {"speculative_num_steps": 4}, True),
    ({"steps": 3, "recorded": True, "source": "x"}, {"speculative_num_steps": 3}, False),
    ({"steps": 3, "recorded": True, "source": "x"}, {"num_speculative_tokens": 2}, False),
    ({"steps": 3, "recorded": False, "source": "x"}, {"num_speculative_tokens": 7}, True),
    (None, {"speculative_num_steps": 9}, False),  # no depth known: nothing compared
    ({"steps": 3, "recorded": True, "source": "x"}, {"speculative_num_steps": None}, False),  # not speculative
])
def test_depth_notes_compare_the_served_steps_with_the_trained_depth(depth, effective, noted):
    from parity.verdict import depth_notes

    training, serving = _contracts(depth, effective)
    notes = depth_notes(training, serving)
    assert bool(notes) is noted
    if noted:
        [field] = effective
        assert notes[0].startswith(f"launch {field}: sglang 9.9 drafts {effective[field]} steps deep")
        assert ("not recorded" in notes[0]) is not depth["recorded"]


def test_a_training_contract_without_a_depth_serialises_as_before():
    training, _ = _contracts(None, {})
    assert "trained_depth" not in json.loads(training.model_dump_json())


def test_a_lock_fails_when_the_installed_trainer_now_reads_another_depth():
    """Checking a lock: a trainer whose own classes now give another depth than the lock holds is a
    lock difference; a lock written before the field (no depth) is not compared."""
    from parity.verdict import _lock_differences

    depth = {"recorded": True, "source": "x"}
    locked, _ = _contracts({**depth, "steps": 3}, {})
    fresh, _ = _contracts({**depth, "steps": 5}, {})
    [d] = _lock_differences(locked, fresh)
    assert (d.kind, d.where, d.training, d.serving) == ("lock", "trained_depth", 3, 5)
    assert _lock_differences(locked, locked) == []
    older, _ = _contracts(None, {})
    assert _lock_differences(older, fresh) == []


def test_trained_is_a_training_output_for_specforge_and_a_draft_for_speculators(tmp_path):
    """--trained: SpecForge's training output, beside the served draft (read by its own code in its
    probe, never here); speculators' checkpoint directory, read as the draft."""
    from parity.extract.trainers import trainer
    from parity.inputs import InputError, TrainingRun

    assert trainer("specforge").trained_side(tmp_path, None) == {"draft": None, "trained_run": TrainingRun(tmp_path)}
    with pytest.raises(InputError, match="does not exist"):
        trainer("specforge").trained_side(tmp_path / "absent", None)
    assert trainer("speculators").trained_side(None, "served") == {"draft": "served"}
    side = trainer("speculators").trained_side(TRAINED, "served")
    assert side["trained"] is True and side["draft"].path == TRAINED
