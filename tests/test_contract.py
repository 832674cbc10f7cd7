"""The contract vocabulary: tap names, the pydantic models, their JSON, and the slot diff.

Unit tests pin the documented behaviour; hypothesis properties check it on random valid
contracts (random N in 1..80, 1..5 distinct in-range taps per fc input).
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from parity.contract import (ContractDiff, Finding, GraphFlags, Norm, Provenance,
                             ServingContract, Tap, TargetModel, TrainingContract, VocabMapping,
                             contract_json_schema, diff, load_contract, names, parse_taps)
from parity.contract.diff import explain
from parity.contract.models import TAP_PATTERN

PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FLAGS = ("norm_before_fc", "fc_norm", "norm_output", "norm_before_residual")

# The kinds `explain` names, as the prefix of `why` (diff.explain).
KINDS = ("requested but not captured", "captured, but matches no state of the model",
         "an extra state the other side does not have",
         "order differs", "post-final-norm vs pre-norm state", "final-norm output vs another state",
         "residual included vs layer update without residual", "same layer, different norm",
         "embedding output vs decoder-layer output", "off by one layer", "different layer")


# -- builders ------------------------------------------------------------------------------

def _target(n: int) -> TargetModel:
    return TargetModel(architecture="LlamaForCausalLM", model_type="llama", num_hidden_layers=n,
                       hidden_size=64, vocab_size=1000)


def _prov(package: str = "speculators") -> Provenance:
    return Provenance(package=package, version="0.9.0", code_path="ArrowDataset._get_raw_data",
                      details={"model": "Eagle3DraftModel"})


def training(fc, n: int = 32, *, layout=None, fc_slots=None, loss_target=None, target_slot=None,
             graph: GraphFlags | None = None, **kw) -> TrainingContract:
    """A training contract whose dump is `fc` followed by hN (or `layout` as given)."""
    fc = [Tap.parse(t) if isinstance(t, str) else t for t in fc]
    if layout is None:
        layout = [*fc, Tap.stream(n)]
    layout = [Tap.parse(t) if isinstance(t, str) else t for t in layout]
    if fc_slots is None:
        fc_slots = [layout.index(t) for t in fc]
    if target_slot is None:
        target_slot = len(layout) - 1
    if loss_target is None:
        loss_target = layout[target_slot]
    return TrainingContract(
        target_model=_target(n), fc_input=tuple(fc), graph=graph or GraphFlags(), provenance=_prov(),
        dump_layout=tuple(layout), dump_layout_source="manifest", fc_slots=tuple(fc_slots),
        target=loss_target, target_slot=target_slot,
        alignment="shift_batch: input_ids[1:] ~ hidden_states[:-1]", **kw)


def serving(fc, n: int = 32, *, graph: GraphFlags | None = None, **kw) -> ServingContract:
    fc = tuple(Tap.parse(t) if isinstance(t, str) else t for t in fc)
    kw.setdefault("requested_ids", (2, 30, 58))
    kw.setdefault("ids_source", "eagle_config['eagle_aux_hidden_state_layer_ids']")
    return ServingContract(target_model=_target(n), fc_input=fc, graph=graph or GraphFlags(),
                           provenance=_prov("sglang"), engine="sglang", **kw)


def rebuilt(c, **changes):
    """`c` with some fields replaced, re-validated (model_copy(update=) would skip validation)."""
    return type(c).model_validate({**c.model_dump(), **changes})


# -- strategies ----------------------------------------------------------------------------

@st.composite
def taps_for(draw, n: int) -> Tap:
    """Any valid, canonical tap of an n-layer target."""
    kind = draw(st.sampled_from(["stream", "stream", "stream", "delta", "normed", "ln", "final"]))
    if kind == "final":
        return Tap.final()
    if kind == "delta":
        return Tap(kind="stream", layer=draw(st.integers(1, n)), residual=False)
    if kind in ("normed", "ln"):  # hN.normed is `final`; layer N has no input_layernorm
        norm = Norm.final if kind == "normed" else Norm.input
        return Tap(kind="stream", layer=draw(st.integers(0, n - 1)), norm=norm)
    return Tap.stream(draw(st.integers(0, n)))


@st.composite
def fc_lists(draw, plain: bool = False):
    n = draw(st.integers(1, 80))
    one = st.builds(Tap.stream, st.integers(0, n)) if plain else taps_for(n)
    max_size = min(5, n + 1) if plain else 5
    fc = draw(st.lists(one, min_size=1, max_size=max_size, unique_by=lambda t: t.name))
    return n, fc


flag_values = st.sampled_from([None, True, False])
graphs = st.builds(GraphFlags, norm_before_fc=flag_values, fc_norm=flag_values,
                   norm_output=flag_values, norm_before_residual=flag_values)


@st.composite
def contracts(draw, plain: bool = False):
    """A random valid TrainingContract or ServingContract (and its N)."""
    n, fc = draw(fc_lists(plain))
    graph = draw(graphs)
    vocab = draw(st.builds(VocabMapping,
                           draft_vocab_size=st.none() | st.integers(1, 200_000),
                           d2t=st.sampled_from(["offsets", "absolute", "absent", "unknown"])))
    embedding = draw(st.sampled_from(["draft", "target", "unknown"]))
    findings = tuple(draw(st.lists(st.builds(
        Finding, kind=st.sampled_from(["default_layers_fallback", "flag_dropped"]),
        message=st.text(max_size=30), severity=st.sampled_from(["info", "warning", "error"]),
        slot=st.none() | st.integers(0, 4)), max_size=2)))
    common = dict(graph=graph, vocab=vocab, embedding=embedding, findings=findings)
    if draw(st.booleans()):
        layout = draw(st.permutations([*fc, Tap.stream(n)]))
        return n, training(fc, n, layout=layout, target_normed_by_trainer=draw(st.none() | st.booleans()),
                           **common)
    with_gap = draw(st.booleans()) and len(fc) > 1
    served = [None if with_gap and i == len(fc) - 1 else t for i, t in enumerate(fc)]
    ids = draw(st.none() | st.lists(st.integers(-1, n), max_size=5).map(tuple))
    return n, serving(served, n, requested_ids=ids, capture_ids=ids, **common)


# == Tap names =============================================================================

@pytest.mark.parametrize("name, kind, layer, residual, norm", [
    ("h0", "stream", 0, True, Norm.none),
    ("h31", "stream", 31, True, Norm.none),
    ("h31.delta", "stream", 31, False, Norm.none),
    ("h31.normed", "stream", 31, True, Norm.final),
    ("h31.ln", "stream", 31, True, Norm.input),
    ("final", "final", None, True, Norm.none),
])
def test_tap_name_round_trip(name, kind, layer, residual, norm):
    tap = Tap.parse(name)
    assert (tap.kind, tap.layer, tap.residual, tap.norm) == (kind, layer, residual, norm)
    assert tap.name == name == str(tap)
    assert Tap.parse(tap.name) == tap
    assert Tap.parse(f"  {name} ") == tap  # surrounding blanks are tolerated


@pytest.mark.parametrize("bad", ["h-1", "x3", "", "final.normed", "h", "H3", "h3.norm", "h3,h4"])
def test_invalid_names_are_rejected_with_the_accepted_forms(bad):
    with pytest.raises(ValueError, match="not a hidden-state name") as err:
        Tap.parse(bad)
    assert repr(bad) in str(err.value)
    assert "h<K>" in str(err.value) and "final" in str(err.value)


def test_h0_delta_is_rejected_because_the_embedding_has_no_update():
    with pytest.raises(ValueError, match="h0 \\(the embedding\\) has no layer update"):
        Tap.parse("h0.delta")


@pytest.mark.parametrize("fields, message", [
    (dict(kind="final", layer=3), "'final' takes no layer"),
    (dict(kind="final", norm=Norm.final), "'final' takes no layer"),
    (dict(kind="final", residual=False), "'final' takes no layer"),
    (dict(kind="stream"), "needs its layer count"),
    (dict(kind="stream", layer=3, residual=False, norm=Norm.final), "cannot also be normed"),
    (dict(kind="stream", layer=-1), "greater than or equal to 0"),
    (dict(kind="hidden", layer=1), "kind"),
])
def test_inconsistent_taps_are_rejected(fields, message):
    with pytest.raises(ValidationError, match=message):
        Tap(**fields)


@pytest.mark.parametrize("n", [1, 2, 32, 61])
def test_canonical_maps_last_normed_to_final(n):
    assert Tap.parse(f"h{n}.normed").canonical(n) == Tap.final()
    assert Tap.parse(f"h{n}").canonical(n) == Tap.stream(n)  # pre-norm stays what it is
    assert Tap.parse(f"h{n - 1}.normed").canonical(n) == Tap.parse(f"h{n - 1}.normed")
    assert Tap.parse(f"h{n}.ln").canonical(n).name == f"h{n}.ln"
    assert Tap.final().canonical(n) == Tap.final()


def test_parse_taps_accepts_brackets_and_spaces():
    taps = parse_taps("[h0, h3, h31, h59]")
    assert names(taps) == ["h0", "h3", "h31", "h59"]
    assert taps == parse_taps("h0,h3,h31,h59") == [Tap.stream(k) for k in (0, 3, 31, 59)]
    assert names(parse_taps("final, h3.delta")) == ["final", "h3.delta"]
    assert names([Tap.stream(1), None]) == ["h1", None]


@pytest.mark.parametrize("bad", ["", "  ", "[]"])
def test_parse_taps_rejects_an_empty_list(bad):
    with pytest.raises(ValueError, match="empty list"):
        parse_taps(bad)


@pytest.mark.parametrize("bad", ["[ ]", "h0,", "h0,,h3"])
def test_parse_taps_rejects_an_empty_entry(bad):
    with pytest.raises(ValueError):
        parse_taps(bad)


def test_parse_taps_names_the_bad_entry():
    with pytest.raises(ValueError, match="not a hidden-state name: ' ?x3'"):
        parse_taps("[h0, x3]")


def test_in_range():
    assert Tap.stream(32).in_range(32) and not Tap.stream(33).in_range(32)
    assert Tap.final().in_range(1)


@given(st.integers(1, 80).flatmap(taps_for))
@PROPS
def test_every_tap_name_round_trips_and_matches_the_schema_pattern(tap):
    assert Tap.parse(tap.name) == tap
    assert re.fullmatch(TAP_PATTERN, tap.name)


# == models: frozen, strict, validated =====================================================

def test_models_are_frozen():
    c = training(["h0", "h3", "h31"], 61)
    with pytest.raises(ValidationError, match="frozen"):
        c.fc_input = (Tap.stream(1),)
    with pytest.raises(ValidationError, match="frozen"):
        c.target_model.num_hidden_layers = 3
    with pytest.raises(ValidationError, match="frozen"):
        c.graph.norm_before_fc = True
    with pytest.raises(ValidationError, match="frozen"):
        c.fc_input[0].layer = 5
    s = serving(["h3"], 61)
    with pytest.raises(ValidationError, match="frozen"):
        s.engine = "vllm"
    assert hash(Tap.stream(3)) == hash(Tap.parse("h3"))  # frozen taps are hashable dict keys


def test_extra_fields_are_rejected():
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        TargetModel(architecture="X", num_hidden_layers=2, layers=2)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        GraphFlags(norm_befor_fc=True)  # a misspelled flag must not be dropped silently
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Tap(kind="stream", layer=1, normed=True)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        rebuilt(serving(["h3"]), eagle_ids=[1, 2])
    data = json.loads(training(["h0"]).model_dump_json())
    data["graph"]["norm_before_residuals"] = False
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        load_contract(json.dumps(data))


def test_empty_fc_input_is_rejected():
    with pytest.raises(ValidationError, match="at least one hidden state"):
        serving([])
    with pytest.raises(ValidationError, match="at least one hidden state"):
        training([], layout=["h0"], target_slot=0)


@pytest.mark.parametrize("build", [serving, training])
def test_tap_beyond_the_target_is_rejected(build):
    with pytest.raises(ValidationError, match="fc slot 1 is h62, beyond the target's 61 layers"):
        build(["h3", "h62"], 61)
    with pytest.raises(ValidationError, match="fc slot 0 is h5.delta, beyond the target's 4 layers"):
        build(["h5.delta"], 4)
    build(["h0", "h61", "h61.delta", "final"], 61)  # h0..hN and final are all in range


def test_serving_may_mark_an_uncaptured_slot():
    s = serving(["h3", None, "h59"], 61)
    assert names(s.fc_input) == ["h3", None, "h59"]


@pytest.mark.parametrize("changes, message", [
    (dict(fc_slots=(0, 1, 4)), r"slot\(s\) \[4\] outside a dump of 4 slots"),
    (dict(target_slot=4), r"slot\(s\) \[4\] outside a dump of 4 slots"),
    (dict(fc_slots=(0, 1, -1)), r"slot\(s\) \[-1\] outside a dump of 4 slots"),
    (dict(target_slot=-1), "greater than or equal to 0"),
    (dict(fc_slots=(0, 1)), "fc_slots and fc_input differ in length"),
    (dict(fc_slots=(0, 1, 2, 3)), "fc_slots and fc_input differ in length"),
])
def test_training_slots_must_fit_the_dump(changes, message):
    good = training(["h0", "h3", "h31"], 61, layout=["h0", "h3", "h31", "h59"])
    assert good.fc_slots == (0, 1, 2) and good.target_slot == 3
    with pytest.raises(ValidationError, match=message):
        rebuilt(good, **changes)


# == JSON ==================================================================================

def test_training_contract_json_round_trip():
    c = training(["h0", "h3", "h31"], 61, layout=["h0", "h3", "h31", "h59"],
                 graph=GraphFlags(norm_before_fc=False, norm_before_residual=True),
                 findings=(Finding(kind="target_not_final_layer", message="4 slots", slot=3),))
    text = c.model_dump_json()
    back = load_contract(text)
    assert type(back) is TrainingContract and back == c
    data = json.loads(text)
    assert data["side"] == "training"
    assert data["fc_input"] == ["h0", "h3", "h31"]
    assert data["dump_layout"] == ["h0", "h3", "h31", "h59"]
    assert data["target"] == "h59"
    assert data["graph"]["fc_norm"] is None and "fc_norm" in data["graph"]
    assert data["target_normed_by_trainer"] is None
    assert load_contract(c.to_json()) == c  # the indented form too


def test_serving_contract_json_round_trip():
    c = serving(["h3", None, "final", "h31.delta"], 61, requested_ids=None, ids_source="engine default",
                graph=GraphFlags(norm_output=True),
                vocab=VocabMapping(draft_vocab_size=32000, d2t="offsets", t2d="ignored"),
                embedding="target")
    text = c.model_dump_json()
    back = load_contract(text)
    assert type(back) is ServingContract and back == c
    data = json.loads(text)
    assert data["fc_input"] == ["h3", None, "final", "h31.delta"]
    assert '"fc_input":["h3",null,"final","h31.delta"]' in text
    assert data["requested_ids"] is None and data["capture_ids"] is None


def test_load_contract_needs_a_known_side():
    data = json.loads(serving(["h3"]).model_dump_json())
    data["side"] = "inference"
    with pytest.raises(ValidationError):
        load_contract(json.dumps(data))
    data["side"] = "training"  # a serving body under the training tag
    with pytest.raises(ValidationError):
        load_contract(json.dumps(data))
    data = json.loads(serving(["h3"]).model_dump_json())
    data["fc_input"] = ["h3", "h-1"]
    with pytest.raises(ValidationError, match="not a hidden-state name"):
        load_contract(json.dumps(data))


def _refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref":
                yield v
            else:
                yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def _resolve(root, ref: str):
    assert ref.startswith("#/"), ref
    node = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def test_json_schema():
    schema = json.loads(json.dumps(contract_json_schema()))
    defs = schema["$defs"]
    assert {"TrainingContract", "ServingContract"} <= set(defs)
    assert {r["$ref"] for r in schema["oneOf"]} == {"#/$defs/TrainingContract", "#/$defs/ServingContract"}
    for ref in set(_refs(schema)):  # every reference resolves from the document root
        _resolve(schema, ref)
    tap_schema = {"type": "string", "pattern": TAP_PATTERN}
    training_def = _resolve(schema, "#/$defs/TrainingContract")
    serving_def = _resolve(schema, "#/$defs/ServingContract")
    for d in (training_def, serving_def):
        assert "fc_input" in d["required"]
        items = d["properties"]["fc_input"]["items"]
        options = items.get("anyOf", [items])
        assert any(tap_schema.items() <= o.items() for o in options), items
        assert {"type": "null"} in options  # an uncaptured slot
    assert tap_schema.items() <= training_def["properties"]["dump_layout"]["items"].items()
    assert training_def["properties"]["side"].get("const", "training") == "training"
    for good in ("h0", "h31", "h31.delta", "h31.normed", "h31.ln", "final"):
        assert re.fullmatch(TAP_PATTERN, good)
    for bad in ("h-1", "x3", "h0 ", "final.normed", "h3.norm"):
        assert not re.fullmatch(TAP_PATTERN, bad)


# == diff: unit cases ======================================================================

def test_diff_of_the_case_this_project_was_born_from():
    """docs/drift-cases.md #16: trained on cat([h0,h3,h31]), served [2,30,58] = [h3,h31,h59]."""
    d = diff(training(["h0", "h3", "h31"], 61, layout=["h0", "h3", "h31", "h59"]),
             serving(["h3", "h31", "h59"], 61))
    assert not d.empty
    assert [s.verdict for s in d.slots] == ["mismatch"] * 3
    assert d.slots[0].why == "order differs: h3 is slot 1 on the other side"
    assert d.slots[1].why == "order differs: h31 is slot 2 on the other side"
    assert d.slots[2].why == "different layer (+28)"
    assert d.fields == ()  # training-only fields are not compared against a serving side


