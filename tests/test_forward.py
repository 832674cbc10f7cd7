"""Forward (logits) parity: the training path and the serving path give the same draft logits.

Real code on both sides: speculators 0.9's ArrowDataset + shift_batch + Eagle3DraftModel
on the dump of a tiny seeded transformers target; SGLang 0.5.23's target (capture ids
read by its own config code) and LlamaForCausalLMEagle3 (its load_weights, d2t ->
hot_token_id). Correct fixtures must agree within the fp32 tolerances at every
position and TTT step; each injected drift must fail, and fail first at the stage it
changes. Each run is one speculators process and one SGLang process for all its cases.
"""

from __future__ import annotations

import json

import pytest
import torch

from parity import cli
from parity.forward.cases import (DRIFTS, EXPECTED_STAGE, FLAG_DRIFTS, Case, fixture_cases, served_copy,
                                  fixture_target)
from parity.forward.positions import WITHIN
from parity.forward.compare import STAGES, compare
from parity.forward.run import forward_parity
from parity.forward.tolerances import BF16, FP32, for_dtype
from parity.fixtures import DraftRecipe, speculators_draft

from .helpers import ROOT, built, recorded

# one worker runs the module (./dev test: --dist loadgroup), so its module fixtures' forward
# runs, which the reply cache does not keep, are computed once per run, not once per worker
pytestmark = [pytest.mark.parity, pytest.mark.slow, pytest.mark.xdist_group("test_forward")]

MATCHED = ("matched", "matched-fc_norm-norm_output", "matched-norm_before_fc", "matched-llama3-rope")
STEPS = 3


@pytest.fixture(scope="session")  # one worker runs this file; a module fixture is made again each
def llama_run():                   # time that worker comes back to the file after another one
    """Llama, 8 layers (dump [h2, h4, h5, h8]): every matched pair and every drift, one run."""
    target = fixture_target("llama-8l")
    out = forward_parity(target, fixture_cases(target, DRIFTS, flags_on=True, rope=True), steps=STEPS)
    return {r.name: r for r in out["results"]}


# -- correct fixtures agree --------------------------------------------------------------------


@pytest.mark.parametrize("name", MATCHED)
def test_matched_pairs_give_the_same_logits(llama_run, name):
    r = llama_run[name]
    assert r.verdict == "parity", r.first_divergence
    logits = [s for s in r.stages if s.stage == "logits"]
    assert [s.step for s in logits] == list(range(STEPS))
    for s in logits:
        assert s.rows == 15 - s.step  # 16 tokens -> 15 trainer rows; step k pads k rows
        assert s.max_abs <= FP32.logits_atol <= 1e-4
        assert s.top1 == 1.0
        assert s.kl_max <= FP32.kl_max
        assert len(s.per_row_kl) == s.rows
    states = [s for s in r.stages if s.stage not in ("logits", "vocab_mapping")]
    assert {s.stage for s in states} == {"fc_input", "fc_output", "embeddings", "layer_output"}
    assert all(s.ok for s in r.stages)
    vocab = r.stage(0, "vocab_mapping")
    assert vocab.mismatched == 0 and vocab.top1 == 1.0
    assert r.serving["vocab_mapping"].startswith("hot_token_id")
    assert r.serving["embedding"] == "target" and r.training["embedding"] == "target"
    assert any("rows aligned" in n for n in r.notes), r.notes


def test_the_engine_captures_what_training_reads(llama_run):
    r = llama_run["matched"]
    assert r.training["dump_layout"] == ["h2", "h4", "h5", "h8"]
    assert r.serving["requested_ids"] == [1, 3, 4]  # SGLang's Llama adds 1: h2, h4, h5
    assert r.serving["capture_ids"] == [2, 4, 5]
    assert r.stage(0, "fc_input").max_abs < 1e-5  # transformers vs SGLang target, fp32


