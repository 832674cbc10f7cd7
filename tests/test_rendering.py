"""Rendering without engines: results built by hand from the real models, rendered, snapshotted.

Every report parity prints (the check's slot table, the contract, the version matrix and
can-i-deploy's answer, the forward table, the replay table) is rendered here from a result
built by hand: contracts from parity.contract's models, decided by the gate's own `decide`
and assembled into matrix rows by the matrix's own code, so a renderer change shows as a
snapshot diff (tests/__snapshots__/test_rendering.ambr; `pytest tests/test_rendering.py
--snapshot-update` rewrites it after a deliberate change, to be reviewed like code). The
README's example output must be exactly what the renderer prints for the same result.
"""

from __future__ import annotations

import itertools
import json
import re

import pytest

from parity.contract import BuiltDraft, Finding, GraphFlags, Provenance, ServingContract, TargetModel, TrainingContract, VocabMapping
from parity.errors import CannotExtract
from parity.forward.compare import Divergence, ForwardResult, StageDiff
from parity.report.forward import render_forward, render_summary
from parity.gate import CheckResult, ExportAdvice, Suggestion, decide
from parity.matrix import CANNOT, Matrix
from parity.matrix.cells import matrix_rows
from parity.matrix.deploy import answer
from parity.matrix.schedule import Extractions, training_key
from parity.releases import Release
from parity.report.replay import render_replay
from parity.replay.result import ReplayResult, WiringScore
from parity.report import render_check, render_contract
from parity.report.matrix import render_markdown, render_text
from parity.report.table import Column, Table

from .helpers import ROOT

# -- contracts: the bundled Kimi-K2.5 example ------------------------------------------------

KIMI = TargetModel(architecture="KimiK25ForConditionalGeneration", model_type="kimi_k25",
                   text_architecture="DeepseekV3ForCausalLM", num_hidden_layers=61, hidden_size=7168,
                   vocab_size=163840, quantization="compressed-tensors")  # as from_hf_config reads the fixture
LAYOUT = ("h0", "h3", "h31", "h59")
TARGET_PATH = "fixtures/targets/kimi-k2.5/config.json"
DRAFT_PATH = "fixtures/drafts/kimi-k2.5-eagle3"
IDS_SOURCE = "eagle_config['eagle_aux_hidden_state_layer_ids']"
FLAGS = GraphFlags(norm_before_fc=False, fc_norm=False, norm_output=False, norm_before_residual=False)
VOCAB = VocabMapping(draft_vocab_size=32000, target_vocab_size=163840, d2t="offsets", t2d="present",
                     mapping="target = d + d2t[d]")
BUILT = dict(vocab_size=163840, draft_vocab_size=32000, hidden_size=7168, target_hidden_size=7168,
             num_hidden_layers=1, num_attention_heads=64, num_key_value_heads=8, head_dim=112,
             intermediate_size=18432, hidden_act="silu", rms_norm_eps=1e-5, rope_scale=1.0,
             rope_frequencies=(1.0, 0.258503, 0.0668236, 0.0172739, 0.00446537, 0.00115431, 0.000298389,
                               0.0000771335),
             rope_theta=50000.0, max_position_embeddings=262144, lm_head_tied=False, dtype="bfloat16",
             layers_built=1, later_layer_input_norms=(),
             # the bundled draft config's 17 keys, every one read by both sides (as `./dev example` reports)
             config_keys_read=("architectures", "draft_vocab_size", "eagle_config", "hidden_act", "hidden_size",
                               "intermediate_size", "max_position_embeddings", "model_type", "num_attention_heads",
                               "num_hidden_layers", "num_key_value_heads", "rms_norm_eps", "rope_theta",
                               "target_hidden_size", "tie_word_embeddings", "torch_dtype", "vocab_size"))
TRAINED_BUILT = BuiltDraft(built_by="speculators 0.9.0 Eagle3DraftModel", config_from=(
    "the served config.json, no --trained given (mapped as its Eagle3Converter maps an EAGLE-3 config)"), **BUILT)
SERVED_BUILT = BuiltDraft(built_by="sglang 0.5.23 LlamaForCausalLMEagle3",
                          config_from="the served config.json (its ModelConfig)", **BUILT)
NOT_FINAL = Finding(kind="target_not_final_layer", slot=3, message=(
    "the loss target is h59 (dump slot 3), not h61, the last of the target's 61 layers: the draft is "
    "trained to predict the LM head on h59, not on the model's real output"))


