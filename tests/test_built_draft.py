"""The built-draft contract's library parts (issue 36): the readers of a built module, the
comparison of the two sides' builds, the target fit, the report. The cases run end to end on
the installed speculators and SGLang are in test_built_draft_cases.py."""

from __future__ import annotations

import math

import pytest
import torch

from parity.contract import BuiltDraft, diff
from parity.extract.built import activation, norm_eps, plain_rope_scaling, rope
from parity.report import render_check
from parity.verdict import decide, target_misfits

from .test_rendering import SERVED_BUILT, TRAINED_BUILT, check_result, serving, training


def _transformers_rotary(theta: float, scaling: dict | None = None):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    params = {"rope_type": "default", "rope_theta": theta, **(scaling or {})}
    config = LlamaConfig(hidden_size=64, num_attention_heads=4, head_dim=16, rope_parameters=params)
    return LlamaRotaryEmbedding(config)


def test_the_rotary_reader_gives_the_frequencies_the_module_applies():
    """transformers' rotary (the trainers'): base theta, head width 16 -> theta^(-2i/16)."""
    got = rope(torch.nn.Sequential(_transformers_rotary(10000.0)))
    want = [10000.0 ** (-2 * i / 16) for i in range(8)]
    assert got["rope_scale"] == 1.0
    assert all(math.isclose(g, w, rel_tol=1e-5) for g, w in zip(got["rope_frequencies"], want)), got


def test_the_rotary_reader_reads_an_engine_table_the_same_way():
    """An engine's cos/sin table (SGLang's and vLLM's `cos_sin_cache`: cos half, sin half) gives
    the same frequencies as transformers' module for the same base, and a YaRN-like magnitude."""
    freqs = torch.tensor([10000.0 ** (-2 * i / 16) for i in range(8)])
    angles = torch.arange(4)[:, None].float() * freqs  # [positions, 8]
    engine = torch.nn.Module()
    engine.cos_sin_cache = torch.cat([angles.cos() * 1.25, angles.sin() * 1.25], dim=-1)
    got = rope(torch.nn.Sequential(engine))
    trained = rope(torch.nn.Sequential(_transformers_rotary(10000.0)))
    assert got["rope_frequencies"] == pytest.approx(trained["rope_frequencies"], rel=1e-5)
    assert got["rope_scale"] == pytest.approx(1.25, rel=1e-5)


def test_a_scaled_rope_reads_otherwise_than_the_unscaled_one():
    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 8192}
    plain = rope(torch.nn.Sequential(_transformers_rotary(500000.0)))
    scaled = rope(torch.nn.Sequential(_transformers_rotary(500000.0, llama3)))
    assert plain["rope_frequencies"][0] == scaled["rope_frequencies"][0]  # high frequencies kept
    assert plain["rope_frequencies"][-1] == pytest.approx(8 * scaled["rope_frequencies"][-1], rel=1e-4)


def test_eps_and_activation_are_read_off_the_modules():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    layer = LlamaDecoderLayer(LlamaConfig(hidden_size=64, num_attention_heads=4, head_dim=16, intermediate_size=32,
                                          rms_norm_eps=3e-6, hidden_act="gelu_pytorch_tanh"), 0)
    assert norm_eps(layer) == 3e-6
    assert activation(layer) == "gelu_tanh"


def test_rope_scaling_of_the_default_type_is_none():
    assert plain_rope_scaling({"rope_type": "default", "rope_theta": 1e4}) is None
    assert plain_rope_scaling({"type": "yarn", "factor": 4.0, "rope_theta": 1e4}) == {"factor": 4.0,
                                                                                     "rope_type": "yarn"}