def test_flags_reach_both_graphs(llama_run):
    r = llama_run["matched-fc_norm-norm_output"]
    assert r.training["flags"]["fc_norm"] and r.training["flags"]["norm_output"]
    assert r.serving["graph"] == {"norm_before_fc": False, "fc_norm": True, "norm_output": True}
    assert llama_run["matched-norm_before_fc"].serving["graph"]["norm_before_fc"] is True


# -- each injected drift fails, at its stage ----------------------------------------------------


@pytest.mark.parametrize("drift", DRIFTS)
def test_injected_drift_fails_at_its_first_stage(llama_run, drift):
    r = llama_run[drift]
    assert r.verdict == "drift"
    first = r.first_divergence
    assert (first.step, first.stage) == EXPECTED_STAGE[drift], first.message
    order = [(s.step, STAGES.index(s.stage)) for s in r.stages]
    cut = order.index((first.step, STAGES.index(first.stage)))
    assert all(s.ok for s in r.stages[:cut])  # everything upstream still agrees
    assert not r.stages[cut].ok and r.stages[cut].why


def test_born_from_wiring_names_both_sides(llama_run):
    r = llama_run["born-from"]
    assert r.training["dump_layout"] == ["h0", "h3", "h5", "h6"]  # fc [h0, h3, h5]
    assert r.serving["capture_ids"] == [3, 5, 6]  # SGLang feeds [h3, h5, h6]
    assert r.stage(0, "logits").top1 < 0.6


def test_flag_drifts_change_the_logits(llama_run):
    for drift in FLAG_DRIFTS:
        logits = [s for s in llama_run[drift].stages if s.stage == "logits"]
        assert max(s.max_abs for s in logits) > 0.1, drift
    # norm_output only changes the state fed back: step 0 still agrees
    assert llama_run["norm_output"].stage(0, "logits").ok
    assert not llama_run["norm_output"].stage(1, "logits").ok


def test_missing_d2t_keeps_logits_but_not_tokens(llama_run):
    r = llama_run["no-d2t"]
    assert all(s.ok for s in r.stages if s.stage == "logits")
    v = r.stage(0, "vocab_mapping")
    assert v.mismatched == 64 and v.top1 < 0.5
    assert r.serving["vocab_mapping"].startswith("none")


# -- positions past the draft's declared ones ----------------------------------------------------------


def _groups(r, step: int, stage: str) -> dict:
    return {g.group: g for g in r.stage(step, stage).groups}


def test_rows_run_past_the_positions_the_draft_declares(llama_run):
    """The fixture draft declares 512 positions; Llama-3.1's rope draft 2048, scaled from 8192. Each
    side runs its last rows past them, with its own numbering (training's one higher), and every
    position group of a matched pair agrees within the stage's tolerance."""
    r = llama_run["matched"]
    assert r.serving["positions"] == [*range(11), 511, 512, 513, 514, 515]
    assert r.training["position_ids"] == [p + 1 for p in r.serving["positions"][:15]]
    assert "with SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in r.serving["draft_positions"]
    assert list(_groups(r, 0, "logits")) == [WITHIN, "within, just below max_position_embeddings 512",
                                             "past max_position_embeddings 512"]
    rope = llama_run["matched-llama3-rope"]
    assert rope.serving["positions"] == [*range(6), *range(2047, 2052), *range(8191, 8196)]
    for name in ("matched", "matched-llama3-rope"):
        for s in llama_run[name].stages:
            if s.stage != "vocab_mapping":
                assert s.groups and all(g.ok for g in s.groups), (name, s)
    past = _groups(rope, 0, "logits")["past rope_scaling.original_max_position_embeddings 8192"]
    assert past.positions == [8192, 8193, 8194] and past.max_abs <= FP32.logits_atol


