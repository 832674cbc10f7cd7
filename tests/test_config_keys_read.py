"""Which config keys each side reads while it builds the draft (issue 36 item 2,
docs/built-draft.md "Config keys read"): the recorder on transformers' real config classes, the
decision and the report on contracts, and, slow, the bundled Llama-3.1-8B draft under the
installed SGLang and speculators, with an edit of SGLang's installed draft class followed."""

from __future__ import annotations

import json
import os

import pytest
import torch

from parity.contract import BuiltDraft
from parity.extract.config_reads import ReadingDict, read_fields, recording
from parity.report import render_check
from parity.verdict import decide

from .helpers import LLAMA, ROOT, run_parity as parity, shadow_env, shadow_run_env
from .test_rendering import SERVED_BUILT, TRAINED_BUILT, check_result, serving, training

LLAMA_DRAFT = ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3"
LAYOUT = ("--dump-layout", "h2,h16,h29,h32")


# -- the recorder, on transformers' own config classes -------------------------------------

def test_reads_are_recorded_and_spelled_as_the_config_json_spells_them():
    """rope_theta is kept in rope_parameters and torch_dtype as dtype by transformers 5: a read
    of the attribute that holds it counts as a read of the key; the config's own validation,
    which reads every field, does not."""
    from transformers import LlamaConfig

    raw = json.loads((LLAMA_DRAFT / "config.json").read_text())
    with recording(set()) as reads:
        config = LlamaConfig.from_dict(dict(raw))
        _ = config.hidden_size, config.rope_parameters  # one line reading a few keys: each used
        _ = config.dtype, getattr(config, "fc_norm", None)
    got = read_fields(config, raw, reads)
    assert got["config_keys_read"] == ["hidden_size", "rope_theta", "torch_dtype"]
    assert "rms_norm_eps" in got["config_keys_unread"] and "vocab_size" in got["config_keys_unread"]
    assert "fc_norm" not in got["config_keys_unread"]  # not set: neither read nor unread
    assert "tie_word_embeddings" in got["config_keys_default"] and "rms_norm_eps" not in got["config_keys_default"]


def test_a_key_read_by_its_old_name_through_the_classes_property_is_read():
    """transformers keeps torch_dtype as dtype and still answers to `config.torch_dtype` (a
    property returning dtype): vLLM 0.11's `_find_dtype` reads it so. The read counts."""
    from transformers import LlamaConfig

    raw = json.loads((LLAMA_DRAFT / "config.json").read_text())
    with recording(set()) as reads:
        config = LlamaConfig.from_dict(dict(raw))
        _ = getattr(config, "torch_dtype", None)
    assert read_fields(config, raw, reads)["config_keys_read"] == ["torch_dtype"]


def test_an_alias_is_mapped_through_the_classes_own_attribute_map():
    from transformers import GPT2Config

    raw = {"n_head": 4, "n_embd": 64, "n_layer": 2, "vocab_size": 100}
    with recording(set()) as reads:
        config = GPT2Config.from_dict(dict(raw))
        _ = config.num_attention_heads  # GPT2Config.attribute_map: num_attention_heads -> n_head
    assert read_fields(config, raw, reads)["config_keys_read"] == ["n_head"]


def test_a_line_that_goes_over_the_whole_config_uses_no_key():
    """A copy of every field (SGLang's get_config copies the text config's fields with one
    `hasattr` each) reads each key and uses none."""
    from transformers import LlamaConfig

    config = LlamaConfig(hidden_size=64, num_attention_heads=4, rms_norm_eps=1e-5)
    with recording(set()) as reads:
        copied = {k: getattr(config, k) for k in ("hidden_size", "num_attention_heads", "rms_norm_eps", "vocab_size")}
        _ = config.rms_norm_eps
    assert copied and reads == {"rms_norm_eps"}


def test_a_dict_config_records_its_reads():
    reads: set[str] = set()
    d = ReadingDict({"a": 1, "b": 2, "c": 3}, reads)
    assert d["a"] == 1 and d.get("b") == 2 and "z" not in d
    assert reads == {"a", "b", "z"}
    assert read_fields(None, {"a": 1, "b": 2, "c": 3}, reads) == {"config_keys_read": ["a", "b"],
                                                                   "config_keys_unread": ["c"],
                                                                   "config_keys_default": None}