@pytest.mark.parametrize("field, served, why", [
    ("lm_head_tied", True, "tie_word_embeddings honoured by the engine only"),
    ("vocab_size", 151936, "another tokenizer's embedding"),
    ("rope_frequencies", (1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125), "another rope"),
    ("rms_norm_eps", 1e-6, "another eps"),
    ("hidden_act", "gelu", "another activation"),
])
def test_a_judged_field_that_differs_is_a_drift_named_in_the_report(field, served, why):
    s = serving(("h0", "h3", "h31"), ids=(0, 3, 31))
    s = s.model_copy(update={"draft": SERVED_BUILT.model_copy(update={field: served})})
    result = check_result(training(), s)
    assert result.verdict == "drift", why
    assert [d.field for d in result.diff.fields] == [f"draft.{field}"]
    report = render_check(result)
    assert "DRIFT: sglang 0.5.23 builds the draft otherwise than training did." in report
    assert any(line.split()[:1] == [field] and "MISMATCH" in line for line in report.splitlines()), report


def test_equal_builds_and_a_shown_field_are_parity():
    """A field shown, not judged (positions, rope_theta as written, dtype) never fails alone, and
    frequencies measured to 6 digits compare within their rounding."""
    nudged = tuple(f * (1 + 2e-6) for f in SERVED_BUILT.rope_frequencies)
    s = serving(("h0", "h3", "h31"), ids=(0, 3, 31)).model_copy(update={"draft": SERVED_BUILT.model_copy(
        update={"max_position_embeddings": 2048, "rope_frequencies": nudged})})
    result = check_result(training(), s)
    assert result.verdict == "parity" and not result.diff.fields
    assert "max_position_embeddings  262144   2048    shown, not judged" in render_check(result)


def test_a_side_that_did_not_build_the_draft_is_said_not_compared():
    s = serving(("h0", "h3", "h31"), ids=(0, 3, 31)).model_copy(update={"draft": None})
    result = check_result(training(), s)
    assert result.verdict == "parity"
    assert "built draft: not compared (the serving side did not build it)" in render_check(result)


def test_a_field_one_side_did_not_read_is_named_and_not_counted():
    """A judged field one side leaves unread (None: e.g. a lock written before the field
    existed) is not compared: the count says how many were, and the report names the others
    and the side, so "the same in all N fields" never hides one. Both read: all 16 counted."""
    unread = {"layers_built": None, "later_layer_input_norms": None}
    s = serving(("h0", "h3", "h31"), ids=(0, 3, 31)).model_copy(
        update={"draft": SERVED_BUILT.model_copy(update=unread)})
    report = render_check(check_result(training(), s))
    n = len(BuiltDraft.JUDGED)
    assert f"the same in all {n - 2} fields compared" in report, report
    assert "not read on sglang 0.5.23 (not compared): layers_built, later_layer_input_norms" in report, report
    drifted = s.model_copy(update={"draft": s.draft.model_copy(update={"rms_norm_eps": 1e-6})})
    assert f"1 of {n - 2} fields compared differ" in render_check(check_result(training(), drifted))
    both = serving(("h0", "h3", "h31"), ids=(0, 3, 31))
    report = render_check(check_result(training(), both))
    assert f"the same in all {n} fields\n" in report and "not read on" not in report, report


@pytest.mark.parametrize("update, reason", [
    ({"draft_vocab_size": 200000}, "lm_head has 200000 rows"),
    ({"max_token_id": 163840}, "maps to target id 163840, past the target's 163840 tokens"),
])
def test_a_draft_that_emits_ids_past_the_target_is_unservable(update, reason):
    s = serving(("h0", "h3", "h31"), ids=(0, 3, 31)).model_copy(
        update={"draft": SERVED_BUILT.model_copy(update=update)})
    assert any(reason in m for m in target_misfits(s))
    verdict, *_, why = decide(training(), s)
    assert verdict == "unservable" and reason in why


def test_a_draft_inside_the_target_vocabulary_fits():
    s = serving(("h0", "h3", "h31"), ids=(0, 3, 31)).model_copy(
        update={"draft": SERVED_BUILT.model_copy(update={"max_token_id": 163839})})
    assert target_misfits(s) == []



