"""The built-draft contract (issue 36) for vLLM serving and SpecForge training: each builds the
draft with its own code (vLLM: its get_config and the Eagle3LlamaForCausalLM it builds at tiny
widths; SpecForge: resolve_draft_config and AutoDraftModel.from_config), compared field by field
with the other side, as tests/test_built_draft_cases.py does for speculators and SGLang."""

from __future__ import annotations

import json
import sys

import pytest

from .helpers import LLAMA, ROOT, edit_in_shadow, shadow_release
from .test_built_draft_cases import LAYOUT, LLAMA_DRAFT, SITE, llama_draft, parity

pytestmark = pytest.mark.slow

VLLM = ("--engine", "vllm", "--vllm", "0.34.0")
SPECFORGE_DRAFT = ROOT / "fixtures" / "drafts" / "specforge-llama3-8b-eagle3"


@pytest.mark.parametrize("release", ["0.34.0", "0.33.0"])
def test_the_bundled_draft_builds_the_same_under_vllm_as_under_speculators(release):
    """0.33 has two runners; both build the draft with the class the registry gives its config
    (V1's EagleProposer.load_model, V2's load_eagle_model), so one build is read (its verdict is a
    drift on the ids the V1 runner reads, not on the built draft)."""
    proc = parity("check", "--engine", "vllm", "--vllm", release, "--target-config", str(LLAMA),
                  "--draft", str(LLAMA_DRAFT), *LAYOUT, "--no-verify")
    assert proc.returncode == (0 if release == "0.34.0" else 1), proc.stdout + proc.stderr[-2000:]
    assert "the same in all 16 fields" in proc.stdout, proc.stdout
    assert f"served   vllm {release} Eagle3LlamaForCausalLM, from the served config.json" in proc.stdout


def test_vllm_s_built_draft_holds_the_real_sizes_and_the_target_s_dtype(tmp_path):
    draft = llama_draft(tmp_path, torch_dtype="float16")
    proc = parity("check", *VLLM, "--target-config", str(LLAMA), "--draft", str(draft), *LAYOUT, "--json",
                  "--no-verify")
    assert proc.returncode == 0, proc.stderr[-2000:]
    served = json.loads(proc.stdout)["serving"]["draft"]
    assert (served["vocab_size"], served["draft_vocab_size"], served["head_dim"]) == (128256, 32000, 128)
    assert served["rope_frequencies"] == pytest.approx([500000.0 ** (-2 * i / 16) for i in range(8)], rel=1e-5)
    # SpeculativeConfig builds the draft's ModelConfig with dtype=target_model_config.dtype: the
    # target's bfloat16, whatever the draft's torch_dtype says (SGLang reads the draft's float16)
    assert served["dtype"] == "bfloat16"
    assert served["lm_head_tied"] is False and served["max_token_id"] is None  # no weights: no d2t read


# The issue's cases under vLLM 0.34, as test_built_draft_cases.CASES reads them under SGLang.
VLLM_CASES = {
    # as under SGLang: vLLM's get_config reads the config's vocabulary, speculators' converter the target's
    "vocab_size_of_another_tokenizer": ({"vocab_size": 151936}, 1, "vocab_size"),
    "draft_vocab_past_the_target": ({"draft_vocab_size": 200000}, 1, "lm_head has 200000 rows"),
    # NOT as under SGLang: vLLM's Eagle3LlamaForCausalLM builds its own ParallelLMHead and never ties
    # it to the draft's embedding (SGLang's class ties it when tie_word_embeddings is set); neither
    # does speculators, so both build the same draft
    "tie_word_embeddings": ({"tie_word_embeddings": True}, 0, "the same in all 16 fields"),
    "rope_scaling_added": ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                             "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}},
                           0, "the same in all 16 fields"),
}


@pytest.mark.parametrize("name", VLLM_CASES)
def test_the_issues_cases_under_vllm(name, tmp_path):
    changes, code, said = VLLM_CASES[name]
    proc = parity("check", *VLLM, "--target-config", str(LLAMA), "--draft", str(llama_draft(tmp_path, **changes)),
                  *LAYOUT, "--no-verify")
    assert proc.returncode == code, proc.stdout + proc.stderr[-2000:]
    assert said in proc.stdout, proc.stdout
    if name == "draft_vocab_past_the_target":  # issue 48 item 5: no ids fix for what no id list mends
        assert not [line for line in proc.stdout.splitlines() if line.startswith("  FIX")], proc.stdout
        assert "NO FIX with the installed engine: no config edit of the ids mends it" in proc.stdout, proc.stdout
    if code == 1 and "lm_head has" not in said:
        row = next(line for line in proc.stdout.splitlines() if line.strip().startswith(said))
        assert "MISMATCH: the math differs" in row
    if name == "vocab_size_of_another_tokenizer":
        # vLLM's own target vocabulary (ModelConfig.get_vocab_size(): the target config's) differs
        # from the one the draft config declares, the vocabulary mapping's difference beside the
        # built draft's (SGLang reads both from the draft config: its headline names the build)
        assert "vocab.target_vocab_size: trained with 151936, served with 128256" in proc.stdout