def test_a_key_the_side_set_itself_before_building_is_unread_whoever_reads_it():
    """SpecForge sets tie_word_embeddings false in the dict it builds its config from, whatever
    the config says: the attribute is read afterwards (transformers' tying), the written value
    never reached the draft."""
    from transformers import LlamaConfig

    from parity.extract.config_reads import replaced

    written = {"hidden_size": 64, "num_attention_heads": 4, "tie_word_embeddings": True, "rope_theta": 10000}
    with recording(set()) as reads:
        config = LlamaConfig.from_dict({**written, "tie_word_embeddings": False})
        _ = config.tie_word_embeddings, config.hidden_size
    assert replaced(config, written) == {"tie_word_embeddings"}
    got = read_fields(config, written, reads, overridden=replaced(config, written))
    assert got["config_keys_read"] == ["hidden_size"] and "tie_word_embeddings" in got["config_keys_unread"]


def test_the_recorder_leaves_the_config_class_as_it_was():
    from transformers import PretrainedConfig

    before = PretrainedConfig.__dict__["__getattribute__"]
    with pytest.raises(RuntimeError), recording(set()):
        raise RuntimeError
    assert PretrainedConfig.__dict__["__getattribute__"] is before


# -- read for training only, decided by running (issue 48, item 1) ---------------------------------

TINY_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
              "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": 256,
              "rms_norm_eps": 1e-5, "tie_word_embeddings": False}


def _llama(config: dict):
    """transformers' own Llama at tiny widths, from a config dict (the side's build)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig.from_dict(dict(config), attn_implementation="sdpa"))


def _llama_forward(model, gen, positions):
    from parity.extract.built import every_token

    return model(input_ids=every_token(256, positions, gen)).logits


def test_a_key_that_changes_nothing_the_built_model_computes_is_read_for_training_only():
    """pad_token_id sets the embedding's padding row (zeroed at initialisation, no gradient): with
    the same weights the model computes exactly the same without it; so does attention dropout
    in eval and the initialiser's range. rope_theta changes the rotary frequencies, hidden_act the
    MLP, hidden_size every shape (the weights do not load): they build the draft."""
    from parity.extract.built import training_only_keys

    config = {**TINY_LLAMA, "pad_token_id": 0, "attention_dropout": 0.1, "initializer_range": 0.5,
              "rope_theta": 500000.0, "hidden_act": "gelu", "rms_norm_eps": 1e-3}
    keys = ["attention_dropout", "hidden_act", "hidden_size", "initializer_range", "pad_token_id", "rms_norm_eps",
            "rope_theta"]
    got = training_only_keys(_llama, _llama_forward, config, config, keys, 256)
    assert got == ("attention_dropout", "initializer_range", "pad_token_id")


def test_a_key_the_forward_cannot_show_is_never_read_for_training_only():
    """A window or context length past the positions run, a width the shrink changed (the real
    value was never built), a key the shrink dropped, and a key without which the side's build
    refuses: each is left as read (a mismatch where the engine never reads it)."""
    from parity.extract.built import training_only_keys

    real = {**TINY_LLAMA, "max_position_embeddings": 131072, "head_dim": 128, "pad_token_id": 128004,
            "quantization_config": {"quant_method": "fp8"}, "attention_dropout": 0.1}
    tiny = {**TINY_LLAMA, "max_position_embeddings": 131072, "head_dim": 16, "pad_token_id": 254,
            "attention_dropout": 0.1}

    def refusing(config: dict):
        if "attention_dropout" not in config:
            raise ValueError("attention_dropout is required")
        return _llama(config)

    keys = ["attention_dropout", "head_dim", "max_position_embeddings", "pad_token_id", "quantization_config"]
    # the token id the shrink moved into the tiny vocabulary is decided at its tiny value
    assert training_only_keys(_llama, _llama_forward, real, tiny, keys, 256) == ("attention_dropout", "pad_token_id")
    assert training_only_keys(refusing, _llama_forward, real, tiny, keys, 256) == ("pad_token_id",)
    # a draft that does not build as written: nothing decided
    assert training_only_keys(lambda c: refusing({}), _llama_forward, real, tiny, keys, 256) is None


def test_a_key_that_turns_on_a_window_past_the_vocabulary_matters():
    """Qwen2's use_sliding_window turns on a window of 300 positions: over the 256 tokens of the
    tiny vocabulary nothing differs, past 300 positions the attention does. The second forward
    runs one position past the largest integer the config holds, so the key builds the draft."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from parity.extract.built import training_only_keys

    config = {**TINY_LLAMA, "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "use_sliding_window": True,
              "sliding_window": 300, "max_window_layers": 0, "attention_dropout": 0.1}

    def build(c: dict):
        return Qwen2ForCausalLM(Qwen2Config.from_dict(dict(c), attn_implementation="sdpa"))

    keys = ["attention_dropout", "max_window_layers", "use_sliding_window"]
    assert training_only_keys(build, _llama_forward, config, config, keys, 256) == ("attention_dropout",)