def test_a_fixed_extraction_is_judged_on_what_the_report_shows():
    """Issue 48 item 5: the ids fix's verification decides the fixed extraction as a check does:
    ids that feed the training contract but leave the draft unservable (its lm_head past the
    target's vocabulary) mend nothing, and neither do ids the engine feeds otherwise."""
    from parity.verdict import fix_leaves

    fixed = serving(("h0", "h3", "h31"), ids=(0, 3, 31))
    assert fix_leaves(training(), fixed) is None
    oversized = fixed.model_copy(update={"draft": SERVED_BUILT.model_copy(update={"draft_vocab_size": 200000})})
    assert "still cannot serve the draft: the draft's lm_head has 200000 rows" in fix_leaves(training(), oversized)
    assert "the engine feeds ['h1', 'h4', 'h32']" in fix_leaves(training(), serving(("h1", "h4", "h32")))


def test_an_ids_fix_that_writes_what_the_config_holds_is_none(tmp_path):
    """Issue 48 item 5: the ids the engine already reads feed the training contract, yet the draft
    is unservable: writing them again changes nothing, so no fix is offered, and no extraction
    runs to find that out (no target is given)."""
    from parity.extract.engines import engine
    from parity.inputs import Draft
    from parity.verdict import _solve

    draft = Draft(path=tmp_path, config={"eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 3, 31]}})
    s = serving(("h0", "h3", "h31"), ids=(0, 3, 31)).model_copy(
        update={"draft": SERVED_BUILT.model_copy(update={"draft_vocab_size": 200000})})
    from parity.contract.reply import Candidate

    tried = [Candidate(ids=(-1, 2, 30), fc_input=("h0", "h2", "h30")),
             Candidate(ids=(0, 3, 31), fc_input=("h0", "h3", "h31"))]
    suggestion, why = _solve(training(), s, tried, None, draft, engine("sglang"), verify=True)
    assert suggestion is None and why.startswith("no config edit of the ids mends it: "
                                                 "eagle_config.eagle_aux_hidden_state_layer_ids already holds [0, 3, 31]"), why


def test_a_draft_config_edit_that_leaves_a_field_built_otherwise_is_no_fix():
    """Issue 48 item 5: a FIX (draft config) line only where building again with the edit gave the
    trained build in every judged field; an edit that left one otherwise is said as no fix."""
    from parity.verdict import DraftFix

    s = serving(("h0", "h3", "h31"), ids=(0, 3, 31)).model_copy(
        update={"draft": SERVED_BUILT.model_copy(update={"rms_norm_eps": 1e-6})})
    result = check_result(training(), s)
    edit = {"rms_norm_eps": 1e-5}
    left = render_check(result.model_copy(update={"draft_fix": DraftFix(edit=edit, verified=False,
                                                                        still_differ=["rms_norm_eps"])}))
    assert not [line for line in left.splitlines() if line.lstrip().startswith("FIX")], left
    assert ('  NO FIX (draft config): writing {"rms_norm_eps": 1e-05} in the served config.json, sglang 0.5.23 '
            "still builds rms_norm_eps otherwise") in left, left
    mended = render_check(result.model_copy(update={"draft_fix": DraftFix(edit=edit, verified=True)}))
    assert ('  FIX (draft config): write {"rms_norm_eps": 1e-05} in the served config.json\n'
            "       (verified: sglang 0.5.23 then builds the draft as training did)") in mended, mended

def test_the_contract_json_holds_the_built_draft_and_reads_back():
    t = training()
    again = type(t).model_validate_json(t.to_json())
    assert again.draft == TRAINED_BUILT and diff(t, again).empty
    assert "\"draft\":" not in training().model_copy(update={"draft": None}).to_json()


def test_every_judged_and_shown_field_is_a_field():
    assert set(BuiltDraft.JUDGED) | set(BuiltDraft.SHOWN) <= set(BuiltDraft.model_fields)
    assert not set(BuiltDraft.JUDGED) & set(BuiltDraft.SHOWN)


def test_the_config_edit_sets_each_judged_field_where_the_engine_reads_it():
    from parity.verdict import draft_edit

    trained = TRAINED_BUILT.model_copy(update={"hidden_act": "gelu_tanh", "rope_theta": 10000.0,
                                               "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})
    assert draft_edit(trained, {}, ["lm_head_tied", "vocab_size", "hidden_act", "rope_frequencies"]) == {
        "tie_word_embeddings": False, "vocab_size": 163840, "hidden_act": "gelu_pytorch_tanh",
        "rope_theta": 10000.0, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}
    # a config in transformers 5's form keeps its rope in rope_parameters
    assert draft_edit(trained, {"rope_parameters": {"rope_theta": 1.0}}, ["rope_scale"]) == {
        "rope_parameters": {"rope_theta": 10000.0, "rope_type": "yarn", "factor": 4.0}}


def _transformers_layers(n: int = 2):
    """`n` of transformers' own Llama decoder layers (speculators' layers after the first) and a
    forward that runs them in order, as its draft's forward loop does."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=8, num_hidden_layers=n, vocab_size=64)
    config._attn_implementation = "sdpa"  # noqa: SLF001
    layers = torch.nn.ModuleList(LlamaDecoderLayer(config, i) for i in range(n))
    rotary = LlamaRotaryEmbedding(config)

    def forward():
        x = torch.randn(1, 5, 32, generator=torch.Generator().manual_seed(0))
        cos_sin = rotary(x, torch.arange(5)[None])
        for layer in layers:
            out = layer(x, attention_mask=None, position_ids=torch.arange(5)[None], position_embeddings=cos_sin)
            x = out[0] if isinstance(out, tuple) else out
    return layers, forward


def test_the_norm_a_later_layer_applies_is_found_by_value():
    """On transformers' own decoder layers (speculators' layers after the first): each later
    layer's attention reads its input_layernorm's output. A layer whose attention reads a state
    no norm of it produced (the injected drift: its normed input scaled on the way in) reads
    'none'; a one-layer draft runs nothing."""
    from parity.extract.built import later_layer_input_norms, seeded

    layers, forward = _transformers_layers(3)
    seeded(layers)
    assert later_layer_input_norms(layers, forward) == ("input_layernorm", "input_layernorm")
    layers[2].self_attn.register_forward_pre_hook(  # the drift, applied before parity's own hook
        lambda m, args, kwargs: (args, {**kwargs, "hidden_states": 3 * kwargs["hidden_states"]}), with_kwargs=True)
    assert later_layer_input_norms(layers, forward) == ("input_layernorm", "none")
    assert later_layer_input_norms(layers[:1], lambda: pytest.fail("a one-layer draft runs no forward")) == ()


def test_a_later_layer_fed_through_another_norm_is_a_drift_no_config_key_fixes():
    """A two-layer draft trained with layer 1 normalised by its input_layernorm and served with
    its hidden_norm (SGLang 0.5.23's wiring): DRIFT naming the field, no config edit offered;
    one-layer drafts (no later layer) on both sides are PARITY."""
    from parity.verdict import draft_edit

    def sides(trained: tuple[str, ...], served: tuple[str, ...]):
        layers = {"num_hidden_layers": len(trained) + 1, "layers_built": len(trained) + 1}
        t = training().model_copy(update={"draft": TRAINED_BUILT.model_copy(
            update={**layers, "later_layer_input_norms": trained})})
        s = serving(("h0", "h3", "h31"), ids=(0, 3, 31)).model_copy(update={"draft": SERVED_BUILT.model_copy(
            update={**layers, "later_layer_input_norms": served})})
        return t, s

    t, s = sides(("input_layernorm",), ("hidden_norm",))
    result = check_result(t, s)
    assert result.verdict == "drift"
    assert [d.field for d in result.diff.fields] == ["draft.later_layer_input_norms"]
    assert draft_edit(t.draft, {}, ["later_layer_input_norms", "layers_built"]) == {}
    report = render_check(result)
    row = next(line for line in report.splitlines() if line.strip().startswith("later_layer_input_norms"))
    assert '["input_layernorm"]' in row and '["hidden_norm"]' in row and "MISMATCH" in row, report
    assert "no config key changes which" in report
    assert check_result(*sides((), ())).verdict == "parity"
    with pytest.raises(ValueError, match="one per layer after the first"):
        BuiltDraft(built_by="x", config_from="y", layers_built=2, later_layer_input_norms=())


# -- a size the trainer's converter only assumed (issue 48: TorchSpec's Kimi-K2.5 draft) ---------

def _served_form(**extra) -> dict:
    """An EAGLE-3 config in the served form that does not set draft_vocab_size (TorchSpec's)."""
    return {"architectures": ["LlamaForCausalLMEagle3"], "vocab_size": 163840, "hidden_size": 7168,
            "num_attention_heads": 64, **extra}


def test_a_size_the_converter_assumes_for_an_absent_key_is_not_the_trained_one():
    """speculators' converter gives a config without draft_vocab_size 32000, where the draft
    classes take vocab_size: that value is its guess (None, listed); a config that sets the key,
    or a converter value equal to the common default, is what the draft was built with."""
    from parity.extract.trainers.speculators.built import converter_assumed

    built = {"vocab_size": 163840, "draft_vocab_size": 32000, "hidden_size": 7168, "target_hidden_size": 7168}
    assert converter_assumed(built, _served_form()) == [
        {"key": "draft_vocab_size", "assumed": 32000, "common": 163840}]
    assert built["draft_vocab_size"] is None and built["target_hidden_size"] == 7168
    written = {"vocab_size": 163840, "draft_vocab_size": 32000}
    assert converter_assumed(written, _served_form(draft_vocab_size=32000)) == [] and written["draft_vocab_size"] == 32000
    common = {"vocab_size": 163840, "draft_vocab_size": 163840}
    assert converter_assumed(common, _served_form()) == [] and common["draft_vocab_size"] == 163840


def _assumed_draft(tmp_path, rows: int | None):
    """A draft folder in the served form without draft_vocab_size, with an lm_head of `rows` rows
    (None: config only), read as the training side reads it."""
    import json

    from safetensors.torch import save_file

    from parity.extract.trainers.draft import read_draft

    (tmp_path / "config.json").write_text(json.dumps(_served_form()))
    if rows is not None:
        save_file({"lm_head.weight": torch.zeros(rows, 4)}, str(tmp_path / "model.safetensors"))
    return read_draft(tmp_path, schema=None)


@pytest.mark.parametrize("rows, verdict", [(None, "parity"), (163840 // 4096, "drift")])
def test_an_assumed_draft_vocabulary_is_settled_by_the_checkpoint_or_not_compared(tmp_path, rows, verdict):
    """Config only: draft_vocab_size is not compared, and the report says the converter assumed it.
    A checkpoint whose lm_head has other rows than the engine builds: DRIFT on draft_vocab_size
    (the rows are what training built), found with no config key set."""
    from parity.contract import AssumedSize
    from parity.extract.trainers.speculators import settle_assumed

    draft = _assumed_draft(tmp_path, rows)
    assert draft.lm_head_rows == rows
    assumed = TRAINED_BUILT.model_copy(update={"draft_vocab_size": None, "converter_assumed": (
        AssumedSize(key="draft_vocab_size", assumed=32000, common=163840),)})
    built, findings = settle_assumed(assumed, draft, "speculators 0.9.0's converter")
    assert built.draft_vocab_size == rows and [f.kind for f in findings] == ["converter_assumed"]
    t = training().model_copy(update={"draft": built, "findings": findings})
    result = check_result(t, serving(("h0", "h3", "h31"), ids=(0, 3, 31)))
    assert result.verdict == verdict
    report = render_check(result)
    if rows is None:
        assert "assumed by speculators 0.9.0's converter, not set by the draft's config (not compared): " \
               "draft_vocab_size" in report, report
        assert "speculators 0.9.0's converter assumes 32000, where the EAGLE-3 draft classes take 163840" in report
    else:
        assert [d.field for d in result.diff.fields] == ["draft.draft_vocab_size"]
        assert "draft_vocab_size from the checkpoint's lm_head, not its converter's 32000" in report, report
