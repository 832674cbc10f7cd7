"""Which config keys vLLM reads while it builds the draft (issue 36 item 2, docs/built-draft.md
"Config keys read"): its config classes (`SpeculativeConfig` building the draft's `ModelConfig`,
whose code reads the target's config too: those reads are left out) and its draft class's
constructor, recorded on the installed 0.33 and 0.34; and, slow, an edit of vLLM's installed
draft class so it stops reading `target_hidden_size`, followed (DRIFT naming it)."""

from __future__ import annotations

import json
import sys

import pytest

from parity.extract.config_reads import recording

from .helpers import LLAMA, ROOT, edit_in_shadow, run_parity as parity, shadow_release

LLAMA_DRAFT = ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3"
LAYOUT = ("--dump-layout", "h2,h16,h29,h32")
SITE = "lib/python3.11/site-packages"


def test_reads_of_a_skipped_config_do_not_count_even_when_named_after_the_block_started():
    """vLLM's ModelConfig code reads the target's config and the draft's alike: the target's
    objects are named once its config is built, inside the block, and their reads are left out."""
    from transformers import LlamaConfig

    draft, skip = LlamaConfig(rms_norm_eps=1e-5), []
    with recording(set(), skip) as reads:
        target = LlamaConfig(rms_norm_eps=1e-6)
        _ = target.rms_norm_eps, target.vocab_size
        _ = draft.hidden_size
        skip.append(target)
    assert reads == {"hidden_size"}


# -- end to end on the installed vLLM releases (slow) --------------------------------------------

def _check(release: str, *args: str, **kw):
    return parity("check", "--engine", "vllm", "--vllm", release, "--target-config", str(LLAMA),
                  "--draft", str(LLAMA_DRAFT), *LAYOUT, "--no-verify", *args, **kw)


# The bundled draft's 17 keys: vLLM reads every one but tie_word_embeddings (its Eagle3 class builds
# its own head and never ties it), which its config class takes as false without the key.
VLLM_READS = ["architectures", "draft_vocab_size", "eagle_config", "hidden_act", "hidden_size", "intermediate_size",
              "max_position_embeddings", "model_type", "num_attention_heads", "num_hidden_layers",
              "num_key_value_heads", "rms_norm_eps", "rope_theta", "target_hidden_size", "torch_dtype", "vocab_size"]


@pytest.mark.slow
@pytest.mark.parametrize("release", ["0.34.0", "0.33.0"])
def test_the_bundled_draft_shows_what_vllm_reads(release):
    """0.33's verdict is a drift on the ids its V1 runner reads (tests/test_built_draft_vllm_specforge.py),
    never on a config key."""
    proc = _check(release, "--json")
    assert proc.returncode == (0 if release == "0.34.0" else 1), proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    served = result["serving"]["draft"]
    assert served["config_keys_read"] == VLLM_READS
    assert served["config_keys_unread"] == ["tie_word_embeddings"]
    assert "tie_word_embeddings" in served["config_keys_default"]
    assert not [d for d in result["differences"] if d["where"].startswith("config.")]
    if release == "0.34.0":
        text = _check(release).stdout
        assert ("config keys: vllm 0.34.0 reads 16 of the 17 keys the served config sets while building the draft"
                in text), text


VLLM_EAGLE3 = f"{SITE}/vllm/model_executor/models/llama_eagle3.py"
# The edit: vLLM's draft class builds its fc from hidden_size, never reading target_hidden_size.
# The bundled draft's two widths are equal, so no built field changes: only the reads show it.
READS_TARGET_WIDTH = """getattr(
                self.config, "target_hidden_size", self.config.hidden_size
            )"""


@pytest.mark.slow
def test_a_vllm_that_stops_reading_a_key_training_read_is_a_drift_naming_it(tmp_path):
    shadow, original, env = shadow_release(tmp_path, "vllm", "0.34.0",
                                           {VLLM_EAGLE3: (READS_TARGET_WIDTH, READS_TARGET_WIDTH)})
    before = _check("0.34.0", python=sys.executable, env=env)
    assert before.returncode == 0, before.stdout + before.stderr[-2000:]
    assert "config keys: vllm 0.34.0 reads 16 of the 17 keys" in before.stdout, before.stdout
    edit_in_shadow(shadow, VLLM_EAGLE3, READS_TARGET_WIDTH, "self.config.hidden_size  # the edit")
    after = _check("0.34.0", "--json", python=sys.executable, env=env)
    assert after.returncode == 1, after.stdout[-3000:] + after.stderr[-2000:]
    result = json.loads(after.stdout)
    assert [d["where"] for d in result["differences"]] == ["config.target_hidden_size"]
    assert result["differences"][0]["message"].startswith(
        "vllm 0.34.0 never reads `target_hidden_size`, which speculators 0.9.0 built the draft with")
    assert not result["diff"]["fields"]  # no built field changes: only the reads show it
    text = _check("0.34.0", python=sys.executable, env=env).stdout
    row = next(line for line in text.splitlines() if line.strip().startswith("target_hidden_size"))
    assert "never read" in row and "MISMATCH: training built the draft with it" in row, text
    assert "self.config.hidden_size  # the edit" not in (original / VLLM_EAGLE3).read_text()  # untouched


@pytest.mark.slow
def test_a_key_specforge_sets_itself_and_vllm_never_reads_is_no_drift(tmp_path):
    """tie_word_embeddings true: SpecForge sets it false before building (whatever reads the
    attribute afterwards, the written value never reached its draft), vLLM never reads it; both
    build an untied head, so neither side read it: a note, PARITY."""
    draft = tmp_path / "draft"
    draft.mkdir()
    config = json.loads((LLAMA_DRAFT / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": True}))
    proc = parity("check", "--trainer", "specforge", "--engine", "vllm", "--vllm", "0.34.0", "--target-config",
                  str(LLAMA), "--draft", str(draft), "--no-verify", "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert "tie_word_embeddings" in result["training"]["draft"]["config_keys_unread"]
    assert result["serving"]["draft"]["config_keys_unread"] == ["tie_word_embeddings"]
    assert not result["differences"] and not result["diff"]["fields"]