def test_a_nested_key_is_removed_where_it_sits():
    """speculators' transformer_layer_config: its keys are spelled bare and removed inside it."""
    from parity.extract.built import training_only_keys

    config = {"transformer_layer_config": {**TINY_LLAMA, "pad_token_id": 3, "rope_theta": 500000.0}, "fc_norm": False}
    got = training_only_keys(lambda c: _llama(c["transformer_layer_config"]), _llama_forward, config, config,
                             ["pad_token_id", "rope_theta"], 256, nested=("transformer_layer_config",))
    assert got == ("pad_token_id",)


def test_the_shrink_keeps_a_token_id_inside_the_tiny_vocabulary():
    """So the tiny build with pad_token_id can run at all (nn.Embedding refuses a padding row past
    its rows): kept where it already is inside, moved inside where it is not, at every level."""
    from parity.extract.shrink import shrink_draft_config

    real = json.loads((ROOT / "fixtures" / "drafts" / "specforge-llama3-8b-eagle3" / "config.json").read_text())
    assert shrink_draft_config({**real, "pad_token_id": 0})["pad_token_id"] == 0
    tiny = shrink_draft_config({**real, "pad_token_id": 128004})
    assert 0 <= tiny["pad_token_id"] < tiny["vocab_size"] and tiny["bos_token_id"] < tiny["vocab_size"]
    nested = shrink_draft_config({"transformer_layer_config": {**TINY_LLAMA, "vocab_size": 128256,
                                                               "pad_token_id": 128004}})
    assert nested["transformer_layer_config"]["pad_token_id"] < nested["transformer_layer_config"]["vocab_size"]


# -- the decision and the report ---------------------------------------------------------------

KEYS = ("fc_norm", "hidden_size", "rms_norm_eps")


def _with_keys(trained_read, served_read, served_unread):
    t = training().model_copy(update={"draft": TRAINED_BUILT.model_copy(update={
        "config_keys_read": tuple(trained_read), "config_keys_unread": ()})})
    s = serving(("h0", "h3", "h31"), ids=(0, 3, 31)).model_copy(update={"draft": SERVED_BUILT.model_copy(update={
        "config_keys_read": tuple(served_read), "config_keys_unread": tuple(served_unread)})})
    return t, s


def test_a_key_training_read_and_the_engine_never_reads_is_a_drift_naming_it_and_the_release():
    t, s = _with_keys(KEYS, ("hidden_size", "rms_norm_eps"), ("fc_norm",))
    verdict, _, differences, _ = decide(t, s)
    assert verdict == "drift"
    assert [(d.kind, d.where) for d in differences] == [("config_key_unread", "config.fc_norm")]
    assert differences[0].message.startswith("sglang 0.5.23 never reads `fc_norm`, which speculators 0.9.0 built "
                                             "the draft with")
    report = render_check(check_result(t, s))
    assert "DRIFT: sglang 0.5.23 builds the draft otherwise than training did." in report
    assert "fc_norm     read     never read  MISMATCH: training built the draft with it" in report, report
    assert "Other differences" not in report


def test_a_key_neither_side_reads_is_a_note_not_a_drift():
    t, s = _with_keys(("hidden_size", "rms_norm_eps"), ("hidden_size", "rms_norm_eps"), ("fc_norm",))
    result = check_result(t, s)
    assert result.verdict == "parity" and not result.differences
    assert "fc_norm     never read  never read  note: neither side reads it" in render_check(result)