def training(version: str = "0.9.0", fc=("h0", "h3", "h31"), findings=(NOT_FINAL,)) -> TrainingContract:
    return TrainingContract(
        target_model=KIMI, fc_input=fc, graph=FLAGS, vocab=VOCAB, embedding="target", draft=TRAINED_BUILT,
        provenance=Provenance(package="speculators", version=version, source="installed",
                              code_path="speculators.train.data.ArrowDataset._get_raw_data"),
        findings=findings, dump_layout=LAYOUT, dump_layout_source="manifest",
        fc_slots=tuple(LAYOUT.index(t) for t in fc), target="h59", target_slot=3, target_normed_by_trainer=True,
        alignment="shift_batch: input_ids[t+1] and hidden_states[t] predict verifier_last_hidden_states[t+1]")


MODEL_CLASS = "sglang.srt.models.kimi_k25.KimiK25ForConditionalGeneration"


def serving(fc, ids=(2, 30, 58), version: str = "0.5.23", findings=(), graph=FLAGS,
            capture=None, model_class: str | None = MODEL_CLASS) -> ServingContract:
    return ServingContract(
        target_model=KIMI, fc_input=fc, graph=graph, vocab=VOCAB, embedding="target", engine="sglang",
        draft=SERVED_BUILT,
        provenance=Provenance(package="sglang", version=version,  # the main environment's, else another named
                              source="installed" if version == "0.5.23" else "flag",
                              environment=None if version == "0.5.23" else f"sglang-{version}",
                              code_path="sglang.srt.models.deepseek_v2.DeepseekV2Model.forward",
                              details={"model_class": model_class} if model_class else {}),
        findings=findings, requested_ids=ids, ids_source=IDS_SOURCE if ids is not None else "engine default",
        capture_ids=capture if capture is not None else (tuple(i + 1 for i in ids) if ids else None))


def check_result(t: TrainingContract, s: ServingContract, suggestion: Suggestion | None = None,
                 unfixable: str | None = None, export: ExportAdvice | None = None) -> CheckResult:
    """What the gate's `check` returns for these two contracts, decided by the gate itself."""
    verdict, d, differences, unservable = decide(t, s)
    if verdict == "unservable":
        differences = [x for x in differences if x.blocks_serving]
    notes = [f"{c.side}: {f.message}" for c in (t, s) for f in c.findings
             if f.severity == "warning" or f.kind == "not_captured"]
    return CheckResult(verdict=verdict, training=t, serving=s, diff=d, differences=differences, notes=notes,
                       suggestion=suggestion, unfixable=unfixable, unservable=unservable, export=export)


def fix(ids=(0, 3, 31), version: str = "0.5.23", verified: bool = True, feeds=("h0", "h3", "h31")) -> Suggestion:
    return Suggestion(engine="sglang", engine_version=version, eagle_aux_hidden_state_layer_ids=list(ids),
                      verified=verified, serving_fc_input=list(feeds))


NO_FIX_0_5_12 = ("no id list makes sglang 0.5.12.post1 feed ['h0', 'h3', 'h31'] (tried [-1, 2, 30] -> "
                 "engine raised TypeError: '<' not supported between instances of 'NoneType' and 'int'; "
                 "[0, 3, 31] -> ['h1', 'h4', 'h32']; [1, 4, 32] -> ['h2', 'h5', 'h33'])")
UNLOADABLE = Finding(kind="draft_unloadable", severity="error", message=(
    "sglang 0.5.23 cannot load fixtures/drafts/kimi-k2.5-eagle3: its config.json is in speculators' format "
    "(speculators_model_type 'eagle3'), which LlamaForCausalLMEagle3 does not read"))
RAISED = Finding(kind="engine_error", severity="error", message=(
    "sglang 0.5.23 captured 2 of 3 requested states: set_eagle3_layers_to_capture raised ValueError on "
    "ids [-1, 2, 30]"))
DROPPED = Finding(kind="not_captured", severity="error", slot=2, message=(
    "sglang 0.5.14 captured only 2 of 3 requested states: id -1 was dropped without an error"))