@pytest.mark.parametrize("expected, actual, why", [
    ("h3", "h4", "off by one layer (+1)"),
    ("h3", "h2", "off by one layer (-1)"),
    ("h3.delta", "h4.delta", "off by one layer (+1)"),
    ("h3", "h30", "different layer (+27)"),
    ("h0", "h1", "embedding output vs decoder-layer output"),
    ("h5", "h0", "embedding output vs decoder-layer output"),
    ("final", "h32", "post-final-norm vs pre-norm state"),
    ("h32", "final", "post-final-norm vs pre-norm state"),
    ("final", "h31.ln", "final-norm output vs another state"),
    ("h31", "h31.delta", "residual included vs layer update without residual"),
    ("h31", "h31.normed", "same layer, different norm (none vs final)"),
    ("h31.ln", "h31.normed", "same layer, different norm (input vs final)"),
])
def test_explain_names_the_kind(expected, actual, why):
    e, a = Tap.parse(expected), Tap.parse(actual)
    assert explain(e, a, [e]) == why
    d = diff(training([expected]), serving([actual]))
    assert d.mismatched_slots == [d.slots[0]] and d.slots[0].why == why


def test_missing_and_extra_slots():
    d = diff(training(["h2", "h16", "h29"]), serving(["h2", "h16"]))
    assert [s.verdict for s in d.slots] == ["match", "match", "missing"]
    assert d.slots[2].why == "requested but not captured" and d.slots[2].actual is None
    d = diff(training(["h2", "h16", "h29"]), serving(["h2", None, "h29"]))
    assert [s.verdict for s in d.slots] == ["match", "missing", "match"]
    d = diff(training(["h2", "h16"]), serving(["h2", "h16", "h29"]))
    assert d.slots[2].verdict == "extra"
    assert d.slots[2].why == "an extra state the other side does not have"


