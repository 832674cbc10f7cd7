"""The serving extractor runs the installed SGLang's real config reading and capture.

Every expected contract below is what SGLang 0.5.23 really does (docs/numbering.md,
'SGLang'); each captured slice is identified against transformers inside the probe, so a
wrong tensor shows up as an unidentified slot, never as a silent pass.
"""

from __future__ import annotations

import pytest

from parity.contract import diff, names
from parity.extract.engines.sglang import extract_serving
from parity.inputs import InputError, read_inputs

from .helpers import DEEPSEEK, GPT_OSS, LLAMA, QWEN2, QWEN3, QWEN3_MOE, ROOT, built, sglang_draft

pytestmark = pytest.mark.slow


def kinds(contract) -> list[str]:
    return [f.kind for f in contract.findings]


@pytest.mark.parametrize("config, ids, expected", [
    (LLAMA, [1, 15, 28], ["h2", "h16", "h29"]),
    (LLAMA, [-1, 2, 30], ["h0", "h3", "h31"]),
    (QWEN3, [1, 17, 32], ["h2", "h18", "h33"]),
    (DEEPSEEK, [2, 30, 58], ["h2", "h30", "h58"]),  # no +1 unless ids[0] == 1 (PR #25454)
    (DEEPSEEK, [1, 30, 58], ["h2", "h31", "h59"]),
    (QWEN2, [1, 13, 24], ["h2", "h14", "h25"]),
    (QWEN3_MOE, [1, 23, 44], ["h2", "h24", "h45"]),
    (GPT_OSS, [1, 11, 20], ["h2", "h12", "h21"]),  # attention sinks, sliding window, MoE
], ids=["llama", "llama-embedding", "qwen3", "deepseek-2-30-58", "deepseek-1-30-58", "qwen2",
        "qwen3-moe", "gpt-oss"])
def test_captures_what_sglang_really_captures(tmp_path, config, ids, expected):
    c = extract_serving(*read_inputs(config, sglang_draft(tmp_path, ids=ids)))
    assert names(c.fc_input) == expected
    assert c.requested_ids == tuple(ids)
    assert not [f for f in c.findings if f.severity == "error"], c.findings


def test_torch_compile_changes_no_identified_state(tmp_path, monkeypatch):
    """Children run with torch.compile off (docs/children.md): with it on, SGLang compiles
    DeepSeek-V3's MoE router, and every slot of the main run and of a candidate is the same
    state, at a relative error of the same order."""
    draft = sglang_draft(tmp_path, ids=[2, 30, 58])
    monkeypatch.setenv("PARITY_NO_CACHE", "1")
    runs = {}
    for compile_off in ("1", "0"):
        monkeypatch.setenv("TORCH_COMPILE_DISABLE", compile_off)
        runs[compile_off] = extract_serving(*read_inputs(DEEPSEEK, draft))
    off, on = runs["1"], runs["0"]
    assert names(off.fc_input) == names(on.fc_input) == ["h2", "h30", "h58"]
    assert not [f for f in on.findings + off.findings if f.severity == "error"]


def test_missing_ids_fall_back_to_defaults_loudly(tmp_path):
    c = extract_serving(*read_inputs(LLAMA, sglang_draft(tmp_path)))
    assert names(c.fc_input) == ["h2", "h16", "h29"]  # [2, N//2, N-3] without the +1
    assert c.requested_ids is None and c.ids_source == "engine default"
    assert kinds(c) == ["default_layers_fallback"]
    assert "no eagle_config" in c.findings[0].message


def test_top_level_ids_are_ignored_and_say_so(tmp_path):
    c = extract_serving(*read_inputs(LLAMA, sglang_draft(tmp_path, top_level_ids=[-1, 2, 30])))
    assert names(c.fc_input) == ["h2", "h16", "h29"]  # not the [h0, h3, h31] the ids meant
    assert kinds(c) == ["default_layers_fallback"]
    assert "top level" in c.findings[0].message


def test_last_layer_id_is_silently_dropped(tmp_path):
    c = extract_serving(*read_inputs(LLAMA, sglang_draft(tmp_path, ids=[1, 15, 31])))
    assert names(c.fc_input) == ["h2", "h16", None]
    missing = [f for f in c.findings if f.kind == "not_captured"]
    assert missing and missing[0].slot == 2 and "only 2 of 3" in missing[0].message