def _training_only_key(key: str) -> tuple[TrainingContract, ServingContract]:
    """The bundled draft's contracts with `key` set too: read by training, for training only; never
    read by the engine."""
    read = tuple(sorted((*BUILT["config_keys_read"], key)))
    t = training()
    t = t.model_copy(update={"draft": t.draft.model_copy(update={"config_keys_read": read,
                                                                  "config_keys_training_only": (key,)})})
    s = serving(("h0", "h3", "h31"), ids=(0, 3, 31))
    return t, s.model_copy(update={"draft": s.draft.model_copy(update={"config_keys_unread": (key,)})})


CHECKS = {
    # the README's example: the draft config's ids mean h2/h30/h58 from 0.5.14 on
    "drift_born_from": lambda: check_result(training(), serving(("h2", "h30", "h58")), suggestion=fix()),
    "parity_fixed_draft": lambda: check_result(training(), serving(("h0", "h3", "h31"), ids=(0, 3, 31))),
    "drift_no_fix_on_0_5_12": lambda: check_result(
        training(), serving(("h3", "h31", "h59"), version="0.5.12.post1", capture=(2, 30, 58)),
        unfixable=NO_FIX_0_5_12),
    "drift_unverified_fix_and_a_flag": lambda: check_result(
        training(), serving(("h2", "h30", "h58"), graph=FLAGS.model_copy(update={"norm_before_fc": True})),
        suggestion=fix(verified=False)),
    "drift_dropped_slot": lambda: check_result(
        training(), serving(("h2", "h30", None), ids=(-1, 2, 30), version="0.5.14", findings=(DROPPED,)),
        unfixable="ids [0, 3, 31] capture ['h0', 'h3', 'h31'] on the engine's model, but written in "
                  "eagle_config.eagle_aux_hidden_state_layer_ids, the engine feeds ['h1', 'h4', 'h32']"),
    "drift_default_ids": lambda: check_result(training(), serving(("h2", "h30", "h58"), ids=None, capture=(2, 30, 58),
                                                                  model_class=None), suggestion=fix()),
    "unservable_export_helps": lambda: check_result(
        training(), serving((None, None, None), findings=(UNLOADABLE,)),
        export=ExportAdvice(exportable=True, eagle_aux_hidden_state_layer_ids=[0, 3, 31],
                            serving_fc_input=["h0", "h3", "h31"])),
    "unservable_export_refuses": lambda: check_result(
        training(), serving((None, None, None), findings=(UNLOADABLE,)),
        export=ExportAdvice(exportable=False, reason="the draft's fc expects 3 states of width 7168 but its "
                                                     "weights are 2 x 7168 wide")),
    "unservable_no_verify": lambda: check_result(training(), serving((None, None, None), findings=(UNLOADABLE,))),
    # issue 48: a key the served config sets that training read and the engine never reads, which the
    # draft training built computes the same without (SpecForge's pad_token_id): a note, not a drift
    "parity_key_read_by_training_only": lambda: check_result(*_training_only_key("pad_token_id")),
    "unservable_engine_raised_on_ids": lambda: check_result(
        training(), serving((None, None, None), ids=(-1, 2, 30), findings=(RAISED,)), suggestion=fix()),
}


@pytest.mark.parametrize("case", sorted(CHECKS))
def test_check_report(case, snapshot):
    result = CHECKS[case]()
    assert render_check(result, TARGET_PATH, DRAFT_PATH) == snapshot
    assert render_check(result) == snapshot(name="without paths")
    if case in ("drift_born_from", "parity_fixed_draft", "unservable_export_helps",
                "parity_key_read_by_training_only"):  # `check --json`
        assert json.dumps(result.to_json_dict(), indent=2) == snapshot(name="json")


def test_the_verdicts_are_the_gates():
    """The hand-built cases are the cases their names say (decided by gate.decide)."""
    verdicts = {name: make().verdict for name, make in CHECKS.items()}
    assert verdicts == {name: name.split("_")[0] for name in CHECKS}


@pytest.mark.parametrize("side", ["training", "serving", "serving_unservable"])
def test_contract_report(side, snapshot):
    contract = {"training": training(), "serving": serving(("h2", "h30", "h58")),
                "serving_unservable": serving((None, None, None), findings=(UNLOADABLE,))}[side]
    assert render_contract(contract) == snapshot


def _readme_block(after: str, page: str = "README.md") -> list[str]:
    """The indented block of README.md (or another page) that follows the line starting with
    `after`, unindented."""
    lines = (ROOT / page).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(after)) + 1
    block = []
    for line in lines[start:]:
        if line and not line.startswith("    "):
            break
        block.append(line[4:])
    while block and not block[0]:
        block.pop(0)
    while block and not block[-1]:
        block.pop()
    return block


