"""The gate catches every drift class of a speculators -> SGLang pair, each injected for real.

Each test runs both real extractors (speculators' data path, SGLang's capture) and the
gate; every drift must come out as verdict "drift" with the difference named, and the
correct configurations must pass. The table of classes lives in docs/drift-classes.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from parity import cli
from parity.contract import TargetModel, parse_taps
from parity.extract.engines.sglang import served_config
from parity.extract.trainers.speculators import extract_training
from parity.fixtures import DraftRecipe, speculators_draft
from parity.gate import check
from parity.inputs import read_inputs
from parity.lock import check_lock

from .helpers import LLAMA, ROOT, sglang_draft

pytestmark = [pytest.mark.slow, pytest.mark.parity]

TINY = ROOT / "fixtures" / "targets" / "tiny-llama-32l" / "config.json"
TINY_TARGET = TargetModel(architecture="LlamaForCausalLM", model_type="llama", num_hidden_layers=32,
                          hidden_size=64, vocab_size=256)
LLAMA_TARGET = TargetModel(architecture="LlamaForCausalLM", model_type="llama", num_hidden_layers=32,
                           hidden_size=4096, vocab_size=128256)
LLAMA_LOCK = ROOT / "contracts" / "llama-3.1-8b-eagle3.json"


def training(layout: str, draft: Path, target: TargetModel = LLAMA_TARGET):
    return extract_training(target, parse_taps(layout), draft_dir=draft)


def served(tmp: Path, ids, *, d2t: str = "offsets", **flags) -> Path:
    """A served (SGLang-format) copy of a seeded speculators draft, with weights."""
    spec_dir = speculators_draft(DraftRecipe())
    spec = json.loads((spec_dir / "config.json").read_text())
    cfg = served_config(spec, ids)
    cfg.update(flags)
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "config.json").write_text(json.dumps(cfg))
    tensors = load_file(str(spec_dir / "model.safetensors"))
    if d2t == "absolute":  # target = d2t[d], as some exporters write it
        tensors["d2t"] = tensors["d2t"] + torch.arange(tensors["d2t"].shape[0])
    elif d2t == "missing":
        tensors.pop("d2t")
        tensors.pop("t2d")
    save_file(tensors, str(tmp / "model.safetensors"))
    return tmp


def slot_whys(result) -> list[str]:
    return [s.why for s in result.diff.mismatched_slots]


# -- correct configurations pass ---------------------------------------------------------------

def test_correct_served_draft_with_weights_passes(tmp_path):
    draft = served(tmp_path, [1, 15, 28])
    result = check(training("h2,h16,h29,h32", draft, TINY_TARGET), *read_inputs(TINY, draft))
    assert result.verdict == "parity", [d.message for d in result.differences]
    assert result.serving.vocab.d2t == "offsets" and result.training.vocab.d2t == "offsets"
    assert result.suggestion is None


# -- the drift classes -------------------------------------------------------------------------

def test_off_by_one_ids_are_caught_and_fixed(tmp_path):
    # vLLM-convention ids [2, 16, 29] written in a draft served by SGLang, which adds 1.
    draft = sglang_draft(tmp_path, ids=[2, 16, 29])
    result = check(training("h2,h16,h29,h32", draft), *read_inputs(LLAMA, draft))
    assert result.verdict == "drift"
    assert slot_whys(result) == ["off by one layer (+1)"] * 3
    assert result.suggestion.eagle_aux_hidden_state_layer_ids == [1, 15, 28]
    assert result.suggestion.verified


def test_born_from_case_embedding_vs_layer(capsys):
    rc = cli.main(["check", "--target-config", "fixtures/targets/deepseek-v3-61l/config.json",
                   "--draft", "fixtures/drafts/kimi-k2.5-eagle3", "--dump-layout", "h0,h3,h31,h59",
                   "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["verdict"] == "drift"
    assert out["training"]["fc_input"] == ["h0", "h3", "h31"]
    assert out["serving"]["fc_input"] == ["h2", "h30", "h58"]
    assert "embedding output vs decoder-layer output" in out["differences"][0]["message"]
    assert out["suggestion"]["engine"] == "sglang"
    assert out["suggestion"]["eagle_aux_hidden_state_layer_ids"] == [0, 3, 31]


def test_order_swap_cannot_be_served(tmp_path):
    draft = sglang_draft(tmp_path, ids=[1, 15, 28])
    result = check(training("h16,h2,h29,h32", draft), *read_inputs(LLAMA, draft), verify=False)
    assert result.verdict == "drift"
    assert slot_whys(result)[:2] == ["order differs: h2 is slot 1 on the other side",
                                     "order differs: h16 is slot 0 on the other side"]
    assert result.suggestion is None and "no id list" in result.unfixable


def test_post_norm_state_in_training_is_not_capturable(tmp_path):
    # An HF-style dump whose third slot is output_hidden_states[N]: post-final-norm.
    draft = sglang_draft(tmp_path, ids=[1, 15, 31])
    result = check(training("h2,h16,final,h32", draft), *read_inputs(LLAMA, draft), verify=False)
    assert result.verdict == "drift"
    assert result.diff.slots[2].verdict == "missing"
    assert result.suggestion is None and "final" in result.unfixable


@pytest.mark.parametrize("where", ["missing", "top_level"])
def test_silent_default_fallback_is_caught(tmp_path, where):
    ids = {"top_level_ids": [2, 16, 29]} if where == "top_level" else {}
    draft = sglang_draft(tmp_path, **ids)
    result = check(training("h3,h17,h30,h32", draft), *read_inputs(LLAMA, draft), verify=False)
    assert result.verdict == "drift"
    assert any("fell back to its default layers" in n for n in result.notes)
    assert result.suggestion.eagle_aux_hidden_state_layer_ids == [2, 16, 29]


def test_graph_flag_dropped_by_the_engine(tmp_path):
    draft = served(tmp_path, [1, 15, 28], norm_before_residual=True)
    result = check(training("h2,h16,h29,h32", draft, TINY_TARGET), *read_inputs(TINY, draft), verify=False)
    assert result.verdict == "drift"
    fields = {d.where: (d.training, d.serving) for d in result.differences if d.kind == "field"}
    assert fields["graph.norm_before_residual"] == (True, False)


@pytest.mark.parametrize("d2t", ["absolute", "missing"])
def test_d2t_absolute_or_missing(tmp_path, d2t):
    draft = served(tmp_path, [1, 15, 28], d2t=d2t)
    result = check(training("h2,h16,h29,h32", draft, TINY_TARGET), *read_inputs(TINY, draft), verify=False)
    kinds = {d.kind: d for d in result.differences}
    if d2t == "absolute":  # read as offsets, the absolute table maps past the target's vocabulary
        assert result.verdict == "unservable" and "d2t table maps to target id" in result.unservable
        assert (kinds["field"].where, kinds["field"].training, kinds["field"].serving) == \
            ("vocab.d2t", "absolute", "offsets")
    else:
        assert result.verdict == "drift" and "d2t_missing" in kinds


def test_changed_slicing_in_the_training_data_path_fails_the_lock(inject_drift):
    inject_drift("tests.drift.training_slice_from_one")
    result = check_lock(LLAMA_LOCK, verify=False)
    assert result.verdict == "drift"
    locks = [d for d in result.differences if d.kind == "lock"]
    assert locks and "now trains slot 0 on h16" in locks[0].message


def test_changed_plus_one_rule_in_the_engine_fails_the_lock(inject_drift):
    inject_drift("tests.drift.serving_no_plus_one")
    result = check_lock(LLAMA_LOCK, verify=False)
    assert result.verdict == "drift"
    assert slot_whys(result) == ["off by one layer (-1)"] * 3


def test_a_drift_injected_around_the_cli_reaches_its_children(inject_drift):
    """The override lives in the environment: `parity check` run as a command (its probes are its
    children) fails the lock the same way, with the slot table."""
    inject_drift("tests.drift.serving_no_plus_one")
    proc = subprocess.run([sys.executable, "-m", "parity", "check", "--contract", str(LLAMA_LOCK), "--no-verify"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert proc.stdout.startswith("parity check: DRIFT") and "off by one layer (-1)" in proc.stdout, proc.stdout
