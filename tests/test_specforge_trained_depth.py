"""SpecForge's recorded trained depth (docs/launch.md, "The trained depth"): `--trained` names a
SpecForge training output; the ttt length its training checkpoint records is read by SpecForge's
own checkpoint reader (`export.checkpoint_io.resolve_training_state`) in the SpecForge
environment's child, and the served steps are compared with it. The training output is a tiny
real one, written at test time by SpecForge's own trainer and save code on CPU
(tests/specforge_run.py, ttt_length 3). The mutation cases edit the installed reader in a linked
copy of the SpecForge environment."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .helpers import LLAMA, ROOT, edit_in_shadow, run_parity as parity, shadow_release

pytestmark = pytest.mark.slow  # SpecForge's probe (and SGLang's) run in child processes

SPECFORGE_DRAFT = ROOT / "fixtures" / "drafts" / "specforge-llama3-8b-eagle3"
READER = "lib/python3.11/site-packages/specforge/export/checkpoint_io.py"
EXPORTS = '__all__ = [\n    "apply_legacy_rope_scaling",'
# The installed reader wrapped: what it returns, with the recorded ttt length replaced (the edit's
# `{}`), as an edited release would read it.
REREAD = ('_read = resolve_training_state\n\n\ndef resolve_training_state(checkpoint_path):\n'
          '    state = _read(checkpoint_path)\n    {}\n    return state\n\n\n' + EXPORTS)


@pytest.fixture(scope="module")
def run_output(tmp_path_factory) -> Path:
    """A SpecForge run's output_dir (its `tiny-latest` pointer and `tiny-step0` checkpoint)."""
    from parity.envs import child_env, find_env

    out = tmp_path_factory.mktemp("specforge-run")
    python = find_env("specforge", "0.2.0").python
    proc = subprocess.run([str(python), str(ROOT / "tests" / "specforge_run.py"), str(out / "run"), "3"], cwd=out,
                          capture_output=True, text=True, timeout=600, env=child_env(python))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("/output/tiny-step0"), proc.stdout[-500:]
    return out / "run" / "output"


def sglang_steps(steps: int) -> str:
    return (f"--speculative-algorithm EAGLE3 --speculative-num-steps {steps} --speculative-eagle-topk 1 "
            f"--speculative-num-draft-tokens {steps + 1}")


