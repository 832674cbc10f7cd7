"""Published multimodal-wrapper target configs (Kimi-K2.5, Llama-4) are taken as published.

The serving side runs SGLang's own wrapper class (its config reading, its
`set_eagle3_layers_to_capture` hand-off to the language model, its `load_weights`), and
every captured slot is named by numerical identity against transformers' text model.
"""

from __future__ import annotations

import json

import pytest

from parity import cli
from parity.contract import TargetModel, names
from parity.envs import EnvError, find_env
from parity.extract.engines.sglang import extract_serving
from parity.extract.shrink import shrink_config
from parity.inputs import InputError, Target, read_inputs

from .helpers import DEEPSEEK, TARGETS

KIMI = TARGETS / "kimi-k2.5" / "config.json"
LLAMA4 = TARGETS / "llama-4-scout" / "config.json"
KIMI_DRAFT = TARGETS.parent / "drafts" / "kimi-k2.5-eagle3"


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_the_kimi_fixture_has_the_published_shape():
    cfg = json.loads(KIMI.read_text())
    assert cfg["architectures"] == ["KimiK25ForConditionalGeneration"] and cfg["model_type"] == "kimi_k25"
    assert "num_hidden_layers" not in cfg and cfg["text_config"]["num_hidden_layers"] == 61
    assert cfg["text_config"]["architectures"] == ["DeepseekV3ForCausalLM"] and "vision_config" in cfg


def test_target_model_of_a_wrapper_is_the_text_models_shape():
    t = Target.read(KIMI).model
    assert t == TargetModel(architecture="KimiK25ForConditionalGeneration", model_type="kimi_k25",
                            text_architecture="DeepseekV3ForCausalLM", num_hidden_layers=61,
                            hidden_size=7168, vocab_size=163840, quantization="compressed-tensors")
    flat = Target.read(DEEPSEEK).model
    assert flat.text_architecture is None and flat.architecture == "DeepseekV3ForCausalLM"
    assert flat.quantization is None and "quantization" not in flat.model_dump()  # locks of it read as before
    l4 = Target.read(LLAMA4).model
    assert (l4.architecture, l4.num_hidden_layers, l4.hidden_size) == ("Llama4ForConditionalGeneration", 48, 5120)


def test_shrinking_keeps_the_wrapper_shape_and_the_depth():
    tiny = shrink_config(json.loads(KIMI.read_text()))
    assert tiny["architectures"] == ["KimiK25ForConditionalGeneration"] and "num_hidden_layers" not in tiny
    text = tiny["text_config"]
    assert text["num_hidden_layers"] == 61 and text["hidden_size"] == 64 and text["n_routed_experts"] == 4
    assert "quantization_config" not in text and "auto_map" not in tiny and "auto_map" not in text
    assert tiny["vision_config"]["vt_num_hidden_layers"] == 1  # one vision block, real widths
    assert tiny["vision_config"]["vt_hidden_size"] == 1152
    assert tiny["pad_token_id"] < text["vocab_size"]
    l4 = shrink_config(json.loads(LLAMA4.read_text()))["text_config"]
    assert l4["num_experts_per_tok"] == 1 and l4["num_hidden_layers"] == 48  # top-1 stays top-1


@pytest.mark.slow
def test_published_kimi_config_gives_the_flat_deepseek_serving_contract():
    wrapped = extract_serving(*read_inputs(KIMI, KIMI_DRAFT))
    flat = extract_serving(*read_inputs(DEEPSEEK, KIMI_DRAFT))
    assert names(wrapped.fc_input) == names(flat.fc_input) == ["h2", "h30", "h58"]
    assert wrapped.capture_ids == flat.capture_ids == (2, 30, 58)
    assert wrapped.requested_ids == flat.requested_ids == (2, 30, 58)
    assert (wrapped.graph, wrapped.vocab, wrapped.embedding) == (flat.graph, flat.vocab, flat.embedding)
    # the engine's wrapper class was built and its capture hand-off used; nothing unidentified
    assert wrapped.provenance.details["model_class"] == "sglang.srt.models.kimi_k25.KimiK25ForConditionalGeneration"
    assert not [f for f in wrapped.findings if f.severity == "error"], wrapped.findings
    assert wrapped.target_model.architecture == "KimiK25ForConditionalGeneration"
    assert wrapped.target_model.text_architecture == "DeepseekV3ForCausalLM"
    # the wrapper's quantisation is the target's, said as not checked; the flat config declares none
    assert (wrapped.target_model.quantization, flat.target_model.quantization) == ("compressed-tensors", None)


@pytest.mark.slow
def test_check_on_the_published_kimi_config_is_the_born_from_case(capsys):
    rc, out, err = run(capsys, "check", "--target-config", KIMI, "--draft", KIMI_DRAFT,
                       "--dump-layout", "h0,h3,h31,h59", "--json")
    data = json.loads(out)
    assert rc == 1 and data["verdict"] == "drift", err
    assert data["training"]["fc_input"] == ["h0", "h3", "h31"]
    assert data["serving"]["fc_input"] == ["h2", "h30", "h58"]
    assert data["serving"]["capture_ids"] == [2, 30, 58]
    assert "embedding output vs decoder-layer output" in data["differences"][0]["message"]
    assert data["suggestion"]["eagle_aux_hidden_state_layer_ids"] == [0, 3, 31]
    assert data["suggestion"]["verified"]