def test_a_captured_state_matching_none_is_not_called_uncaptured():
    # A release that computes another model (SGLang 0.5.6.post1's rope base) captures a state per
    # slot, but none of the model's: the slot says so, not "not captured".
    odd = Finding(kind="unidentified_state", severity="error", slot=1,
                  message="captured slot 1 matches no canonical state (nearest is h16 at relative error 5.34e-02)")
    d = diff(training(["h2", "h16", "h29"]), serving(["h2", None, None], findings=(odd,)))
    assert [(s.verdict, s.unidentified) for s in d.slots] == [("match", False), ("missing", True), ("missing", False)]
    assert d.slots[1].why == "captured, but matches no state of the model (see below)"
    assert d.slots[2].why == "requested but not captured"


def test_other_field_diffs():
    d = diff(serving(["h3"], 32, vocab=VocabMapping(draft_vocab_size=32000, d2t="offsets"),
                     embedding="draft"),
             serving(["h3"], 61, vocab=VocabMapping(draft_vocab_size=16000, d2t="absolute"),
                     embedding="target"))
    assert {f.field: (f.expected, f.actual) for f in d.fields} == {
        "vocab.draft_vocab_size": (32000, 16000), "vocab.d2t": ("offsets", "absolute"),
        "target.num_hidden_layers": (32, 61), "embedding": ("draft", "target")}
    unknown = diff(serving(["h3"], embedding="draft"), serving(["h3"], embedding="unknown"))
    assert unknown.empty