def test_a_rope_scaling_drift_shows_past_the_declared_positions(llama_run):
    """Trained with llama3 scaling, served without: only wavelengths above 2048 change, which barely
    turn between the first rows; past the declared positions the logits move a thousand times more."""
    r = llama_run["rope-scaling"]
    for step in range(STEPS):
        groups = _groups(r, step, "logits")
        near = groups[WITHIN].max_abs
        for name in ("past max_position_embeddings 2048", "past rope_scaling.original_max_position_embeddings 8192"):
            assert groups[name].max_abs > 0.1 and groups[name].max_abs > 100 * near, (step, groups)
            assert not groups[name].ok
    assert "by position" in r.first_divergence.message
    theta = llama_run["rope-theta"]  # a base changes the high frequencies too: every group moves
    assert all(not g.ok for g in theta.stage(0, "logits").groups)


def test_short_positions_run_rows_at_0_only():
    target = fixture_target("llama-8l")
    out = forward_parity(target, fixture_cases(target, ("rope-scaling",), matched=False), steps=1,
                         long_positions=False)
    (r,) = out["results"]
    assert r.serving["positions"] == list(range(16)) and not r.stage(0, "logits").groups
    assert r.stage(0, "logits").max_abs < 100 * FP32.logits_atol  # the same drift, barely visible here


# -- the case this project was born from, on its real depth ---------------------------------------


def test_born_from_case_on_a_61_layer_deepseek(tmp_path):
    """Kimi-K2.5 class: trained on cat([h0, h3, h31]) of [h0, h3, h31, h59]; served with the
    draft config's ids [2, 30, 58] as written. The matched pair (ids found on the engine) agrees."""
    target = fixture_target("deepseek-v3-61l")
    matched = fixture_cases(target, (), work=tmp_path / "m")
    draft = speculators_draft(DraftRecipe(ids=(2, 30, 58)))
    kimi = Case(name="kimi", draft_dir=draft, dump_layout=["h0", "h3", "h31", "h59"],
                served_dir=served_copy(draft, tmp_path / "kimi", ids=[2, 30, 58]))
    out = {r.name: r for r in forward_parity(target, matched + [kimi], steps=2)["results"]}
    assert out["matched"].verdict == "parity", out["matched"].first_divergence
    assert max(s.max_abs for s in out["matched"].stages if s.stage == "logits") <= FP32.logits_atol
    k = out["kimi"]
    assert k.verdict == "drift"
    assert (k.first_divergence.step, k.first_divergence.stage) == (0, "fc_input")
    assert k.serving["requested_ids"] == [2, 30, 58]
    assert k.serving["capture_ids"] == [2, 30, 58]  # 0.5.23: no +1 unless ids[0] == 1 -> h2, h30, h58


# -- the CLI ---------------------------------------------------------------------------------------