@pytest.mark.slow
def test_published_kimi_config_under_0_5_12_post1():
    """The older release's own wrapper class, with its always-+1 DeepSeek rule."""
    try:
        find_env("sglang", "0.5.12.post1")
    except EnvError as exc:
        pytest.skip(str(exc))
    c = extract_serving(*read_inputs(KIMI, KIMI_DRAFT), sglang_version="0.5.12.post1")
    assert names(c.fc_input) == ["h3", "h31", "h59"] and c.capture_ids == (3, 31, 59)
    assert c.provenance.details["model_class"].endswith("KimiK25ForConditionalGeneration")


@pytest.mark.slow
def test_published_llama4_config_is_refused_in_one_line(capsys):
    """transformers 5.19 (so SGLang 0.5.23, which reads configs with it) refuses the file."""
    rc, out, err = run(capsys, "contract", "serving", "--target-config", LLAMA4, "--draft", KIMI_DRAFT)
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "Llama4ForConditionalGeneration" in err and "attn_temperature_tuning" in err
    assert "expected bool" in err and "Traceback" not in out + err


@pytest.mark.slow
def test_llama4_that_transformers_reads_is_refused_with_the_engines_reason(tmp_path, capsys):
    """With a bool there, SGLang 0.5.23 builds and loads Llama4ForConditionalGeneration, and
    its own CPU code path cannot run it: the reason and where it was raised, in one line."""
    cfg = json.loads(LLAMA4.read_text())
    cfg["text_config"]["attn_temperature_tuning"] = True
    target = tmp_path / "config.json"
    target.write_text(json.dumps(cfg))
    rc, out, err = run(capsys, "contract", "serving", "--target-config", target, "--draft", KIMI_DRAFT)
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "cannot run architecture Llama4ForConditionalGeneration" in err
    assert "sglang/srt/models/llama4.py" in err and "bfloat16" in err


def test_wrapper_without_a_text_layer_count_is_one_line(tmp_path, capsys):
    cfg = json.loads(KIMI.read_text())
    del cfg["text_config"]["num_hidden_layers"]
    target = tmp_path / "config.json"
    target.write_text(json.dumps(cfg))
    with pytest.raises(InputError, match="text_config has no num_hidden_layers"):
        Target.read(target).model
    for argv in (["contract", "training", "--target-config", target, "--dump-layout", "h0,h3,h31,h59"],
                 ["contract", "serving", "--target-config", target, "--draft", KIMI_DRAFT],
                 ["check", "--target-config", target, "--draft", KIMI_DRAFT, "--dump-layout", "h0,h3,h31,h59"]):
        rc, out, err = run(capsys, *argv)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and "text_config" in err, (argv, err)


def trimmed_kimi(tmp_path):
    """The published Kimi-K2.5 wrapper, trimmed as a user might: no vision_config, the text
    model's quantization block at the top, a text_config cut to a few keys (the widths it
    leaves out are transformers' DeepSeek-V3 defaults: a reference of gigabytes)."""
    cfg = json.loads(KIMI.read_text())
    text = cfg["text_config"]
    keep = ("architectures", "model_type", "num_hidden_layers", "hidden_size", "num_attention_heads",
            "num_key_value_heads", "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
            "v_head_dim", "rope_theta", "rms_norm_eps")
    trimmed = {"architectures": cfg["architectures"], "model_type": cfg["model_type"],
               "quantization_config": text["quantization_config"],
               "text_config": {k: text[k] for k in keep}}
    target = tmp_path / "trimmed" / "config.json"
    target.parent.mkdir()
    target.write_text(json.dumps(trimmed))
    return target


@pytest.mark.slow
def test_a_key_the_engine_needs_is_named_before_any_reference_is_built(tmp_path, capsys, monkeypatch,
                                                                        inject_drift):
    """The engine's own class reads vision_config.vt_hidden_size, which the trimmed file lacks:
    one line names the file, the key path and the class, from the engine's real AttributeError,
    and the reference model is never built (the drift refuses it), so it fails in seconds."""
    import time

    target = trimmed_kimi(tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    monkeypatch.setenv("PARITY_NO_CACHE", "1")
    inject_drift("tests.drift.serving_reference_refused")
    start = time.monotonic()
    rc, out, err = run(capsys, "contract", "serving", "--target-config", target, "--draft", KIMI_DRAFT)
    took = time.monotonic() - start
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"parity: target config {target}: "), err
    assert "vision_config.vt_hidden_size" in err and "it has no vision_config" in err, err
    assert "sglang.srt.models.kimi_k25.K2VLMultiModalProjector" in err, err
    assert "reference model" not in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written beside the input
    assert took < 60, took  # about 12 s on a busy 2-core machine (the reference first: 100 s, or OOM)


@pytest.mark.slow  # runs the speculators probe
def test_training_contract_accepts_the_published_wrapper(capsys):
    rc, out, err = run(capsys, "contract", "training", "--target-config", KIMI,
                       "--dump-layout", "h0,h3,h31,h59", "--json")
    data = json.loads(out)
    assert rc == 0, err
    assert data["fc_input"] == ["h0", "h3", "h31"] and data["target"] == "h59"
    assert data["target_model"]["num_hidden_layers"] == 61
    assert data["target_model"]["text_architecture"] == "DeepseekV3ForCausalLM"