def test_a_draft_trained_as_one_kind_and_served_as_another_differs():
    """A DFlash draft served as EAGLE-3 (or the reverse) is a difference even where the slots match."""
    d = diff(training(["h2", "h16", "h29"], draft_kind="dflash"), serving(["h2", "h16", "h29"]))
    assert [s.verdict for s in d.slots] == ["match"] * 3
    assert {f.field: (f.expected, f.actual) for f in d.fields} == {"draft_kind": ("dflash", "eagle3")}
    assert diff(training(["h2", "h16", "h29"]), serving(["h2", "h16", "h29"])).empty


def test_training_only_fields_are_compared_between_two_training_contracts():
    a = training(["h0", "h3"], 61, layout=["h0", "h3", "h59"])
    b = training(["h0", "h3"], 61, layout=["h0", "h3", "h60"])
    d = diff(a, b)
    assert not d.mismatched_slots
    got = {f.field: (f.expected, f.actual) for f in d.fields}
    assert got == {"target": ("h59", "h60"),
                   "dump_layout": (["h0", "h3", "h59"], ["h0", "h3", "h60"])}


# == hypothesis properties =================================================================

@given(contracts())
@PROPS
def test_json_round_trip_is_identity(nc):
    _, c = nc
    text = c.model_dump_json()
    back = load_contract(text)
    assert type(back) is type(c) and back == c
    assert back.model_dump_json() == text
    assert json.loads(text)["fc_input"] == names(c.fc_input)