def test_readme_example_output_is_what_the_renderer_prints():
    """The README shows the bundled example's output (`./dev example`) exactly as `render_check`
    prints it for that result: the verdict, the slot table, the loss target, the notes, the fix."""
    shown = _readme_block("The example prints")
    assert shown, "README.md shows no example output"
    result = CHECKS["drift_born_from"]()
    assert shown == render_check(result, TARGET_PATH, DRAFT_PATH).splitlines()


# -- the version matrix and can-i-deploy ----------------------------------------------------

def release(package: str, version: str, problem: str | None = None) -> Release:
    return Release(package, version, None if problem else f"{package}-{version}", problem)


def matrix(speculators: dict, sglang: dict, locked: TrainingContract | None = None,
           contract: str | None = None, draft: str = DRAFT_PATH) -> Matrix:
    """A matrix assembled by the matrix's own code (rows, verdicts, changes) from hand-built
    extractions: `speculators` maps each release to its training contract (or its error line,
    or None: not declared); `sglang` maps each release to a function of the training contract
    giving its check result (or an exception it raised; None: not declared)."""
    trels = [release("speculators", v, None if c is not None else "not declared") for v, c in speculators.items()]
    srels = [release("sglang", v, None if f is not None else f"no environment pins sglang=={v}")
             for v, f in sglang.items()]
    done = Extractions(training={v: c if c is not None else f"{CANNOT} speculators {v}: not declared"
                                 for v, c in speculators.items()})
    judged = [locked] if locked is not None else [c for c in speculators.values() if isinstance(c, TrainingContract)]
    for t in judged:
        for v, check in sglang.items():
            if check is not None:
                outcome = check(t)
                done.checks[(v, training_key(t))] = ((None, outcome) if isinstance(outcome, Exception)
                                                     else (outcome, None))
    rows_t, rows_s = matrix_rows(trels, srels, done, locked)
    return Matrix(target=KIMI.architecture, num_layers=61, draft=draft, dump_layout=list(LAYOUT),
                  contract=contract, training=rows_t, serving=rows_s)


def served(fc, ids=(2, 30, 58), version="0.5.23", findings=(), **kw):
    """A serving release as a function of the training contract: its check result."""
    return lambda t: check_result(t, serving(fc, ids=ids, version=version, findings=findings), **kw)


def born_from() -> Matrix:
    return matrix({"0.7.0.2": training("0.7.0.2"), "0.9.0": training("0.9.0")},
                  {"0.5.12.post1": served(("h3", "h31", "h59"), version="0.5.12.post1", unfixable=NO_FIX_0_5_12),
                   "0.5.14": served(("h2", "h30", "h58"), version="0.5.14", suggestion=fix(version="0.5.14")),
                   "0.5.23": served(("h2", "h30", "h58"), suggestion=fix())})


LOCK = "contracts/kimi-k2.5-eagle3.json"
LOCK_NO_FIX = ("no id list makes sglang 0.5.12.post1 feed ['h0', 'h3', 'h31'] (tried [-1, 2, 30] -> engine "
               "raised TypeError: '<' not supported between instances of 'NoneType' and 'int'; [0, 3, 31] -> "
               "['h1', 'h4', 'h32']; [1, 4, 32] -> ['h2', 'h5', 'h33'])")


def locked() -> Matrix:
    """The README's `parity matrix --contract contracts/kimi-k2.5-eagle3.json`: the fixed draft."""
    return matrix({"0.7.0.2": training("0.7.0.2"), "0.9.0": training("0.9.0")},
                  {"0.5.10": served(("h1", "h4", "h32"), ids=(0, 3, 31), version="0.5.10",
                                    unfixable=LOCK_NO_FIX.replace("0.5.12.post1", "0.5.10")),
                   "0.5.12.post1": served(("h1", "h4", "h32"), ids=(0, 3, 31), version="0.5.12.post1",
                                          unfixable=LOCK_NO_FIX),
                   **{v: served(("h0", "h3", "h31"), ids=(0, 3, 31), version=v)
                      for v in ("0.5.14", "0.5.18", "0.5.21", "0.5.22")},
                   "0.5.23": served(("h0", "h3", "h31"), ids=(0, 3, 31))},
                  locked=training(), contract=LOCK, draft="fixtures/drafts/kimi-k2.5-eagle3-fixed")


