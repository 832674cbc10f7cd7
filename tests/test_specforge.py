"""SpecForge 0.2.0 as the training side, served by SGLang 0.5.23 (the main environment).

The training contract is SpecForge's own code run end to end (its id resolution, the capture
by the SGLang release it pins, its normaliser and target head) on tiny seeded targets; each
cross pair below is a real `check` against SGLang 0.5.23's real capture. One extraction per
side and pair (module-scoped; repeats come from the reply cache)."""

from __future__ import annotations

import pytest

from parity import cli
from parity.extract.trainers import trainer
from parity.gate import check
from parity.inputs import read_inputs

from .helpers import DEEPSEEK, LLAMA, ROOT, sglang_draft

pytestmark = pytest.mark.slow  # SpecForge's and SGLang's probes run in child processes

DRAFTS = ROOT / "fixtures" / "drafts"
LLAMA_DRAFT = DRAFTS / "specforge-llama3-8b-eagle3"  # published-style: no ids in its config
DEEPSEEK_DRAFT = DRAFTS / "specforge-deepseek-v3-eagle3"  # eagle_config ids [1, 29, 57]



def names(taps) -> list[str | None]:
    return [t.name if t is not None else None for t in taps]


def training(target, draft, run_ids=None):
    t, d = read_inputs(target, draft)
    return trainer("specforge", "0.2.0").training_contract(t, None, datagen_ids=run_ids, draft=d)


@pytest.fixture(scope="module")
def llama_default():
    t = training(LLAMA, LLAMA_DRAFT)
    return t, check(t, *read_inputs(LLAMA, LLAMA_DRAFT), verify=False)


def test_published_style_draft_with_no_ids_is_at_parity(llama_default):
    t, result = llama_default
    assert names(t.fc_input) == ["h2", "h16", "h29"] and t.target.name == "final"
    assert t.target_normed_by_trainer is False and "t+1" in t.alignment
    assert (t.provenance.package, t.provenance.version) == ("specforge", "0.2.0")
    assert t.provenance.details["sglang"] == "0.5.14" and t.provenance.details["ids"] == "[1, 15, 28]"
    assert t.dump_layout_source == "trainer_capture"
    assert result.verdict == "parity" and names(result.serving.fc_input) == ["h2", "h16", "h29"]


def test_nested_ids_and_the_run_override(tmp_path_factory, llama_default):
    nested = sglang_draft(tmp_path_factory.mktemp("nested"), ids=[1, 15, 28])
    t = training(LLAMA, nested)
    assert check(t, *read_inputs(LLAMA, nested), verify=False).verdict == "parity"
    assert names(t.fc_input) == ["h2", "h16", "h29"]
    assert "draft config" in t.provenance.details["ids_source"]
    # the run override wins over the draft's ids: SpecForge's own order of sources
    over = training(LLAMA, nested, run_ids=[3, 15, 28])
    assert names(over.fc_input) == ["h4", "h16", "h29"] and "run override" in over.provenance.details["ids_source"]
    assert check(over, *read_inputs(LLAMA, nested), verify=False).verdict == "drift"


def test_deepseek_ids_1_29_57_are_at_parity():
    t = training(DEEPSEEK, DEEPSEEK_DRAFT)
    result = check(t, *read_inputs(DEEPSEEK, DEEPSEEK_DRAFT), verify=False)
    assert names(t.fc_input) == ["h2", "h30", "h58"] and t.target.name == "final"
    assert names(result.serving.fc_input) == ["h2", "h30", "h58"] and result.verdict == "parity"


def test_deepseek_ids_2_30_58_are_computed_on_both_sides(tmp_path_factory):
    draft = sglang_draft(tmp_path_factory.mktemp("ds"), ids=[2, 30, 58], hidden_size=7168, vocab_size=163840,
                         num_attention_heads=64, num_key_value_heads=64)
    t = training(DEEPSEEK, draft)
    result = check(t, *read_inputs(DEEPSEEK, draft), verify=False)
    assert None not in names(t.fc_input) and None not in names(result.serving.fc_input)
    # SGLang 0.5.14's DeepSeek capture adds 1 only when the first id is 1; 0.5.23 serves the same
    assert names(t.fc_input) == names(result.serving.fc_input) == ["h2", "h30", "h58"]
    assert result.verdict == "parity"


def test_a_patched_default_changes_the_training_contract(inject_drift, llama_default):
    """Proof the contract is run, not retyped: the installed SpecForge's default moved."""
    inject_drift("tests.drift.specforge_moved_default")
    t = training(LLAMA, LLAMA_DRAFT)
    assert names(t.fc_input) == ["h3", "h17", "h30"] != names(llama_default[0].fc_input)
    assert check(t, *read_inputs(LLAMA, LLAMA_DRAFT), verify=False).verdict == "drift"


def test_cli_check_with_the_trainer_and_its_ids(capsys):
    code = cli.main(["check", "--trainer", "specforge", "--specforge", "0.2.0", "--target-config", str(LLAMA), "--draft",
                     str(LLAMA_DRAFT), "--specforge-ids", "1,15,28", "--no-verify"])
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("  training  "))
    assert code == 0 and line.startswith("  training  specforge 0.2.0 (the release named, run in parity's environment")
    assert "ids [1, 15, 28] captured by sglang 0.5.14; " in line, line


@pytest.mark.parametrize("argv, message", [
    (["--datagen-ids", "1,15,28", "--datagen-convention", "specforge"], "--trainer specforge"),
    (["--datagen-ids", "1,15,28", "--datagen-convention", "trtllm"], "typed rule, not run"),
    (["--trainer", "specforge", "--specforge", "0.2.0", "--dump-layout", "h2,h16,h29,final"], "captures the states itself"),
    (["--specforge-ids", "1,15,28"], "need --trainer specforge"),
    (["--trainer", "specforge", "--specforge", "0.2.0", "--specforge-ids", "1,x"], "--specforge-ids 1,x"),
])
def test_typed_rules_and_misused_flags_give_no_verdict(capsys, argv, message):
    """The published-style case read through a typed rule was a false DRIFT with a 'verified'
    fix that broke serving: now it is refused, naming what to run instead."""
    code = cli.main(["check", "--target-config", str(LLAMA), "--draft", str(LLAMA_DRAFT), *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_a_lock_records_the_trainer_and_is_checked_with_it(tmp_path, llama_default):
    import json

    from parity.lock import check_lock, write_lock

    path = tmp_path / "specforge.json"
    lock = write_lock(path, "sf", *read_inputs(LLAMA, LLAMA_DRAFT), None, trainer=trainer("specforge", "0.2.0"))
    data = json.loads(path.read_text())
    assert (data["trainer"], data["trainer_release"], data["trainer_ids"]) == ("specforge", "0.2.0", None)
    assert data["dump_layout"] == ["h2", "h16", "h29", "final"] == [t.name for t in lock.training.dump_layout]
    assert check_lock(path, verify=False, trainer_release="0.2.0").verdict == "parity"


def test_can_i_deploy_takes_the_trainer(capsys, llama_default):
    code = cli.main(["can-i-deploy", "--trainer", "specforge", "--specforge", "0.2.0", "--sglang", "0.5.23",
                     "--target-config", str(LLAMA), "--draft", str(LLAMA_DRAFT), "--no-verify"])
    out = capsys.readouterr().out
    assert code == 0 and "yes: sglang 0.5.23 with specforge 0.2.0 feeds the draft's fc exactly [h2, h16, h29]" in out