@given(contracts())
@PROPS
def test_diff_with_itself_is_empty(nc):
    _, c = nc
    d = diff(c, c)
    assert isinstance(d, ContractDiff)
    assert d.fields == () and len(d.slots) == len(c.fc_input)
    # an uncaptured slot is never a match, even against itself; everything else is
    assert [s.verdict for s in d.slots] == ["match" if t is not None else "missing" for t in c.fc_input]
    assert d.empty == (None not in c.fc_input)


@given(st.data())
@PROPS
def test_any_reordering_is_an_order_difference(data):
    n, fc = data.draw(fc_lists())
    assume(len(fc) >= 2)
    perm = data.draw(st.permutations(fc))
    assume(perm != fc)
    d = diff(training(fc, n), serving(perm, n))
    assert not d.empty
    moved = [i for i in range(len(fc)) if perm[i] != fc[i]]
    assert [s.slot for s in d.mismatched_slots] == moved
    for s in d.mismatched_slots:
        assert s.verdict == "mismatch"
        assert s.why == f"order differs: {s.actual.name} is slot {fc.index(s.actual)} on the other side"


def _plain_kind(e: int, a: int) -> str:
    if 0 in (e, a):
        return "embedding output vs decoder-layer output"
    if abs(a - e) == 1:
        return f"off by one layer ({a - e:+d})"
    return f"different layer ({a - e:+d})"