def test_specforge_builds_its_llama3_draft_as_sglang_serves_it():
    proc = parity("check", "--trainer", "specforge", "--specforge", "0.2.0", "--target-config", str(LLAMA), "--draft", str(SPECFORGE_DRAFT),
                  "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    trained, served = result["training"]["draft"], result["serving"]["draft"]
    assert trained["built_by"] == "specforge 0.2.0 LlamaForCausalLMEagle3"
    assert served["built_by"].startswith("sglang ")
    assert not result["diff"]["fields"]
    for field in ("vocab_size", "draft_vocab_size", "hidden_size", "head_dim", "num_key_value_heads", "hidden_act",
                  "rms_norm_eps", "lm_head_tied", "rope_scale", "max_position_embeddings", "rope_theta"):
        assert trained[field] == served[field], field
    # SpecForge trains the published draft with rope 500000 over 2048 positions, at bfloat16
    assert (trained["rope_theta"], trained["max_position_embeddings"], trained["dtype"]) == (500000.0, 2048,
                                                                                             "bfloat16")
    assert trained["rope_frequencies"] == pytest.approx(served["rope_frequencies"], rel=1e-5)
    # issue 48: its published pad_token_id 0, which SpecForge reads for its embedding's padding row and
    # SGLang never reads: the draft SpecForge builds computes the same without it (decided by running
    # it), a note, not a drift (exit 1 before: "MISMATCH: training built the draft with it")
    assert "pad_token_id" in trained["config_keys_read"] and "pad_token_id" in served["config_keys_unread"]
    assert trained["config_keys_training_only"] == ["pad_token_id"] and not result["differences"]
    text = parity("check", "--trainer", "specforge", "--specforge", "0.2.0", "--target-config", str(LLAMA),
                  "--draft", str(SPECFORGE_DRAFT))
    assert text.returncode == 0, text.stdout + text.stderr[-2000:]  # the same extractions: the reply cache's
    row = next(line for line in text.stdout.splitlines() if line.strip().startswith("pad_token_id"))
    assert row.split()[1:4] == ["read", "never", "read"], text.stdout
    assert "note: read by training only: the draft served computes the same without it" in row, text.stdout


def test_specforge_never_ties_the_head_so_sglang_s_tied_build_is_a_drift(tmp_path):
    """SpecForge's load_draft_config_source sets tie_word_embeddings False whatever the config
    says; SGLang's class honours it: the head the draft was trained with is not the one served."""
    draft = tmp_path / "draft"
    draft.mkdir()
    config = json.loads((SPECFORGE_DRAFT / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": True}))
    proc = parity("check", "--trainer", "specforge", "--specforge", "0.2.0", "--target-config", str(LLAMA), "--draft", str(draft),
                  "--json", "--no-verify")
    assert proc.returncode == 1, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert [d["field"] for d in result["diff"]["fields"]] == ["draft.lm_head_tied"]
    assert result["training"]["draft"]["lm_head_tied"] is False and result["serving"]["draft"]["lm_head_tied"] is True


def test_an_edit_of_vllm_s_installed_draft_class_is_followed(tmp_path):
    """vLLM 0.34's draft decoder layer edited (its first RMSNorm's eps) in a copy of the
    environment: the served built draft follows, a drift naming rms_norm_eps."""
    file = f"{SITE}/vllm/model_executor/models/llama_eagle3.py"
    old = "        self.hidden_norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)\n"
    new = old + "        self.input_layernorm.variance_epsilon = 1e-3  # the edit\n"
    shadow, original, env = shadow_release(tmp_path, "vllm", "0.34.0", {file: (old, old)})
    args = ("check", *VLLM, "--target-config", str(LLAMA), "--draft", str(LLAMA_DRAFT), *LAYOUT, "--json",
            "--no-verify")
    before = parity(*args, python=sys.executable, env=env)
    assert before.returncode == 0, before.stderr[-2000:]
    edit_in_shadow(shadow, file, old, new)
    after = parity(*args, python=sys.executable, env=env)
    assert after.returncode == 1, after.stdout[-3000:] + after.stderr[-2000:]
    result = json.loads(after.stdout)
    assert [d["field"] for d in result["diff"]["fields"]] == ["draft.rms_norm_eps"]
    assert json.loads(before.stdout)["serving"]["draft"]["rms_norm_eps"] == 1e-5
    assert result["serving"]["draft"]["rms_norm_eps"] == 1e-3
    assert old + "        self.input" not in (original / file).read_text()  # the original is untouched
