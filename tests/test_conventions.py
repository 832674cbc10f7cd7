"""Each system's layer-id convention, translated to canonical taps (docs/numbering.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parity.contract import Norm, Tap, names
from parity import conventions as typed
from parity.conventions import ConventionError
from parity.extract import engines, trainers
from parity.extract.numbering import conventions

CONVENTIONS = conventions()  # the full table: parity.conventions' and each engine's and trainer's own

N = 32
# Realistic depths where the common default [2, N//2, N-3] is three distinct, ordered ids.
DEPTHS = [7, 8, 16, 24, 28, 32, 36, 40, 48, 61, 64, 80, 94, 126]


def to_taps(system, ids, n):
    return typed.to_taps(system, ids, n, CONVENTIONS)


def taps(system, ids, n=N):
    return names(to_taps(system, ids, n))


def test_every_documented_system_is_present():
    assert set(CONVENTIONS) == {"hf", "vllm", "speculators-datagen", "speculators-datagen-0.3",
                                "specforge", "modelopt", "nemo-automodel", "eagle", "trtllm"}
    assert "sglang" not in CONVENTIONS  # always extracted from the installed code instead
    for name, conv in CONVENTIONS.items():
        assert conv.name == name and conv.summary and conv.source


def test_an_engine_or_trainer_declares_its_own_convention_in_its_folder():
    """parity.conventions names no engine or trainer: vLLM's and SpecForge's rules come from
    their folders (CONVENTION), through the registries."""
    sides = {*engines.names(), *trainers.names()}
    assert not set(typed.CONVENTIONS) & sides
    assert {"vllm", "specforge"} <= set(CONVENTIONS) and set(CONVENTIONS) - set(typed.CONVENTIONS) <= sides
    with pytest.raises(ConventionError, match="unknown convention 'vllm'"):
        typed.to_taps("vllm", None, N)  # the typed table alone does not know it


# -- defaults (ids=None) for a 32-layer target ---------------------------------------------

@pytest.mark.parametrize("system, default_ids, expected", [
    ("hf", [], []),
    ("vllm", [2, 16, 29], ["h2", "h16", "h29"]),
    ("speculators-datagen", [2, 16, 29], ["h2", "h16", "h29", "h32"]),
    ("speculators-datagen-0.3", [2, 16, 29, 31], ["h3", "h17", "h30", "h32"]),
    ("specforge", [1, 15, 28], ["h2", "h16", "h29"]),
    ("modelopt", [1, 15, 28], ["h2", "h16", "h29"]),
    ("nemo-automodel", [1, 15, 28], ["h2", "h16", "h29"]),
    ("eagle", [2, 16, 29], ["h2", "h16", "h29"]),
    ("trtllm", [1, 15, 28], ["h2", "h16", "h29"]),
])
def test_documented_defaults(system, default_ids, expected):
    assert CONVENTIONS[system].defaults(N) == default_ids
    assert taps(system, None) == expected
    assert taps(system, default_ids) == expected  # the same ids given explicitly


def test_every_default_is_a_plain_pre_norm_stream():
    for system in CONVENTIONS:
        for tap in to_taps(system, None, N):
            assert tap.is_plain_stream() and tap.norm is Norm.none


# -- explicit id lists ---------------------------------------------------------------------

@pytest.mark.parametrize("system, ids, expected", [
    # HF output_hidden_states: [k] = hk, and the last entry [N] is post-norm
    ("hf", [0, 5, 32], ["h0", "h5", "final"]),
    ("hf", [31], ["h31"]),
    ("hf", [32, 0], ["final", "h0"]),  # order kept
    # vLLM: id k = hk, id N = hN *pre*-norm; sorted and de-duplicated
    ("vllm", [2, 16, 29], ["h2", "h16", "h29"]),
    ("vllm", [32], ["h32"]),
    ("vllm", [0, 31, 32], ["h0", "h31", "h32"]),
    ("vllm", [29, 2, 16], ["h2", "h16", "h29"]),
    ("vllm", [16, 2, 16, 29, 2], ["h2", "h16", "h29"]),
    # speculators 0.5-0.9 data generation: vLLM ids plus hN appended once
    ("speculators-datagen", [29, 2, 16], ["h2", "h16", "h29", "h32"]),
    ("speculators-datagen", [2, 16, 29, 32], ["h2", "h16", "h29", "h32"]),
    ("speculators-datagen", [32, 2, 32], ["h2", "h32"]),
    ("speculators-datagen", [0], ["h0", "h32"]),
    # speculators 0.3-0.4 worker: output of layer k = h(k+1); order kept
    ("speculators-datagen-0.3", [0], ["h1"]),
    ("speculators-datagen-0.3", [31], ["h32"]),
    ("speculators-datagen-0.3", [29, 2], ["h30", "h3"]),
    # SpecForge: output of 0-based layer k = h(k+1)
    ("specforge", [0, 31], ["h1", "h32"]),
    ("specforge", [28, 1, 15], ["h29", "h2", "h16"]),
    # SafeAILab EAGLE-3: input to layer k = hk, no embedding
    ("eagle", [1, 32], ["h1", "h32"]),
    ("eagle", [16, 2], ["h16", "h2"]),
    # TensorRT-LLM: output of layer k = h(k+1), sorted; -1 = final
    ("trtllm", [-1], ["final"]),
    ("trtllm", [28, 1, 15], ["h2", "h16", "h29"]),
    ("trtllm", [31, 0, 31], ["h1", "h32"]),
])
def test_explicit_ids(system, ids, expected):
    assert taps(system, ids) == expected


def test_vllm_last_id_is_pre_norm_but_hf_last_index_is_post_norm():
    [vllm_last] = to_taps("vllm", [N], N)
    [hf_last] = to_taps("hf", [N], N)
    assert vllm_last == Tap.stream(N) and vllm_last.norm is Norm.none
    assert hf_last == Tap.final()
    assert vllm_last != hf_last
    assert Tap.parse(f"h{N}.normed").canonical(N) == hf_last  # what the HF index really holds


def test_trtllm_minus_one_is_final_not_the_embedding():
    assert to_taps("trtllm", [-1], N) == [Tap.final()]
    assert to_taps("trtllm", [-1], 1) == [Tap.final()]


# -- the input-to / output-of equivalence --------------------------------------------------

@pytest.mark.parametrize("n", DEPTHS)
def test_common_default_is_the_same_states_in_both_numberings(n):
    """[2, N//2, N-3] "input to" == [1, N//2-1, N-4] "output of" (docs/numbering.md)."""
    input_to, output_of = [2, n // 2, n - 3], [1, n // 2 - 1, n - 4]
    assert [k + 1 for k in output_of] == input_to
    expected = [f"h{k}" for k in input_to]
    for system, ids in [("vllm", input_to), ("eagle", input_to),
                        ("specforge", output_of), ("trtllm", output_of),
                        ("speculators-datagen-0.3", output_of)]:
        assert taps(system, ids, n) == expected, system
    for system in ("vllm", "eagle", "specforge", "trtllm"):
        assert taps(system, None, n) == expected, system
    assert taps("speculators-datagen", None, n) == [*expected, f"h{n}"]
    assert taps("speculators-datagen-0.3", None, n) == [f"h{k + 1}" for k in input_to] + [f"h{n}"]


@pytest.mark.parametrize("n", DEPTHS)
def test_reading_an_id_list_in_the_other_convention_is_off_by_one(n):
    """The commonest bug: the same numbers, read in the other convention."""
    ids = [2, n // 2, n - 3]
    shifted = [tap.layer for tap in to_taps("specforge", ids, n)]
    assert shifted == [tap.layer + 1 for tap in to_taps("vllm", ids, n)]


@given(st.integers(1, 128).flatmap(
    lambda n: st.tuples(st.just(n), st.lists(st.integers(1, n), min_size=1, max_size=6, unique=True))))
@settings(max_examples=200, deadline=None)
def test_input_to_k_is_output_of_k_minus_1(n_ids):
    n, ids = n_ids
    out = [k - 1 for k in ids]
    assert to_taps("eagle", ids, n) == to_taps("specforge", out, n) == to_taps("speculators-datagen-0.3", out, n)
    assert to_taps("vllm", ids, n) == to_taps("trtllm", out, n) == sorted(to_taps("eagle", ids, n),
                                                                          key=lambda t: t.layer)


@given(st.integers(8, 200))
@settings(max_examples=100, deadline=None)
def test_every_default_is_in_range_and_distinct(n):
    for system, conv in CONVENTIONS.items():
        got = to_taps(system, None, n)
        assert all(t.in_range(n) for t in got), system
        assert len({t.name for t in got}) == len(got), system
        assert len(got) == len(conv.defaults(n)) + (conv.appends_last and n not in conv.defaults(n))


# -- errors --------------------------------------------------------------------------------

@pytest.mark.parametrize("system, ids, valid", [
    ("hf", [33], "0..32"),
    ("hf", [-1], "0..32"),
    ("vllm", [33], "0..32"),
    ("vllm", [-1], "0..32"),
    ("speculators-datagen", [2, 33], "0..32"),
    ("speculators-datagen-0.3", [32], "0..31"),
    ("specforge", [32], "0..31"),
    ("specforge", [-1], "0..31"),
    ("eagle", [0], "1..32"),
    ("eagle", [33], "1..32"),
    ("trtllm", [32], "0..31"),
    ("trtllm", [-2], "0..31"),
])
def test_out_of_range_ids_raise_one_line(system, ids, valid):
    with pytest.raises(ConventionError) as err:
        to_taps(system, ids, N)
    message = str(err.value)
    assert "\n" not in message
    assert "out of range" in message and f"{N}-layer model" in message and f"valid: {valid}" in message


def test_eagle_rejects_the_embedding():
    with pytest.raises(ConventionError, match=r"id 0 is out of range for SafeAILab EAGLE .*valid: 1\.\.32"):
        to_taps("eagle", [0, 16, 29], N)


@pytest.mark.parametrize("system", ["hf", "speculators-datagen-0.3", "specforge", "eagle"])
def test_duplicate_ids_raise_where_the_system_does_not_dedupe(system):
    with pytest.raises(ConventionError, match="duplicate ids") as err:
        to_taps(system, [2, 16, 2], N)
    assert "\n" not in str(err.value) and system in str(err.value)


@pytest.mark.parametrize("system", ["vllm", "speculators-datagen", "trtllm"])
def test_duplicate_ids_collapse_where_the_system_dedupes(system):
    assert CONVENTIONS[system].sorts
    assert to_taps(system, [2, 16, 2], N) == to_taps(system, [2, 16], N)


@pytest.mark.parametrize("system", ["sglang", "vLLM", "", "speculators"])
def test_unknown_convention_raises(system):
    with pytest.raises(ConventionError, match="unknown convention") as err:
        to_taps(system, [1], N)
    assert "vllm" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["no-such-system", "vLLM", ""])
def test_a_datagen_convention_is_resolved_by_name_from_the_full_table(name):
    """What `--datagen-convention NAME` hands a trainer: the typed rule itself, found in the full
    table (an engine's or trainer's own included), or one line naming the known ones."""
    from parity.extract.numbering import convention

    assert convention("specforge") is CONVENTIONS["specforge"]  # a trainer's own, from its folder
    with pytest.raises(ConventionError, match="unknown convention") as err:
        convention(name)
    assert "speculators-datagen" in str(err.value) and "\n" not in str(err.value)


def test_convention_error_is_a_value_error_and_needs_layers():
    assert issubclass(ConventionError, ValueError)
    with pytest.raises(ConventionError, match="at least one layer"):
        to_taps("vllm", [0], 0)


def test_typed_rules_of_systems_parity_runs_or_cannot_run_give_no_verdict():
    """specforge and modelopt (run instead: --trainer NAME) and trtllm (not run) translate ids for
    reading only; as a data-generation convention they are refused, saying what to use."""
    def datagen_refusal(name):
        return typed.datagen_refusal(name, CONVENTIONS)

    assert {c.name for c in CONVENTIONS.values() if c.run_by} == {"specforge", "modelopt", "nemo-automodel", "trtllm"}
    assert "--trainer specforge" in datagen_refusal("specforge")
    assert "--trainer modelopt" in datagen_refusal("modelopt")
    assert "--trainer nemo-automodel" in datagen_refusal("nemo-automodel")
    assert "--dump-layout" in datagen_refusal("trtllm")
    assert datagen_refusal("speculators-datagen") is None and datagen_refusal("vllm") is None
    assert CONVENTIONS["specforge"].label.startswith("typed rule, not run")