@given(st.data())
@PROPS
def test_substituting_one_slot_is_reported_at_that_slot(data):
    n, fc = data.draw(fc_lists())
    i = data.draw(st.integers(0, len(fc) - 1))
    new = data.draw(taps_for(n).filter(lambda t: t not in fc))
    served = [new if j == i else t for j, t in enumerate(fc)]
    d = diff(training(fc, n), serving(served, n))
    assert not d.empty
    [bad] = d.mismatched_slots
    assert bad.slot == i and bad.verdict == "mismatch"
    assert (bad.expected, bad.actual) == (fc[i], new)
    assert bad.why.startswith(KINDS) and not bad.why.startswith("order differs")


@given(st.data())
@PROPS
def test_substituting_a_plain_stream_names_the_layer_distance(data):
    n, fc = data.draw(fc_lists(plain=True))
    assume(len(fc) <= n)  # room for a state not already in the list
    i = data.draw(st.integers(0, len(fc) - 1))
    new = data.draw(st.builds(Tap.stream, st.integers(0, n)).filter(lambda t: t not in fc))
    served = [new if j == i else t for j, t in enumerate(fc)]
    [bad] = diff(training(fc, n), serving(served, n)).mismatched_slots
    assert bad.slot == i and bad.why == _plain_kind(fc[i].layer, new.layer)