def cannot() -> Matrix:
    """[-1, 2, 30] and releases parity cannot run: an undeclared training release, an
    undeclared SGLang release, one without an adapter, one that drops a slot, one that raises."""
    minus_one = (-1, 2, 30)
    return matrix({"0.1.0": None, "0.9.0": training("0.9.0")},
                  {"0.4.0": None,
                   "0.5.13": lambda t: CannotExtract("sglang", "0.5.13", "no parity adapter for sglang 0.5.13 "
                                                     "(looked for release '0.5.13' in the adapters' ranges)"),
                   "0.5.14": served(("h2", "h30", None), ids=minus_one, version="0.5.14", findings=(DROPPED,),
                                    unfixable="no id list makes sglang 0.5.14 feed ['h0', 'h3', 'h31']"),
                   "0.5.23": served((None, None, None), ids=minus_one, findings=(RAISED,), suggestion=fix())})


def training_moved() -> Matrix:
    """Against a lock, a speculators release that trains on something else, and one that changed."""
    moved = training("0.7.0.2", fc=("h0", "h3", "h59"))
    return matrix({"0.7.0.2": moved, "0.9.0": training("0.9.0")},
                  {"0.5.23": served(("h0", "h3", "h31"), ids=(0, 3, 31))},
                  locked=training(), contract=LOCK)


MATRICES = {"born_from": born_from, "locked": locked, "cannot_extract": cannot, "training_moved": training_moved}


@pytest.mark.parametrize("case", sorted(MATRICES))
def test_matrix_report(case, snapshot):
    m = MATRICES[case]()
    assert render_text(m) == snapshot(name="text")
    assert render_markdown(m) == snapshot(name="markdown")
    assert json.dumps(m.to_json_dict(), indent=2) == snapshot(name="json")


def test_the_matrix_cells_are_the_cases():
    born = born_from()
    assert [r.fc_input for r in born.serving] == [["h3", "h31", "h59"], ["h2", "h30", "h58"], ["h2", "h30", "h58"]]
    assert "slot 0: h3 -> h2" in born.serving[1].changed and not born.serving[2].changed
    assert not born.ok and locked().serving[2].verdicts[0].verdict == "parity"  # 0.5.14, after 0.5.10 and 0.5.12.post1
    bad = cannot()
    assert [bool(r.error) for r in bad.serving] == [True, True, False, False]
    assert [v.verdict for v in bad.serving[3].verdicts] == ["error", "unservable"]


def test_the_same_refusal_under_the_next_release_is_no_change():
    """Two releases refused for the same reason (their own numbers aside) are no change; another
    reason is."""
    m = matrix({"0.1.0": None, "0.2.0": None, "0.9.0": training("0.9.0")},
               {"0.4.0": None, "0.4.1": None,
                "0.5.13": lambda t: CannotExtract("sglang", "0.5.13", "no parity adapter for sglang 0.5.13"),
                "0.5.23": served(("h2", "h30", "h58"))})
    assert [r.changed for r in m.training[:2]] == [[], []]
    assert [r.changed for r in m.serving[:3]] == [[], [], ["cannot be extracted, for another reason"]]
    assert m.serving[3].changed == ["extractable again"]


def test_readme_matrix_lines_are_what_the_renderer_prints():
    """The matrix docs/matrix.md shows (abridged: the serving table only, a long reason cut at
    '...)') shows lines the renderer prints for the same cells, in its order."""
    shown = _readme_block("    ./dev parity matrix --contract", "docs/matrix.md")
    printed = render_text(locked()).splitlines()
    at = 0
    for line in shown:
        cut = line[:-len("...)")] if line.endswith("...)") else None
        found = next((i for i in range(at, len(printed))
                      if printed[i] == line or (cut is not None and printed[i].startswith(cut))), None)
        assert found is not None, f"README line not printed (in order): {line!r}\n" + "\n".join(printed)
        at = found + 1