def test_a_key_at_its_default_is_a_note_not_a_drift():
    """An exported speculators checkpoint writes `mlp_bias: false`: speculators' transformers
    layers read it, SGLang's Llama MLP never does (no bias), and its config class takes false
    without the key: the engine builds as the key says."""
    t, s = _with_keys(("hidden_size", "mlp_bias"), ("hidden_size",), ("mlp_bias",))
    s = s.model_copy(update={"draft": s.draft.model_copy(update={"config_keys_default": ("mlp_bias",)})})
    result = check_result(t, s)
    assert result.verdict == "parity" and not result.differences
    assert "mlp_bias    read     never read  note: at its default" in render_check(result), render_check(result)


def test_a_key_at_the_trainers_default_is_a_note_and_off_it_a_drift():
    """speculators writes `norm_before_fc: false`, its own default (its converter maps the same
    config without the key), and SGLang 0.4.8 never reads it: the trained draft is what the key's
    absence builds, a note. The same key off the trainer's default is a drift."""
    t, s = _with_keys(("hidden_size", "norm_before_fc"), ("hidden_size",), ("norm_before_fc",))
    at = t.model_copy(update={"draft": t.draft.model_copy(update={"config_keys_default": ("norm_before_fc",)})})
    result = check_result(at, s)
    assert result.verdict == "parity" and not result.differences
    assert "norm_before_fc  read     never read  note: at its default" in render_check(result), render_check(result)
    assert check_result(t, s).verdict == "drift"


def test_every_key_read_by_the_engine_is_one_line():
    t, s = _with_keys(KEYS, KEYS, ())
    result = check_result(t, s)
    assert result.verdict == "parity"
    assert "config keys: sglang 0.5.23 reads 3 of the 3 keys the served config sets while building the draft" in (
        render_check(result))


def test_a_contract_without_keys_read_loads_and_is_not_compared():
    """A lock written before the field existed reads back, and decides as before."""
    t = training()
    t = t.model_copy(update={"draft": t.draft.model_copy(update={"config_keys_read": None})})  # as before the field
    data = json.loads(t.to_json())
    assert "config_keys_read" not in data["draft"]
    again = type(t).model_validate(data)
    assert again.draft.config_keys_read is None
    t2, s = _with_keys((), ("hidden_size",), ("fc_norm",))
    assert decide(again, s)[0] == "parity"


def test_a_key_both_read_and_unread_is_refused():
    with pytest.raises(ValueError, match="both read and unread"):
        BuiltDraft(built_by="x", config_from="y", config_keys_read=("a",), config_keys_unread=("a",))
    with pytest.raises(ValueError, match="sorted"):
        BuiltDraft(built_by="x", config_from="y", config_keys_read=("b", "a"))


# -- end to end on the installed SGLang 0.5.23 and speculators 0.9.0 (slow) ------------------------

def _check(*args: str, **kw):
    return parity("check", "--target-config", str(LLAMA), *LAYOUT, "--no-verify", *args, **kw)