@given(st.data())
@PROPS
def test_off_by_one_layer_in_one_slot(data):
    n, fc = data.draw(fc_lists())
    slots = [i for i, t in enumerate(fc) if t.kind == "stream"]
    assume(slots)
    i = data.draw(st.sampled_from(slots))
    step = data.draw(st.sampled_from([-1, 1]))
    old = fc[i]
    k = old.layer + step
    assume(0 <= k <= n and not (k == 0 and not old.residual))
    new = old.model_copy(update={"layer": k})
    assume(new == new.canonical(n) and new not in fc)
    served = [new if j == i else t for j, t in enumerate(fc)]
    d = diff(training(fc, n), serving(served, n))
    assert [s.slot for s in d.mismatched_slots] == [i]
    why = d.mismatched_slots[0].why
    if 0 in (old.layer, k):  # h0 <-> h1 is named for what it is: the embedding
        assert why == "embedding output vs decoder-layer output"
    else:
        assert why == f"off by one layer ({step:+d})"


@given(contracts(), st.sampled_from(FLAGS), st.booleans())
@PROPS
def test_changing_a_graph_flag_on_one_side_is_a_field_diff(nc, flag, value):
    _, c = nc
    a = rebuilt(c, graph={**c.graph.model_dump(), flag: value})
    b = rebuilt(c, graph={**c.graph.model_dump(), flag: not value})
    d = diff(a, b)
    assert not d.empty
    flag_diffs = [f for f in d.fields if f.field.startswith("graph.")]
    assert [(f.field, f.expected, f.actual) for f in flag_diffs] == [(f"graph.{flag}", value, not value)]
    assert diff(a, a).fields == ()


def test_the_schema_lists_every_finding_kind_and_an_unknown_kind_is_refused():
    """Finding kinds are a type (FindingKind), not free text: `parity schema` lists them, and a
    reply naming a kind nobody declared (a typo in a probe) is refused when the contract is built."""
    from pydantic import ValidationError

    from parity.contract import Finding, FindingKind, contract_json_schema

    schema = json.dumps(contract_json_schema())
    assert all(f'"{kind.value}"' in schema for kind in FindingKind)
    assert Finding(kind="engine_error", message="x").kind is FindingKind.engine_error
    with pytest.raises(ValidationError, match="engine_error"):
        Finding(kind="engine_eror", message="x")