def test_deepseek_embedding_id_raises_and_names_slot_0(tmp_path):
    c = extract_serving(*read_inputs(DEEPSEEK, sglang_draft(tmp_path, ids=[-1, 2, 30], hidden_size=7168)))
    assert names(c.fc_input) == [None, None, None]
    assert "engine_error" in kinds(c)
    assert any("captured 2 of 3" in f.message for f in c.findings)
    assert [f.slot for f in c.findings if f.kind == "not_captured"] == [0]


def test_draft_side_facts(tmp_path):
    c = extract_serving(*read_inputs(LLAMA, sglang_draft(tmp_path, ids=[1, 15, 28], norm_before_residual=True)))
    assert c.graph.norm_before_fc is False and c.graph.fc_norm is False
    assert c.graph.norm_before_residual is False  # 0.5.23 never reads the flag
    assert "flag_dropped" in kinds(c)
    assert c.embedding == "target"  # the engine swaps in the target's token embedding


def test_a_draft_built_as_another_architecture_does_not_start_under_eagle3():
    """SafeAILab's EAGLE-3 training config (fixtures/published) names LlamaForCausalLM: SGLang builds
    that class as the draft, and its EAGLE-3 worker's start-up reads the draft's hot_token_id,
    which only EAGLE-3 draft classes have (AttributeError): the server does not start, whatever
    the checkpoint holds, so the draft is unservable, not at parity."""
    draft = ROOT / "fixtures" / "published" / "drafts" / "safeailab-llama-3.1-8b-instruct-eagle3-train-config"
    c = extract_serving(*read_inputs(LLAMA, draft))
    refused = [f.message for f in c.findings if f.kind == "draft_unloadable" and f.severity == "error"]
    assert len(refused) == 1, c.findings
    assert "hot_token_id" in refused[0] and "built as LlamaForCausalLM" in refused[0], refused


def test_speculators_format_config_is_a_finding_not_a_crash(tmp_path):
    d = tmp_path / "spec"
    d.mkdir()
    (d / "config.json").write_text('{"speculators_model_type": "eagle3", '
                                   '"eagle_aux_hidden_state_layer_ids": [2, 16, 29]}')
    c = extract_serving(*read_inputs(LLAMA, d))
    assert names(c.fc_input) == [None, None, None]
    assert kinds(c)[-1] == "draft_unloadable"


@pytest.mark.parametrize("probe, why", [
    ("tests.drift.serving_no_plus_one", "off by one layer (-1)"),
    ("tests.drift.serving_corrupt_capture", None),
])
def test_a_broken_capture_changes_the_contract(tmp_path, inject_drift, probe, why):
    draft = sglang_draft(tmp_path, ids=[1, 15, 28])
    good = extract_serving(*read_inputs(LLAMA, draft))
    inject_drift(probe)
    bad = extract_serving(*read_inputs(LLAMA, draft))
    d = diff(good, bad)
    assert not d.empty
    if why:
        assert [s.why for s in d.mismatched_slots] == [why] * 3
    else:  # a tensor that is no canonical state: every slot unidentified, loudly
        assert names(bad.fc_input) == [None, None, None]
        assert set(kinds(bad)) == {"unidentified_state"}


def test_bad_input_is_one_line(tmp_path):
    """The inputs are read once, before any engine runs: a bad one never reaches the extractor."""
    with pytest.raises(InputError, match="file not found"):
        read_inputs(tmp_path / "nope.json", sglang_draft(tmp_path / "d", ids=[1, 2, 3]))
    bad = tmp_path / "bad.json"
    bad.write_text('{"architectures": ["LlamaForCausalLM"]}')
    with pytest.raises(InputError, match="no num_hidden_layers"):
        read_inputs(bad, sglang_draft(tmp_path / "d", ids=[1, 2, 3]))


# -- the engine boundary and its release families (no engine run) ----------------------------------