def test_cli_forward_on_a_given_draft_exits_0(tmp_path, capsys):
    """The user's form: a target config and a trained draft; the served form is exported and its
    ids are found on the engine."""
    target = tmp_path / "target" / "config.json"
    target.parent.mkdir()
    target.write_text(json.dumps(fixture_target("llama-8l")))
    draft = speculators_draft(DraftRecipe(ids=(2, 4, 5), hidden_size=64, target_vocab=256, draft_vocab=32))
    rc = cli.main(["forward", "--target-config", str(target), "--draft", str(draft),
                   "--dump-layout", "h2,h4,h5,h8", "--steps", "2"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "PARITY" in text and "per position" in text and "step  stage" in text


def test_cli_forward_exits_1_on_drift_and_prints_the_stage(llama_run, monkeypatch, capsys):
    """Exit code and report for a drifting pair (the engines' results of `llama_run`)."""
    import parity.forward.run as run_mod

    def fake(target, cases, **kw):  # each side's reply as the real releases send it (tests/replies/)
        return {"results": [llama_run[c.name] for c in cases], "wall": {},
                "training": recorded("forward-speculators-0.9.0.json"), "serving": recorded("forward-sglang-0.5.23.json")}

    monkeypatch.setattr(run_mod, "forward_parity", fake)
    assert cli.main(["forward", "--fixture", "llama-8l", "--drift", "no-d2t"]) == 1
    text = capsys.readouterr().out
    assert "FIRST DIVERGENCE: step 0, vocab_mapping" in text and "matched  parity" in text
    assert cli.main(["forward", "--fixture", "llama-8l", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["verdict"], shown["speculators"], shown["sglang"]) == ("parity", "0.9.0", "0.5.23"), shown


def test_cli_forward_bad_input_exits_2(tmp_path, capsys):
    rc = cli.main(["forward", "--target-config", str(ROOT / "fixtures/targets/llama-3.1-8b/config.json"),
                   "--draft", str(ROOT / "fixtures/drafts/llama-3.1-8b-eagle3")])
    assert rc == 2
    assert "speculators-format" in capsys.readouterr().err
    assert cli.main(["forward", "--fixture", "no-such-target"]) == 2
    assert cli.main(["forward"]) == 2


# -- older SGLang releases: the same verdicts, stage by stage ---------------------------------------


# every release family parity check has (0.5.23's runs above): its oldest and newest release
# with an environment; before 0.5.11 the served form is parity's export, `layers.0.*` renamed
# `midlayer.*` (and in 0.4.8.post1 a zero fc.bias), found on the release's own load_weights
OLDER = ["0.5.22", "0.5.21", "0.5.18", "0.5.14", "0.5.12.post1", "0.5.10", "0.5.7", "0.5.3.post3",
         "0.5.3.post1", "0.4.8.post1"]


@pytest.mark.parametrize("version", [v if v in ("0.5.14", "0.4.8.post1") else  # the suite: the +1 release, the oldest
                                     pytest.param(v, marks=pytest.mark.exhaustive) for v in OLDER])
def test_cli_forward_under_an_older_release_gives_the_same_verdicts(version, capsys):
    """`parity forward --sglang VERSION`: the serving path runs in that release's environment
    (its family adapter), and gives what 0.5.23 gives: the matched pair at parity at every
    stage, each injected drift first at its stage with everything upstream agreeing. One
    exception, the release's own behaviour: 0.4.x sets `hot_token_id` only when it loads a
    d2t tensor, so a draft without one fails at the EAGLE worker's start-up (unservable)."""
    if not built("sglang", version):
        pytest.skip(f"sglang {version}'s environment is not built (./dev setup sglang-{version})")
    old = version.startswith("0.4.")
    # 0.4.x's draft rope table ends at the draft's declared positions (test below): its rows run at 0..15
    rc = cli.main(["forward", "--fixture", "llama-8l", "--drift", "all", "--steps", "2", "--json",
                   "--sglang", version, *(["--short-positions"] if old else [])])
    out = json.loads(capsys.readouterr().out)
    assert out["sglang"] == version and rc == 1
    results = {r["name"]: r for r in out["results"]}
    assert set(results) == {"matched", *DRIFTS}
    matched = results["matched"]
    assert matched["verdict"] == "parity", matched["error"] or matched["first_divergence"]
    assert all(s["ok"] for s in matched["stages"]) and matched["serving"]["embedding"] == "target"
    assert matched["serving"]["capture_ids"] == [2, 4, 5]  # ids [1, 3, 4]: h2, h4, h5 in every release
    if not old:  # every later release serves the rows past the draft's 512 positions, each as it builds it
        assert matched["serving"]["positions"][-5:] == [511, 512, 513, 514, 515]
        assert "the target's context length 131072" in matched["serving"]["draft_positions"]
    assert matched["serving"]["checkpoint_renames"] == (
        {"layers.0.": "midlayer."} if version in OLDER[OLDER.index("0.5.10"):] else {})
    assert matched["serving"]["checkpoint_zero_biases"] == (["fc.bias"] if old else [])
    for drift in DRIFTS:
        r = results[drift]
        if old and drift == "no-d2t":
            assert r["verdict"] == "unservable" and "get_hot_token_id() raises AttributeError" in r["error"], r
            continue
        first = r["first_divergence"]
        assert r["verdict"] == "drift" and (first["step"], first["stage"]) == EXPECTED_STAGE[drift], (drift, r)
        order = [(s["step"], STAGES.index(s["stage"])) for s in r["stages"]]
        cut = order.index((first["step"], STAGES.index(first["stage"])))
        assert all(s["ok"] for s in r["stages"][:cut]) and not r["stages"][cut]["ok"], drift


def test_before_0_5_the_draft_rope_table_ends_at_its_declared_positions(capsys):
    """0.4.8.post1's EAGLE worker serves the target's context (it sets server_args.context_length to
    it), but its ModelConfig does not raise the draft's max_position_embeddings to it, as every later
    release does: the draft's rope table holds its 512 declared positions, and a row past them has
    no entry. Unservable at those positions, and the report says so."""
    if not built("sglang", "0.4.8.post1"):
        pytest.skip("sglang 0.4.8.post1's environment is not built (./dev setup sglang-0.4.8.post1)")
    rc = cli.main(["forward", "--fixture", "llama-8l", "--steps", "1", "--json", "--sglang", "0.4.8.post1"])
    (r,) = json.loads(capsys.readouterr().out)["results"]
    assert rc == 1 and r["verdict"] == "unservable", r
    assert "rope table for 512 positions" in r["error"] and "position 515 is past the table" in r["error"], r["error"]


def _forward_given(tmp_path, capsys, version: str, draft_vocab: int, served: bool) -> tuple[int, dict]:
    """`parity forward --sglang VERSION` on a seeded llama-8l draft given as a user gives one:
    its served form as written (`served`: speculators' tensor names, ids [1, 3, 4]) or, without,
    parity's export of it. (exit code, the one result)"""
    if not built("sglang", version):
        pytest.skip(f"sglang {version}'s environment is not built (./dev setup sglang-{version})")
    target = tmp_path / "target" / "config.json"
    target.parent.mkdir()
    target.write_text(json.dumps(fixture_target("llama-8l")))
    draft = speculators_draft(DraftRecipe(ids=(2, 4, 5), hidden_size=64, target_vocab=256, draft_vocab=draft_vocab))
    as_served = ["--served", str(served_copy(draft, tmp_path / "served", ids=[1, 3, 4]))] if served else []
    rc = cli.main(["forward", "--target-config", str(target), "--draft", str(draft), *as_served,
                   "--dump-layout", "h2,h4,h5,h8", "--steps", "1", "--json", "--sglang", version])
    return rc, json.loads(capsys.readouterr().out)["results"][0]


@pytest.mark.parametrize("version, first", [("0.5.10", "layer_output"), ("0.4.8.post1", None)])
def test_a_speculators_checkpoint_served_as_written_before_0_5_11(tmp_path, capsys, version, first):
    """Served with speculators' tensor names as written (not parity's export), SGLang's draft
    class up to 0.5.10 skips the `layers.0.*` tensors it names `midlayer` (the forward diverges
    first at the decoder layer's output: its weights never loaded), and 0.4.x raises on them
    (unservable: what a launch hits)."""
    rc, r = _forward_given(tmp_path, capsys, version, draft_vocab=64, served=True)
    assert rc == 1, r
    if first is None:
        assert r["verdict"] == "unservable" and "KeyError: 'model.layers.0." in r["error"], r
        return
    assert r["verdict"] == "drift" and (r["first_divergence"]["step"], r["first_divergence"]["stage"]) == (0, first)
    before = {s["stage"]: s["ok"] for s in r["stages"] if s["step"] == 0}
    assert before["fc_input"] and before["fc_output"] and before["embeddings"], before


def test_before_0_5_7_a_padded_draft_vocabulary_reaches_the_logits(tmp_path, capsys):
    """SGLang pads the draft's lm_head to a multiple of 64 rows; before 0.5.7 its logits
    processor slices at the target's vocabulary, so a 32-token draft vocabulary comes back
    as 64 logits (32 of them padding) where training has 32: the forward says so at the logits."""
    rc, r = _forward_given(tmp_path, capsys, "0.5.3.post1", draft_vocab=32, served=False)
    assert rc == 1 and r["verdict"] == "drift", r
    assert (r["first_divergence"]["stage"], r["first_divergence"]["message"]) == (
        "logits", "step 0, draft logits: vocabulary sizes differ: training 32, serving 64")


def test_cli_forward_under_a_release_without_an_environment_exits_2(capsys):
    assert cli.main(["forward", "--fixture", "llama-8l", "--sglang", "0.4.0"]) == 2
    err = capsys.readouterr().err
    assert "no environment pins sglang==0.4.0" in err and "Traceback" not in err


# -- the comparison itself (no engines) -------------------------------------------------------------


def _sides(rows=6, h=8, v=5, k=2, seed=0):
    gen = torch.Generator().manual_seed(seed)
    t = {"vocab_map": torch.arange(v) * 3}
    for step in range(k):
        if step == 0:
            t["0/fc_input"] = torch.randn(rows, 3 * h, generator=gen)
        for stage in ("fc_output", "embeddings", "layer_output"):
            t[f"{step}/{stage}"] = torch.randn(rows - step, h, generator=gen)
        t[f"{step}/logits"] = torch.randn(rows - step, v, generator=gen) * 3
    s = {key: val.clone() for key, val in t.items()}
    s["0/fc_input"] = torch.cat([s["0/fc_input"], torch.zeros(1, 3 * h)])  # serving's extra row
    return t, s


def test_compare_aligns_rows_and_reports_first_stage():
    t, s = _sides()
    stages, first = compare("x", t, s, 2, FP32)
    assert first is None and all(d.ok for d in stages)
    assert stages[0].stage == "fc_input" and stages[0].rows == 6
    s["1/layer_output"] = s["1/layer_output"] + 1e-3
    s["1/logits"] = s["1/logits"] + torch.tensor([0.0, 1.0, 0, 0, 0])
    _, first = compare("x", t, s, 2, FP32)
    assert (first.step, first.stage) == (1, "layer_output")


def test_compare_names_width_and_mapping_differences():
    t, s = _sides()
    s["0/fc_input"] = s["0/fc_input"][:, :16]  # two aux states instead of three
    _, first = compare("x", t, s, 2, FP32)
    assert first.stage == "fc_input" and "shapes differ" in first.message
    t, s = _sides()
    s["vocab_map"] = torch.arange(5)
    stages, first = compare("x", t, s, 2, FP32)
    assert first.stage == "vocab_mapping" and "map to another target token" in first.message
    assert [d.ok for d in stages if d.stage == "logits"] == [True, True]


def test_tolerances_live_in_one_place_with_reasons():
    assert for_dtype("float32") is FP32 and for_dtype("bfloat16") is BF16
    assert FP32.logits_atol <= 1e-4 and FP32.kl_max == pytest.approx(FP32.logits_atol ** 2)
    assert FP32.top1_min == 1.0
    for tol in (FP32, BF16):
        assert set(tol.reasons) == {"state", "logits", "kl", "top1", "vocab_mapping"}
    with pytest.raises(ValueError):
        for_dtype("int8")


# -- GPU tier ------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_bf16_default_backend_gives_the_same_logits():
    """The same comparison with SGLang's default GPU attention backend, bf16 (bench/gpu_forward.sh)."""
    target = fixture_target("llama-8l")
    cases = fixture_cases(target, ("born-from", "no-d2t", "norm_before_residual"))
    out = {r.name: r for r in forward_parity(target, cases, dtype="bfloat16", device="cuda")["results"]}
    m = out["matched"]
    assert m.verdict == "parity", (m.first_divergence, m.error)
    for s in m.stages:
        if s.stage == "logits":
            assert s.max_abs <= BF16.logits_atol and s.top1 >= BF16.top1_min
    for drift in ("born-from", "no-d2t", "norm_before_residual"):
        first = out[drift].first_divergence
        assert out[drift].verdict == "drift" and (first.step, first.stage) == EXPECTED_STAGE[drift]


# -- vLLM's draft forward (the first step) ------------------------------------------------------

# What vLLM 0.34's draft class does with each injected drift at step 0 (run; 0.33 the same): the flags vLLM
# reads from a speculators-format config it honours (norm_before_residual, both fc norms), it
# keeps a draft's own embedding, norm_output only changes the state fed back (step 1 on), and a
# config that drops fc_norm while its weights remain does not load at all.
VLLM_PARITY = {"matched", "matched-fc_norm-norm_output", "matched-norm_before_fc", "matched-llama3-rope",
               "norm_before_residual", "norm_output", "draft-embedding"}
VLLM_DRIFT = {"born-from", "norm_before_fc", "no-d2t", "rope-theta", "rope-scaling"}


def test_vllm_forward_gives_the_first_steps_logits_of_training(capsys):
    rc = cli.main(["forward", "--engine", "vllm", "--vllm", "0.34.0", "--fixture", "llama-8l", "--drift", "all", "--flags-on", "--rope",
                   "--steps", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 2 and out["vllm"] == "0.34.0"  # fc_norm: vLLM cannot load it, so that case could not run
    results = {r["name"]: r for r in out["results"]}
    assert set(results) == VLLM_PARITY | VLLM_DRIFT | {"fc_norm"}
    for name in VLLM_PARITY:
        r = results[name]
        assert r["verdict"] == "parity", (name, r["error"] or r["first_divergence"])
        assert [s["stage"] for s in r["stages"]] == list(STAGES) and all(s["ok"] for s in r["stages"])
    for name in VLLM_DRIFT:
        first = results[name]["first_divergence"]
        assert (first["step"], first["stage"]) == EXPECTED_STAGE[name], (name, first)
    assert results["fc_norm"]["verdict"] == "error" and "fc_norm" in results["fc_norm"]["error"]
    matched = results["matched"]["serving"]
    assert matched["engine"] == "vllm" and matched["runner"] == "v2" and matched["embedding"] == "target"
    assert results["draft-embedding"]["serving"]["embedding"] == "draft"
    # rows past the declared positions (512; Llama-3.1's rope: 2048, scaled from 8192), each group within
    # tolerance: vLLM's SpeculativeConfig raised the draft's max_position_embeddings to the target's context
    rope = results["matched-llama3-rope"]["serving"]
    assert rope["positions"] == [*range(6), *range(2047, 2052), *range(8191, 8196)]
    assert rope["draft_positions"] == ("the draft's max_position_embeddings 131072 (raised by vllm 0.34.0's config "
                                       "classes from the declared 2048), rope table 131072 rows; served context "
                                       "(max_model_len) 131072")
    for name in ("matched", "matched-llama3-rope"):
        groups = [g for s in results[name]["stages"] if s["stage"] != "vocab_mapping" for g in s["groups"]]
        assert groups and all(g["ok"] for g in groups), name
    scaling = {g["group"]: g for s in results["rope-scaling"]["stages"] if s["stage"] == "logits" for g in s["groups"]}
    near = scaling[WITHIN]["max_abs"]
    for name in ("past max_position_embeddings 2048", "past rope_scaling.original_max_position_embeddings 8192"):
        assert scaling[name]["max_abs"] > 100 * near, scaling  # 0.37 and 0.27 against 4.8e-4 near 0


def test_vllm_forward_runs_an_mla_moe_target(capsys):
    rc = cli.main(["forward", "--engine", "vllm", "--vllm", "0.34.0", "--fixture", "deepseek-v3-8l", "--steps", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["results"][0]["verdict"] == "parity", out["results"][0]["error"]


@pytest.mark.parametrize("argv, says", [
    (["--steps", "3"], "--engine vllm --steps 3: vLLM's draft steps after the first"),
    (["--steps", "1", "--sglang", "0.5.14"], "--sglang names an SGLang release, but the engine is vllm"),
])
def test_vllm_forward_bad_input_is_one_line(argv, says, capsys):
    rc = cli.main(["forward", "--engine", "vllm", "--vllm", "0.34.0", "--fixture", "llama-8l", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and says in err and err.count("\n") == 1, err