DEPLOY = {
    "yes": lambda: (locked_pair("0.5.23", ("h0", "h3", "h31")), "0.5.23"),
    "no_fix": lambda: (pair(served(("h2", "h30", "h58"), suggestion=fix())), "0.5.23"),
    "no_fix_unverified": lambda: (pair(served(("h2", "h30", "h58"), suggestion=fix(verified=False))), "0.5.23"),
    "no_fix_on_this_release": lambda: (pair(served(("h3", "h31", "h59"), version="0.5.12.post1",
                                                   unfixable=NO_FIX_0_5_12), "0.5.12.post1"), "0.5.12.post1"),
    "no_unservable": lambda: (pair(served((None, None, None), findings=(UNLOADABLE,))), "0.5.23"),
    "no_lock_moved": lambda: (matrix({"0.9.0": training(fc=("h0", "h3", "h59"))},
                                     {"0.5.23": served(("h0", "h3", "h31"), ids=(0, 3, 31))},
                                     locked=training(), contract=LOCK), "0.5.23"),
    "cannot_tell": lambda: (matrix({"0.1.0": None}, {"0.5.23": served(("h2", "h30", "h58"))}), "0.5.23"),
}


def pair(check, version: str = "0.5.23") -> Matrix:
    return matrix({"0.9.0": training()}, {version: check})


def locked_pair(version: str, fc) -> Matrix:
    return matrix({"0.9.0": training()}, {version: served(fc, ids=(0, 3, 31))}, locked=training(), contract=LOCK)


@pytest.mark.parametrize("case", sorted(DEPLOY))
def test_can_i_deploy_answer(case, snapshot):
    m, sglang = DEPLOY[case]()
    a = answer(m, sglang, m.training[0].version)
    assert {True: "yes", False: "no", None: "cannot"}[a.deploy] == case.split("_")[0]
    assert a.reason == snapshot(name="reason")
    if case in ("yes", "cannot_tell"):  # `can-i-deploy --json`: the answer and its one-cell matrix
        assert json.dumps(a.to_json_dict(), indent=2) == snapshot(name="json")


# -- the forward table ----------------------------------------------------------------------

TOLERANCES = {"dtype": "float32", "state_atol": 1e-05, "state_rtol": 3e-05, "logits_atol": 5e-05,
              "kl_max": 2.5e-09, "top1_min": 1.0, "reasons": {}}
TRAINING_META = {"dump_layout": ["h0", "h3", "h31", "h59"], "embedding": "target",
                 "flags": {"norm_before_residual": False, "fc_norm": False}}
SERVING_META = {"requested_ids": [0, 3, 31], "capture_ids": [1, 4, 32], "device": "cpu",
                "graph": {"norm_before_residual": False}, "embedding": "target", "vocab_mapping": "d2t offsets",
                "attention": {"target": "torch_native (SDPA)", "draft": "torch_native (SDPA)"}}


def stages(diverge_at: str | None = None, steps: int = 2) -> list[StageDiff]:
    out, bad = [], False
    for step in range(steps):
        for stage in ("fc_input", "fc_output", "embeddings", "layer_output", "logits", "vocab_mapping"):
            if stage == "fc_input" and step:
                continue
            bad = bad or stage == diverge_at
            rows = 15 - step
            if stage == "logits":
                out.append(StageDiff(step=step, stage=stage, rows=rows, ok=not bad,
                                     max_abs=0.84 if bad else 3.1e-6, tol=5e-05, top1=0.4 if bad else 1.0,
                                     near_ties=1 if bad else None, kl_max=0.31 if bad else 2.2e-12,
                                     kl_mean=0.12 if bad else 4.0e-13,
                                     per_row_max_abs=[0.84 if bad else 3.1e-6] * 4,
                                     per_row_kl=[0.31 if bad else 2.2e-12] * 4,
                                     why="max |diff| 0.84 > 5e-05" if bad else None))
            elif stage == "vocab_mapping":
                out.append(StageDiff(step=step, stage=stage, rows=rows, ok=True, mismatched=0))
            else:
                out.append(StageDiff(step=step, stage=stage, rows=rows, ok=not bad, max_abs=1.7 if bad else 4.2e-7,
                                     tol=2.4e-5, ref_max=0.48))
    return out


def _past_positions() -> ForwardResult:
    """A rope drift that shows only past the draft's 512 declared positions (rows placed by
    parity.forward.positions: 0..10, then 511..515), compared by compare() itself."""
    import torch

    from parity.forward.compare import compare
    from parity.forward.positions import plan
    from parity.forward.tolerances import FP32

    where = plan(16, 1, {"max_position_embeddings": 512}, {"max_position_embeddings": 512}, 131072)
    rows = torch.arange(15, dtype=torch.float64)[:, None]
    train = {"0/layer_output": torch.cos(rows + torch.arange(4)), "0/logits": torch.sin(rows + torch.arange(3)),
             "vocab_map": torch.arange(3)}
    serve = {k: v.clone() for k, v in train.items()}
    serve["0/layer_output"][12:] += 0.25
    serve["0/logits"][12:, 0] += 0.5
    got, first = compare("rope", train, serve, 1, FP32, where)
    return ForwardResult(name="rope-past-512", verdict="drift", dtype="float32", tolerances=TOLERANCES,
                         stages=got, first_divergence=first, training=TRAINING_META, serving=SERVING_META)


