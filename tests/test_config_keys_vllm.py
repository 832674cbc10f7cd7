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


def _converted(tmp_path, copies: bool) -> dict:
    """A speculators-format config read as vLLM reads one (the dict from `get_config_dict`, a
    converter starting from the layer's keys and copying a top-level flag into them, a config
    class built from the result, the draft reading two attributes), on transformers' own classes;
    `copies`: whether the converter copies norm_before_residual (the drift: it does not)."""
    from transformers import LlamaConfig, PretrainedConfig

    from parity.extract.config_reads import converted_fields, reading_dicts

    raw = {"speculators_model_type": "eagle3", "norm_before_residual": True, "speculators_version": "0.9.0",
           "transformer_layer_config": {"model_type": "llama", "hidden_size": 64, "initializer_range": 0.1}}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    other = tmp_path / "target"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 256}))

    def convert(config: dict) -> dict:
        layer = config.get("transformer_layer_config", {})
        if config["speculators_model_type"] == "eagle3" and copies:
            layer["norm_before_residual"] = config.get("norm_before_residual", False)
        return layer

    def build(config: dict):
        return LlamaConfig(**convert(config))

    reads, dict_reads = set(), {}
    with recording(reads), reading_dicts(str(tmp_path), dict_reads):
        target, _ = PretrainedConfig.get_config_dict(str(other))
        _ = target.get("vocab_size")  # another folder's config: handed out as loaded, not recorded
        built = build(PretrainedConfig.get_config_dict(str(tmp_path))[0])
        _ = built.hidden_size, getattr(built, "norm_before_residual", False)
    assert type(target) is dict
    return converted_fields(built, raw, "transformer_layer_config", convert, build, reads, dict_reads)


def test_a_config_converted_as_a_dict_counts_a_copied_key_where_its_copy_is_read(tmp_path):
    fields = _converted(tmp_path, copies=True)
    assert fields["config_keys_read"] == ["hidden_size", "norm_before_residual", "speculators_model_type",
                                          "transformer_layer_config"]
    assert fields["config_keys_unread"] == ["initializer_range", "model_type", "speculators_version"]
    assert "norm_before_residual" not in fields["config_keys_default"]  # True: the converter's default is False


def test_a_converter_that_drops_a_key_leaves_it_unread_and_off_any_default(tmp_path):
    fields = _converted(tmp_path, copies=False)
    assert "norm_before_residual" in fields["config_keys_unread"]
    assert "norm_before_residual" not in fields["config_keys_default"]


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
    proc = parity("check", "--trainer", "specforge", "--specforge", "0.2.0", "--engine", "vllm", "--vllm", "0.34.0", "--target-config",
                  str(LLAMA), "--draft", str(draft), "--no-verify", "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert "tie_word_embeddings" in result["training"]["draft"]["config_keys_unread"]
    assert result["serving"]["draft"]["config_keys_unread"] == ["tie_word_embeddings"]
    assert not result["differences"] and not result["diff"]["fields"]


# -- a speculators-format draft (served by vLLM as speculators writes it) ------------------------

ALGOS = f"{SITE}/vllm/transformers_utils/configs/speculators/algos.py"
# The edit: vLLM's EAGLE-3 converter stops copying the top-level norm_before_residual into the config
# it builds the draft from (the draft class then takes its own default)
COPIES_NORM_BEFORE_RESIDUAL = '''pre_trained_config["norm_before_residual"] = config_dict.get(
        "norm_before_residual", True
    )'''


def speculators_format_draft(folder):
    """The config speculators writes for an EAGLE-3 draft (`Eagle3DraftModel.save_pretrained`, run on
    a seeded tiny draft with norm_before_residual on) at the bundled Llama-3.1-8B draft's widths, ids
    and vocabulary; config only, as the bundled draft is."""
    from parity.fixtures import DraftRecipe, speculators_draft

    config = json.loads((speculators_draft(DraftRecipe(norm_before_residual=True)) / "config.json").read_text())
    config.update(draft_vocab_size=32000, target_hidden_size=4096, eagle_aux_hidden_state_layer_ids=[1, 15, 28],
                  dtype="bfloat16")
    config["transformer_layer_config"].update(
        hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
        max_position_embeddings=131072, vocab_size=128256, rope_parameters={"rope_theta": 500000.0, "rope_type": "default"})
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


def _check_speculators_format(draft, *args, **kw):
    return parity("check", "--engine", "vllm", "--vllm", "0.34.0", "--target-config", str(LLAMA), "--draft", str(draft),
                  "--dump-layout", "h1,h15,h28,h32", "--no-verify", *args, **kw)


# What vLLM 0.34 reads of it: the format (speculators_config, speculators_model_type) and the layer
# (transformer_layer_config, its model_type) as its converter reads the dict; the EAGLE-3 keys it copies
# and the layer's keys where its config classes, draft class and runner read them
SPECULATORS_FORMAT_READS = [
    "attention_bias", "draft_vocab_size", "eagle_aux_hidden_state_layer_ids", "fc_norm", "head_dim", "hidden_act",
    "hidden_size", "intermediate_size", "max_position_embeddings", "mlp_bias", "model_type", "norm_before_fc",
    "norm_before_residual", "norm_output", "num_attention_heads", "num_hidden_layers", "num_key_value_heads",
    "rms_norm_eps", "rope_parameters", "speculators_config", "speculators_model_type", "target_hidden_size",
    "transformer_layer_config", "vocab_size"]


@pytest.mark.slow
def test_vllm_s_reads_of_a_speculators_format_draft_are_recorded_and_an_edit_that_drops_one_is_a_drift(tmp_path):
    draft = speculators_format_draft(tmp_path / "draft")
    shadow, original, env = shadow_release(tmp_path, "vllm", "0.34.0",
                                           {ALGOS: (COPIES_NORM_BEFORE_RESIDUAL, COPIES_NORM_BEFORE_RESIDUAL)})
    before = _check_speculators_format(draft, "--json", python=sys.executable, env=env)
    assert before.returncode == 0, before.stdout[-3000:] + before.stderr[-2000:]
    result = json.loads(before.stdout)
    served = result["serving"]["draft"]
    assert served["config_keys_read"] == SPECULATORS_FORMAT_READS
    assert "norm_before_residual" in result["training"]["draft"]["config_keys_read"]
    assert not result["differences"]
    edit_in_shadow(shadow, ALGOS, COPIES_NORM_BEFORE_RESIDUAL, "pass  # the edit")
    after = _check_speculators_format(draft, "--json", python=sys.executable, env=env)
    assert after.returncode == 1, after.stdout[-3000:] + after.stderr[-2000:]
    result = json.loads(after.stdout)
    assert "norm_before_residual" in result["serving"]["draft"]["config_keys_unread"]
    unread = [d for d in result["differences"] if d["where"] == "config.norm_before_residual"]
    assert unread and unread[0]["message"].startswith(
        "vllm 0.34.0 never reads `norm_before_residual`, which speculators 0.9.0 built the draft with"), result["differences"]
    assert "pass  # the edit" not in (original / ALGOS).read_text()  # the installed release untouched