@pytest.mark.slow
def test_the_bundled_draft_shows_what_each_side_reads():
    proc = _check("--draft", str(LLAMA_DRAFT), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    trained, served = result["training"]["draft"], result["serving"]["draft"]
    written = set(json.loads((LLAMA_DRAFT / "config.json").read_text()))
    # SGLang reads every key the draft sets; speculators' converter takes the vocabulary from the
    # target, never ties the head, and reads no ids or architecture from the draft
    assert served["config_keys_read"] == sorted(written) and served["config_keys_unread"] == []
    assert {"rms_norm_eps", "rope_theta", "target_hidden_size", "draft_vocab_size"} <= set(trained["config_keys_read"])
    assert {"vocab_size", "tie_word_embeddings", "eagle_config"} <= set(trained["config_keys_unread"])
    assert set(trained["config_keys_read"]) | set(trained["config_keys_unread"]) == written


@pytest.mark.slow
def test_a_key_neither_side_reads_is_shown_and_passes(tmp_path):
    draft = tmp_path / "draft"
    draft.mkdir()
    for f in LLAMA_DRAFT.iterdir():
        (draft / f.name).symlink_to(f)
    (draft / "config.json").unlink()
    config = json.loads((LLAMA_DRAFT / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps({**config, "attention_dropout": 0.1}))
    proc = _check("--draft", str(draft))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    row = next(line for line in proc.stdout.splitlines() if line.strip().startswith("attention_dropout"))
    assert "note: neither side reads it" in row, proc.stdout


SGLANG_EAGLE3 = "lib/python3.11/site-packages/sglang/srt/models/llama_eagle3.py"
# The edit: SGLang's draft class stops reading target_hidden_size (it builds its fc from
# hidden_size). The bundled draft's two widths are equal, so no built field changes: only the
# reads show it.
READS_TARGET_WIDTH = 'if hasattr(config, "target_hidden_size"):'


@pytest.mark.slow
def test_an_engine_that_stops_reading_a_key_training_read_is_a_drift_naming_it(tmp_path):
    before = _check("--draft", str(LLAMA_DRAFT))  # the environment the copy below links to
    assert before.returncode == 0, before.stdout + before.stderr[-2000:]
    assert "config keys: sglang 0.5.23 reads 17 of the 17 keys" in before.stdout, before.stdout
    shadow = shadow_env(ROOT / ".venv", tmp_path / "shadow",
                        {SGLANG_EAGLE3: (READS_TARGET_WIDTH, "if False:  # the edit: target_hidden_size unread")})
    env = shadow_run_env(shadow, tmp_path / "home")
    python = str(shadow / "bin" / "python")
    after = _check("--draft", str(LLAMA_DRAFT), python=python, env=env)
    assert after.returncode == 1, after.stdout + after.stderr[-2000:]
    assert "DRIFT: sglang 0.5.23 builds the draft otherwise than training did." in after.stdout
    row = next(line for line in after.stdout.splitlines() if line.strip().startswith("target_hidden_size"))
    assert "never read" in row and "MISMATCH: training built the draft with it" in row, after.stdout
    result = json.loads(_check("--draft", str(LLAMA_DRAFT), "--json", python=python, env=env).stdout)
    assert [d["where"] for d in result["differences"]] == ["config.target_hidden_size"]
    assert result["differences"][0]["message"].startswith(
        "sglang 0.5.23 never reads `target_hidden_size`, which speculators 0.9.0 built the draft with")


# -- SpecForge's side: its resolve_draft_config and draft class, recorded the same way (slow) ----

# What SpecForge 0.2.0 reads of the bundled Llama-3.1-8B draft: its draft class builds one layer
# whatever num_hidden_layers says, and takes the dtype from the run's config, not the draft's.
SPECFORGE_READS = ["architectures", "draft_vocab_size", "hidden_act", "hidden_size", "intermediate_size",
                   "max_position_embeddings", "num_attention_heads", "num_key_value_heads", "rms_norm_eps",
                   "rope_theta", "target_hidden_size", "tie_word_embeddings", "vocab_size"]


@pytest.mark.slow
def test_an_engine_that_stops_reading_a_key_specforge_read_is_a_drift_naming_it(tmp_path):
    """The same edit of SGLang as above, the draft trained by SpecForge: its reads are recorded,
    so the key it built the draft with and the edited engine never reads is a drift; unedited,
    PARITY. Only SGLang is a copy: SpecForge runs in its environment as built, in this run's home
    (its server and bytecode shared with every other SpecForge run)."""
    args = ("check", "--trainer", "specforge", "--specforge", "0.2.0", "--target-config", str(LLAMA), "--draft", str(LLAMA_DRAFT), "--json",
            "--no-verify")  # SpecForge captures the states itself: no dump layout
    before = parity(*args)  # the environment the copy below links to
    assert before.returncode == 0, before.stdout[-3000:] + before.stderr[-2000:]
    trained = json.loads(before.stdout)["training"]["draft"]
    assert trained["built_by"].startswith("specforge 0.2.0 ")
    assert trained["config_keys_read"] == SPECFORGE_READS
    assert {"num_hidden_layers", "torch_dtype"} <= set(trained["config_keys_unread"])
    shadow = shadow_env(ROOT / ".venv", tmp_path / "shadow",
                        {SGLANG_EAGLE3: (READS_TARGET_WIDTH, "if False:  # the edit: target_hidden_size unread")})
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(shadow / ".pycache")
    after = parity(*args, python=str(shadow / "bin" / "python"), env=env)
    assert after.returncode == 1, after.stdout[-3000:] + after.stderr[-2000:]
    result = json.loads(after.stdout)
    assert [d["where"] for d in result["differences"]] == ["config.target_hidden_size"]
    assert result["differences"][0]["message"].startswith(
        "sglang 0.5.23 never reads `target_hidden_size`, which specforge 0.2.0 built the draft with")