FORWARDS = {
    "parity": lambda: ForwardResult(name="as-trained", verdict="parity", dtype="float32", tolerances=TOLERANCES,
                                    stages=stages(), training=TRAINING_META, serving=SERVING_META),
    "drift": lambda: ForwardResult(
        name="off-by-one", verdict="drift", dtype="float32", tolerances=TOLERANCES, stages=stages("fc_input"),
        first_divergence=Divergence(step=0, stage="fc_input", message="max |diff| 1.7 > 2.4e-05: serving feeds "
                                    "[h1, h4, h32] where training reads [h0, h3, h31]"),
        notes=["expected: the injected off-by-one shows first at step 0, fc_input"],
        training=TRAINING_META, serving={**SERVING_META, "requested_ids": [1, 4, 32], "capture_ids": [2, 5, 33]}),
    "error": lambda: ForwardResult(name="as-trained", verdict="error", dtype="float32", tolerances=TOLERANCES,
                                   error="the serving side raised: RuntimeError: no CPU kernel for fused MoE",
                                   training=TRAINING_META),
    "past-positions": lambda: _past_positions(),
    "unservable": lambda: ForwardResult(
        name="no-d2t", verdict="unservable", dtype="float32", tolerances=TOLERANCES, training=TRAINING_META,
        serving=SERVING_META, error="serving: sglang 0.4.8.post1 cannot serve this draft: the EAGLE worker's "
        "start-up call get_hot_token_id() raises AttributeError: 'LlamaForCausalLMEagle3' object has no "
        "attribute 'hot_token_id'"),
}


@pytest.mark.parametrize("case", sorted(FORWARDS))
def test_forward_report(case, snapshot):
    result = FORWARDS[case]()
    assert render_forward(result, TARGET_PATH) == snapshot(name="text")
    assert render_forward(result, per_position=False) == snapshot(name="brief")
    if case == "drift":  # one result of `forward --json`
        assert json.dumps(result.model_dump(), indent=2) == snapshot(name="json")


def test_forward_summary(snapshot):
    assert render_summary([FORWARDS[c]() for c in sorted(FORWARDS)]) == snapshot


# -- the replay table -----------------------------------------------------------------------

REPLAY_LAYOUT = ("h0", "h2", "h5", "h7")
# The README's numbers for the wirings it shows; every other wiring scores below them.
README_SCORES = {("h0", "h2", "h5"): (0.849, 0.720, 0.613), ("h0", "h2", "h7"): (0.735, 0.576, 0.457),
                 ("h2", "h5", "h7"): (0.337, 0.153, 0.082)}


def scores(roles: dict, rank_of_served: int = 14) -> tuple[WiringScore, ...]:
    """Every ordered choice of 3 of the 4 dumped states (24 wirings), best first."""
    wirings = list(itertools.permutations(range(4), 3))
    known = sorted(README_SCORES, key=lambda w: -README_SCORES[w][0])
    others = [w for w in (tuple(REPLAY_LAYOUT[i] for i in p) for p in wirings) if w not in README_SCORES]
    ranked = known[:2] + others[:rank_of_served - 3] + [known[2]] + others[rank_of_served - 3:]
    out = []
    for rank, taps in enumerate(ranked):
        acc = README_SCORES.get(taps) or tuple(round(a - 0.011 * rank, 3) for a in (0.70, 0.52, 0.40))
        if taps not in README_SCORES and rank > rank_of_served - 1:
            acc = tuple(round(a - 0.30 - 0.004 * rank, 3) for a in (0.70, 0.52, 0.40))
        out.append(WiringScore(taps=taps, slots=tuple(REPLAY_LAYOUT.index(t) for t in taps),
                               roles=roles.get(taps, ("search",)), full_acc=acc,
                               cond_acc=tuple(round(a / acc[0], 3) for a in acc), positions=2016))
    return tuple(out)