def check(run: Path, steps: int) -> dict:
    proc = parity("check", "--trainer", "specforge", "--specforge", "0.2.0", "--target-config", str(LLAMA), "--draft", str(SPECFORGE_DRAFT),
                  "--trained", str(run), "--serve-args", sglang_steps(steps), "--no-verify", "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)


def training(run: Path, **kw) -> subprocess.CompletedProcess:
    return parity("contract", "training", "--trainer", "specforge", "--specforge", "0.2.0", "--target-config", str(LLAMA), "--draft",
                  str(SPECFORGE_DRAFT), "--trained", str(run), "--json", **kw)


def unread(run: Path, **kw) -> dict:
    """The depth_unread finding of a training contract that has no trained depth."""
    proc = training(run, **kw)
    assert proc.returncode == 0, proc.stderr[-2000:]
    contract = json.loads(proc.stdout)
    assert "trained_depth" not in contract
    [finding] = [f for f in contract["findings"] if f["kind"] == "depth_unread"]
    return finding


def deeper(result: dict) -> list[str]:
    return [n for n in result["notes"] if "deeper than training" in n]


def test_served_deeper_than_the_recorded_ttt_length_is_the_note(run_output):
    """5 steps served, 3 recorded: the launch contract's rule for a deeper serve (a warning note,
    exit 0), naming the recorded depth and where it came from."""
    result = check(run_output, 5)
    depth = result["training"]["trained_depth"]
    assert (depth["steps"], depth["recorded"]) == (3, True)
    assert depth["source"].startswith(f"eagle3_ttt_length of the SpecForge training checkpoint {run_output} "
                                      "(run 'tiny', step 0), read by specforge 0.2.0's "
                                      "specforge.export.checkpoint_io.resolve_training_state")
    [note] = deeper(result)
    assert note.startswith("launch speculative_num_steps: sglang 0.5.23 drafts 5 steps deep, deeper than "
                           "training unrolled the draft (3: eagle3_ttt_length of the SpecForge training checkpoint")
    assert result["differences"] == []


def test_served_as_deep_as_recorded_says_nothing(run_output):
    result = check(run_output, 3)
    assert result["training"]["trained_depth"]["steps"] == 3
    assert deeper(result) == []


def test_the_depth_is_the_installed_readers(run_output, tmp_path):
    """The reader edited (in a linked copy of the SpecForge environment) to give 9: the recorded
    depth follows; edited to drop the key: no depth, and said (not the run default standing for
    it); the reader removed: said the same way."""
    shadow, _, env = shadow_release(tmp_path, "specforge", "0.2.0", {READER: (EXPORTS, EXPORTS)})
    python = str(shadow / "bin" / "python")

    edit_in_shadow(shadow, READER, EXPORTS, REREAD.format('state["eagle3_ttt_length"] = 9'))
    proc = training(run_output, python=python, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    depth = json.loads(proc.stdout)["trained_depth"]
    assert (depth["steps"], depth["recorded"]) == (9, True)

    edit_in_shadow(shadow, READER, 'state["eagle3_ttt_length"] = 9', 'state.pop("eagle3_ttt_length")')
    finding = unread(run_output, python=python, env=env)
    assert finding["severity"] == "warning"
    assert finding["message"] == (f"the SpecForge training checkpoint --trained {run_output} (run 'tiny', step 0) "
                                  "records no eagle3_ttt_length (read by specforge 0.2.0's specforge.export."
                                  "checkpoint_io.resolve_training_state: None); the served depth is not checked "
                                  "against the trained one")

    edit_in_shadow(shadow, READER, "def resolve_training_state(checkpoint_path: str)",
                   "def _gone(checkpoint_path: str)")
    edit_in_shadow(shadow, READER, "_read = resolve_training_state", "_read = _gone")
    edit_in_shadow(shadow, READER, "def resolve_training_state(checkpoint_path):", "def _also_gone(checkpoint_path):")
    message = unread(run_output, python=python, env=env)["message"]
    assert message.startswith(f"specforge 0.2.0 cannot read the training checkpoint --trained {run_output}: "
                              "it has no specforge.export.checkpoint_io.resolve_training_state")
    assert message.endswith("the served depth is not checked against the trained one")


def test_a_folder_without_a_training_checkpoint_is_refused_in_the_readers_words(tmp_path):
    proc = training(tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stderr.startswith(f"parity: specforge 0.2.0: --trained {tmp_path}: its specforge.export.checkpoint_io."
                                  "resolve_training_state reads no training checkpoint there: ")
    assert "is not a training_state.pt, a checkpoint directory, or an output_dir" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_lock_names_the_training_output_and_reads_its_depth_again(run_output, tmp_path):
    """`parity lock --trainer specforge --trained RUN`: the lock names the run (relative to itself)
    and holds its recorded depth; checking the lock reads the checkpoint again (the note)."""
    lock = tmp_path / "contracts" / "sf.json"
    proc = parity("lock", str(lock), "--trainer", "specforge", "--specforge", "0.2.0", "--target-config", str(LLAMA), "--draft",
                  str(SPECFORGE_DRAFT), "--trained", str(run_output), "--serve-args", sglang_steps(5))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    written = json.loads(lock.read_text())
    assert (lock.parent / written["trained"]).resolve() == run_output.resolve()
    assert written["training"]["trained_depth"]["steps"] == 3
    proc = parity("check", "--lock", str(lock), "--specforge", "0.2.0", "--no-verify", "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    [note] = deeper(result)
    assert "drafts 5 steps deep, deeper than training unrolled the draft (3: eagle3_ttt_length" in note