def test_engines_are_reached_by_name_and_an_unknown_one_is_one_line():
    from parity.extract.engines import Engine, engine

    sglang = engine("sglang", "0.5.23")
    assert isinstance(sglang.impl, Engine) and (sglang.name, sglang.release) == ("sglang", "0.5.23")
    assert engine("vllm").name == "vllm" and engine("vllm").release is None
    with pytest.raises(InputError) as exc:
        engine("trtllm")
    assert "unknown engine 'trtllm'" in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("version, family", [
    ("0.5.23", "0.5.23"), ("0.5.23.post1", "0.5.23"), ("0.5.22", "0.5.22"), ("0.5.21", "0.5.21"),
    ("0.5.20", "0.5.16"), ("0.5.18", "0.5.16"), ("0.5.16", "0.5.16"), ("0.5.15.post1", "0.5.14"),
    ("0.5.14", "0.5.14"), ("0.5.13", "0.5.14"), ("0.5.12.post1", "0.5.12"), ("0.5.11", "0.5.12"),
    ("0.5.10.post1", "0.5.10"), ("0.5.10", "0.5.10"), ("0.5.8", "0.5.10"), ("0.5.7", "0.5.7"),
    ("0.5.4", "0.5.7"), ("0.5.3.post3", "0.5.3"), ("0.5.3.post2", "0.5.3"), ("0.5.3.post1", "0.5.3.post1"),
    ("0.5.0rc0", "0.5.3.post1"), ("0.4.9", "0.5.3.post1"), ("0.4.8.post1", "0.4.8"), ("0.4.8", "0.4.8"),
    ("0.4.4.post2", "0.4.8")])
def test_a_release_gets_the_family_whose_range_holds_it(version, family):
    from parity.extract.engines.sglang.probe import adapter_for

    adapter, code_paths, placement = adapter_for(version)
    assert adapter.family == family and set(code_paths) >= {"ids", "capture", "model_class", "draft"}
    assert (placement.note is None) == (version in placement.module.VERIFIED)


@pytest.mark.parametrize("version", ["0.4.3", "0.5.24"])
def test_a_release_outside_every_range_runs_with_a_family_whose_code_paths_fit(version):
    """Placed by the installed source (0.5.23's here), with the note every report prints
    (tests/test_release_families.py runs one end to end)."""
    from parity.extract.engines.sglang.probe import adapter_for

    adapter, _, placement = adapter_for(version)
    assert adapter.family == "0.5.23" and placement.note.startswith(f"sglang {version} is ")
    assert placement.note.endswith("extracted with the 0.5.23-family adapter") == (version == "0.5.24")


def test_a_release_number_parity_cannot_read_is_refused_loudly():
    from parity.extract.engines.sglang.probe import adapter_for

    with pytest.raises(LookupError) as exc:
        adapter_for("not-a-version")
    msg = str(exc.value)
    assert msg.startswith("sglang 'not-a-version' is not a release number") and "\n" not in msg
    assert "parity.extract.engines.sglang.families" in msg and "==0.5.23" in msg


def test_each_family_declares_a_range_holding_its_verified_releases():
    from packaging.version import Version

    from parity.extract.families import families

    modules = families("parity.extract.engines.sglang.families")
    for module in modules:
        assert module.VERIFIED and all(Version(v) in module.RELEASES for v in module.VERIFIED), module
        others = [m for m in modules if m is not module]
        assert not any(Version(v) in m.RELEASES for v in module.VERIFIED for m in others), module