def replay_result(verdict: str, score_list, served=("h2", "h5", "h7"), **kw) -> ReplayResult:
    fields = dict(verdict=verdict, draft="fixtures/replay/draft", data="fixtures/replay/data",
                  dump_layout=REPLAY_LAYOUT, samples=32, steps=3, scores=score_list, training=("h0", "h2", "h5"),
                  target="h7", served=served, served_form="the draft served as written: its ids [1, 4, 6] "
                  "in SGLang's eagle_config", search="exhaustive", speculators_version="0.9.0",
                  sglang_version="0.5.23" if served is not None else None,
                  wall_s={"total_s": 29.6, "replay_s": 13.2})
    return ReplayResult(**{**fields, **kw})


TRAINED, SERVED = ("h0", "h2", "h5"), ("h2", "h5", "h7")
REPLAYS = {
    "drift": lambda: replay_result("drift", scores({TRAINED: ("training",), SERVED: ("served",)})),
    "parity": lambda: replay_result("parity", scores({TRAINED: ("training", "served")}), served=TRAINED,
                                    served_form="the exported draft: ids [0, 2, 5]"),
    "no_serving": lambda: replay_result("parity", scores({TRAINED: ("training",)}), served=None, served_form=None),
    "unscored": lambda: replay_result("drift", scores({TRAINED: ("training",)}), served=("h1", "h2", "h5"),
                                      served_unscored="h1 is not in the dump [h0, h2, h5, h7]"),
    "suspect_close": lambda: replay_result(
        "suspect", tuple(s.model_copy(update={"full_acc": (0.849 - 0.01 * i, 0.7, 0.6)}) for i, s in
                         enumerate(scores({("h0", "h2", "h7"): ("training",), SERVED: ("served",)}))),
        training=("h0", "h2", "h7"), notes=("the dump layout was given, not read from a manifest",)),
    "no_search": lambda: replay_result("drift", tuple(s for s in scores({TRAINED: ("training",), SERVED: ("served",)})
                                                      if s.taps in (TRAINED, SERVED)), search="none"),
}


@pytest.mark.parametrize("case", sorted(REPLAYS))
def test_replay_report(case, snapshot):
    result = REPLAYS[case]()
    assert render_replay(result) == snapshot(name="top 8")
    assert render_replay(result, top=len(result.scores)) == snapshot(name="all")
    if case == "drift":  # `replay --json`
        assert json.dumps(result.to_json_dict(), indent=2) == snapshot(name="json")


def test_readme_replay_rows_are_what_the_renderer_prints():
    """docs/replay.md's table rows (rank 1, 2 and the served wiring at 14) are printed as shown."""
    text = render_replay(REPLAYS["drift"]())
    block = _readme_block("    $ ./dev parity replay", "docs/replay.md")
    rows = [line for line in block if re.match(r"\s+(rank|\d+)\s", line)]
    assert len(rows) == 4, block
    for line in rows:
        assert line in text.splitlines(), line


# -- the table itself -----------------------------------------------------------------------

def test_table_widths_alignment_and_running_cells():
    t = Table([Column("a"), Column("bb", align="right", width=4), Column("c", gap=3)])
    t.row("xyz", "1", "last")
    t.row("q", "12345", "")
    t.note("    a note, as is")
    t.row("an error that runs past the columns")
    assert t.lines() == ["  a       bb   c",
                         "  xyz      1   last",
                         "  q    12345",
                         "    a note, as is",
                         "  an error that runs past the columns"]
    with pytest.raises(ValueError):
        t.row("1", "2", "3", "4")


def test_what_a_verdict_did_not_check_is_said():
    """'Not checked': the launch without --serve-args, a DFlash draft's served block (its
    launch's draft tokens set it), the target's quantisation read off either side's contract."""
    from parity.report.check import unchecked_lines

    result = CHECKS["drift_born_from"]()
    lines = "\n".join(unchecked_lines(result))
    assert "no --serve-args" in lines and "compressed-tensors quantisation" in lines and "DFlash" not in lines
    dflash = result.model_copy(update={"serving": result.serving.model_copy(update={"draft_kind": "dflash"})})
    assert "the DFlash block sglang 0.5.23 serves" in "\n".join(unchecked_lines(dflash))
    plain = KIMI.model_copy(update={"quantization": None})
    old_lock = result.model_copy(update={"training": result.training.model_copy(update={"target_model": plain})})
    assert "compressed-tensors" in "\n".join(unchecked_lines(old_lock))  # the serving side says it