@pytest.mark.parametrize("version", ["0.4.8.post1", "0.5.10", "0.5.12.post1"])
def test_a_speculators_checkpoint_loses_its_decoder_layer_before_0_5_11(tmp_path, version):
    """SGLang 0.5.10's draft class names its one decoder layer `midlayer` and its load_weights
    skips names it does not know: a speculators-format checkpoint's `layers.0.*` tensors are
    never loaded (the layer keeps its initial weights); 0.4.x raises KeyError on the stacked
    ones instead (unloadable), and its fc has a bias no speculators checkpoint has. Each time
    the extraction finds, on the release's own load_weights, the rename that loads them
    (`midlayer.*`) and the zero bias; 0.5.11 on load the names as written."""
    if not built("sglang", version):
        pytest.skip(f"sglang {version}'s environment is not built (./dev setup sglang-{version})")
    import torch
    from safetensors.torch import save_file

    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text((ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3" / "config.json").read_text())
    layer = ["layers.0.self_attn.q_proj.weight", "layers.0.mlp.gate_proj.weight", "layers.0.input_layernorm.weight"]
    save_file({n: torch.zeros(2) for n in [*layer, "fc.weight", "norm.weight", "d2t"]}, str(draft / "model.safetensors"))
    c = extract_serving(*read_inputs(LLAMA, draft), version)
    kinds = {f.kind: f for f in c.findings if f.severity == "error"}
    lost = kinds["draft_unloadable"].message + kinds["tensors_dropped"].message if "draft_unloadable" in kinds \
        else kinds["tensors_dropped"].message if "tensors_dropped" in kinds else ""
    assert all(n in lost for n in layer) == (version != "0.5.12.post1"), c.findings
    if version == "0.4.8.post1":
        assert "raises KeyError: 'model.layers.0." in kinds["draft_unloadable"].message
    assert c.checkpoint_renames == ({} if version == "0.5.12.post1" else {"layers.0.": "midlayer."})
    assert c.checkpoint_zero_biases == (("fc.bias",) if version == "0.4.8.post1" else ())
    assert ("'model.fc.bias'" in kinds["params_unfilled"].message) == (version == "0.4.8.post1")


# SGLang 0.4.9-0.5.7: the ids read and the capture set by one statement of ModelRunner.initialize;
# 0.5.3.post3 and older resolve no server args for a dummy model; 0.5.3.post1 and older publish
# them as global_server_args_dict (docs/engines-on-cpu.md, 'Runtime set-up per release family').
OLD_FAMILIES = ["0.5.7", "0.5.3.post3", "0.5.3.post1"]


@pytest.mark.parametrize("version", OLD_FAMILIES)
@pytest.mark.parametrize("config, ids, expected", [
    (LLAMA, [1, 15, 28], ["h2", "h16", "h29"]),
    (QWEN3, [1, 17, 32], ["h2", "h18", "h33"]),
], ids=["llama", "qwen3"])
def test_releases_that_read_the_ids_in_initialize(tmp_path, version, config, ids, expected):
    if not built("sglang", version):
        pytest.skip(f"sglang {version}'s environment is not built (./dev setup sglang-{version})")
    c = extract_serving(*read_inputs(config, sglang_draft(tmp_path, ids=ids)), version)
    assert names(c.fc_input) == expected, c.findings
    assert c.requested_ids == tuple(ids) and c.provenance.version == version
    assert not [f for f in c.findings if f.severity == "error"], c.findings


@pytest.mark.parametrize("version", OLD_FAMILIES)
def test_releases_that_read_the_ids_in_initialize_fall_back_without_them(tmp_path, version):
    """Its bare `except:` turns a draft config without eagle_config into the default layers."""
    if not built("sglang", version):
        pytest.skip(f"sglang {version}'s environment is not built (./dev setup sglang-{version})")
    c = extract_serving(*read_inputs(LLAMA, sglang_draft(tmp_path)), version)
    assert names(c.fc_input) == ["h2", "h16", "h29"] and "default_layers_fallback" in kinds(c)


def test_deepseek_before_0_5_8_is_the_born_from_wiring(tmp_path):
    """Up to 0.5.12.post1, [2, 30, 58] on a 61-layer DeepSeek-V3 feeds h3, h31, h59 (its YaRN
    rope's cache, built on the literal "cuda" up to 0.5.8, defaults to the CPU here)."""
    if not built("sglang", "0.5.7"):
        pytest.skip("sglang 0.5.7's environment is not built (./dev setup sglang-0.5.7)")
    c = extract_serving(*read_inputs(DEEPSEEK, sglang_draft(tmp_path, ids=[2, 30, 58])), "0.5.7")
    assert names(c.fc_input) == ["h3", "h31", "h59"], c.findings


def test_a_moved_reading_statement_is_loud(tmp_path, monkeypatch):
    """The reading statement of ModelRunner.initialize is looked for in the installed source:
    gone (injected), the extraction is refused naming it, never run another way."""
    from parity.envs import PROBE_OVERRIDES

    from .helpers import drift_overrides

    if not built("sglang", "0.5.7"):
        pytest.skip("sglang 0.5.7's environment is not built (./dev setup sglang-0.5.7)")
    from parity.errors import CannotExtract

    monkeypatch.setenv(PROBE_OVERRIDES, drift_overrides("tests.drift.serving_moved_initialize_statement"))
    with pytest.raises(CannotExtract) as exc:
        extract_serving(*read_inputs(LLAMA, sglang_draft(tmp_path, ids=[1, 15, 28])), "0.5.7")
    msg = str(exc.value)
    assert "looked for a statement `if self.spec_algorithm.is_eagle3() and (not self.is_draft_worker):`" in msg, msg


def test_code_that_needs_a_missing_module_is_one_refusal_line(tmp_path, monkeypatch):
    from parity.envs import PROBE_OVERRIDES
    from parity.errors import CannotExtract

    from .helpers import drift_overrides

    monkeypatch.setenv(PROBE_OVERRIDES, drift_overrides("tests.drift.serving_code_needs_a_missing_module"))
    with pytest.raises(CannotExtract) as exc:
        extract_serving(*read_inputs(LLAMA, sglang_draft(tmp_path, ids=[1, 15, 28])))
    msg = str(exc.value)
    assert msg.startswith("cannot extract under sglang 0.5.23: its code cannot be imported here: "
                          "ModuleNotFoundError: No module named 'parity_test_module_that_is_not_installed'"), msg
    assert "\n" not in msg


# SGLang 0.4.4.post2-0.4.8.post1: the capture statement of ModelRunner.initialize hands
# set_eagle3_layers_to_capture() no ids (docs/engines-on-cpu.md, 'Runtime set-up per release family').
NEVER_READS = "0.4.8.post1"


def test_a_release_that_never_reads_the_ids_feeds_the_default_layers(tmp_path):
    """Ids [1, 15, 28] in eagle_config (trained on h2, h16, h29 under later releases) are never
    read: Llama's own default layers [2, 16, 29] are captured, each slot named against
    transformers, and the finding says the release never reads them (not that the config was
    unusable). (The sweep's rows show a draft with no ids, or top-level ids, fed the same.)"""
    if not built("sglang", NEVER_READS):
        pytest.skip(f"sglang {NEVER_READS}'s environment is not built (./dev setup sglang-{NEVER_READS})")
    c = extract_serving(*read_inputs(LLAMA, sglang_draft(tmp_path, ids=[1, 15, 28])), NEVER_READS)
    assert names(c.fc_input) == ["h2", "h16", "h29"], c.findings
    assert c.requested_ids is None and c.provenance.family == "0.4.8" and c.provenance.release_note is None
    fallback = [f.message for f in c.findings if f.kind == "default_layers_fallback"]
    assert fallback == [f"SGLang never reads aux layer ids from the draft config: sglang {NEVER_READS}'s "
                        "ModelRunner.initialize calls set_eagle3_layers_to_capture() with no ids, so every "
                        "draft is fed the model's default layers whatever its config says"], c.findings
    assert not [f for f in c.findings if f.severity == "error"], c.findings


def test_a_capture_statement_that_hands_ids_does_not_fit_the_0_4_8_family(tmp_path, monkeypatch):
    """The family's defining code path (the statement hands no ids) is checked in the installed
    source: injected to hand ids, as 0.4.9's does, the extraction is refused naming the call."""
    from parity.envs import PROBE_OVERRIDES
    from parity.errors import CannotExtract

    from .helpers import drift_overrides

    if not built("sglang", NEVER_READS):
        pytest.skip(f"sglang {NEVER_READS}'s environment is not built (./dev setup sglang-{NEVER_READS})")
    monkeypatch.setenv(PROBE_OVERRIDES, drift_overrides("tests.drift.serving_ids_handed_before_0_4_9"))
    with pytest.raises(CannotExtract) as exc:
        extract_serving(*read_inputs(LLAMA, sglang_draft(tmp_path, ids=[1, 15, 28])), NEVER_READS)
    msg = str(exc.value)
    assert msg.startswith(f"cannot extract under sglang {NEVER_READS}: CodePathMoved: the `if "
                          "self.spec_algorithm.is_eagle3() and (not self.is_draft_worker):` statement of "
                          "ModelRunner.initialize makes ['self.model.set_eagle3_layers_to_capture([1, 15, 28])']"), msg
    assert "\n" not in msg
