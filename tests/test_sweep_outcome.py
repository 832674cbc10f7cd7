"""Each cell of the release table is classified when it is extracted, from the TYPE of what
stopped it (the exception's class, the error finding's kind), never from its message: extracted,
the engine refuses, parity cannot run. The published table counts them per engine, marks each
failed cell by its class, and says "not classified" of a failed cell saved before (never a class
guessed from its text). The slow tests run a real engine refusal and a real harness limit through
the sweep's own cell."""

from __future__ import annotations

import pytest

from parity.contract import FindingKind
from parity.envs import EnvError
from parity.contract.reply import stop_from_reply
from parity.errors import CannotExtract, HarnessLimit
from parity.extract.engines import ServingExtractionError, engine
from parity.inputs import InputError
from parity.contract.swept import Swept
from parity.report.releases import counts, render_releases
from parity.sweep.cases import SERVING_CASES
from parity.sweep.outcome import Outcome, of_cell, of_error, of_finding
from parity.sweep.run import launch_cell, refused, serving_cell

from .helpers import edit_in_shadow, shadow_release

CUDA_TEXT = "parity's CPU harness cannot run sglang 0.5.3: a CUDA-only code path (AssertionError: Torch not compiled)"


def test_the_outcome_follows_the_errors_type_not_its_message():
    """The same sentence reads as a limit of parity only when it is one (HarnessLimit), and as the
    engine's own refusal when the engine's reply said it (ServingExtractionError): a classifier
    that searched the text would give both the same class, and fail here."""
    limit = HarnessLimit("sglang", "0.5.3", "a CUDA-only code path (AssertionError: Torch not compiled)")
    engines_words = ServingExtractionError(str(limit))
    assert str(engines_words) == str(limit)
    assert of_error(limit) is Outcome.parity_cannot_run
    assert of_error(engines_words) is Outcome.engine_refuses
    # the other way round: words that sound like the engine's refusal, raised as parity's limit
    assert of_error(CannotExtract("vllm", "0.9.0", "the engine's forward raised TypeError")) is Outcome.parity_cannot_run
    assert of_error(InputError("the installed sglang defines no model class of that name")) is Outcome.engine_refuses
    # a release with no EAGLE-3 at all is its own answer, typed so by its probe (SGLang 0.4.4)
    lacks = stop_from_reply(CannotExtract.entry("sglang", "0.4.4", "sglang 0.4.4 has no EAGLE-3", engine_lacks=True),
                            "sglang")
    assert of_error(lacks) is Outcome.engine_refuses
    assert of_error(CannotExtract("sglang", "0.4.4", "sglang 0.4.4 has no EAGLE-3")) is Outcome.parity_cannot_run
    # an error raised from one of parity's own (its environment could not be found or built)
    try:
        try:
            raise EnvError("no environment has vllm 0.9.0")
        except EnvError as exc:
            raise ServingExtractionError(str(exc)) from exc
    except ServingExtractionError as wrapped:
        assert of_error(wrapped) is Outcome.parity_cannot_run
        assert refused(wrapped) == {"error": "no environment has vllm 0.9.0", "outcome": "parity cannot run"}


def test_every_finding_kind_is_placed_on_one_side():
    """A new FindingKind must be decided (the engine's behaviour or parity's limit), not defaulted:
    its declaration carries its Whose (FindingKind.__new__ requires it: a kind declared without it
    stops parity.contract from importing)."""
    from parity.contract import Whose

    assert all(isinstance(kind.whose, Whose) for kind in FindingKind)
    assert {kind for kind in FindingKind if kind.blocks_serving} == {FindingKind.engine_error, FindingKind.draft_unloadable}
    assert of_finding(FindingKind.engine_error) is Outcome.engine_refuses  # e.g. SGLang's own TypeError on id -1
    assert of_finding(FindingKind.not_captured) is Outcome.engine_refuses
    assert of_finding(FindingKind.unidentified_state) is Outcome.parity_cannot_run


def test_a_cell_saved_before_classification_is_never_classified_from_its_text():
    assert of_cell({"fc": ["h2", "h16", "h29"]}) is Outcome.extracted  # its structure: states named, no error
    assert of_cell({"error": CUDA_TEXT}) is None  # a failure: not classified, whatever its words
    assert of_cell({"fc": [None, None, None], "error": "TypeError"}) is None
    assert of_cell({"error": CUDA_TEXT, "outcome": "engine refuses"}) is Outcome.engine_refuses


CASES = {"sglang": {"llama32 [1,15,28]": "llama-3.1-8b (ids [1, 15, 28] in eagle_config)",
                    "llama32 [-1,15,28]": "llama-3.1-8b (ids [-1, 15, 28] in eagle_config)"}}
SEED = list(engine("sglang").seed_launch)


def _release(version, cells, launch=None):
    row = {"version": version, "build": {"seconds": 1.0}, "family": "0.5.3", "cases": cells}
    if launch is not None:
        row["launch"] = launch
    return row


DATA = {"format": 2, "cases": CASES, "sglang": {"releases": [
    # saved before cells were classified
    _release("0.5.2", {"llama32 [1,15,28]": {"fc": ["h2", "h16", "h29"]},
                       "llama32 [-1,15,28]": {"fc": [None, None, None], "error": "TypeError: Tensor + None"}}),
    _release("0.5.3", {"llama32 [1,15,28]": {"error": CUDA_TEXT, "outcome": "parity cannot run"},
                       "llama32 [-1,15,28]": {"fc": [None, None, None], "error": "TypeError: Tensor + None",
                                              "outcome": "engine refuses"}},
             {"argv": SEED, "requested": {"speculative_num_steps": 1, "speculative_num_draft_tokens": 16},
              "effective": {"speculative_num_steps": 1, "speculative_num_draft_tokens": 2, "context_length": 8192},
              "overrides": [{"field": "speculative_num_draft_tokens", "requested": 16, "effective": 2,
                             "by": "_handle_eagle_family"}], "outcome": "extracted"}),
    # the same text with the engine's outcome: marked as the engine's, whatever it says
    _release("0.5.4", {"llama32 [1,15,28]": {"error": CUDA_TEXT, "outcome": "engine refuses"},
                       "llama32 [-1,15,28]": {"fc": ["h0", "h16", "h29"], "outcome": "extracted"}},
             {"argv": SEED, "error": "--serve-args: sglang 0.5.4's argument parser refused them: unrecognized",
              "outcome": "engine refuses"}),
]}}


def test_the_table_counts_and_marks_each_cell_by_its_outcome():
    md = render_releases(DATA)
    lines = {ln.split(" | ")[0].lstrip("| "): ln for ln in md.splitlines() if ln.startswith("| 0.")}
    assert counts(Swept.read(DATA).section("sglang")) == {Outcome.extracted: 2, Outcome.engine_refuses: 2, Outcome.parity_cannot_run: 1,
                                      None: 1}
    assert ("Cells, per outcome: 2 extracted, 2 the engine refuses, 1 parity cannot run, 1 not classified "
            "(swept before cells were classified: `parity sweep --redo --sglang all`") in md
    assert "| h2, h16, h29 | ✗? 1 | not swept |" in lines["0.5.2"]  # swept before seed launches were
    assert "1. (not classified) TypeError: Tensor + None" in md
    assert "| **⊘ 2** | **✗ 3** |" in lines["0.5.3"]  # same error as 0.5.2's, classified now: changed
    assert "2. (parity cannot run it) parity's CPU harness cannot run sglang X" in md
    assert "3. (the engine refuses) TypeError: Tensor + None" in md
    assert "| **✗ 4** |" in lines["0.5.4"]  # the CUDA text, the engine's outcome: the engine's mark
    assert ("**speculative_num_steps 1, speculative_num_draft_tokens 2 (asked 16, by _handle_eagle_family)**"
            in lines["0.5.3"])
    assert "| **not resolved ✗ 5** |" in lines["0.5.4"]
    assert ("Seed launch resolved by 1 of 3 releases' own code (1 the engine refuses, 0 parity cannot run, "
            "1 not swept).") in md
    assert ("- seed launch: `--speculative-algorithm EAGLE3 --speculative-num-steps 1 --speculative-eagle-topk 1 "
            "--speculative-num-draft-tokens 16`") in md


# -- slow: real releases ---------------------------------------------------------------------------

LLAMA = "lib/python3.11/site-packages/sglang/srt/models/llama.py"
CAPTURE_LIST = "        aux_hidden_states = []\n"


@pytest.mark.slow  # runs SGLang 0.5.3.post1's probe
def test_sglangs_own_crash_on_id_minus_1_is_the_engines_refusal(tmp_path):
    """SGLang 0.5.3.post1 (as 0.4.9-0.5.21) adds 1 to each id, so -1 captures at layer 0, where its
    LlamaModel.forward adds a residual that is still None (`hidden_states + residual`): its own
    TypeError, the same on a GPU. The sweep's cell says so as the engine's refusal."""
    cell = serving_cell(SERVING_CASES[1], engine("sglang", "0.5.3.post1"), tmp_path)
    assert cell["outcome"] == "engine refuses", cell
    assert "TypeError: unsupported operand type(s) for +: 'Tensor' and 'NoneType'" in cell["error"], cell
    good = serving_cell(SERVING_CASES[0], engine("sglang", "0.5.3.post1"), tmp_path)
    assert good["outcome"] == "extracted" and good["fc"] == ["h2", "h16", "h29"] and "error" not in good, good


@pytest.mark.slow  # runs an edited copy of SGLang 0.5.3.post1's environment
def test_a_cuda_only_path_in_the_engines_forward_is_parity_cannot_run(tmp_path, monkeypatch):
    """The same release with its LlamaModel.forward touching CUDA (an edit in a copy of its
    environment): on this CPU that is a limit of parity's harness (HarnessLimit), never the
    engine's refusal; the seed launch still resolves with the release's own code, before any
    forward."""
    shadow, original, env = shadow_release(tmp_path, "sglang", "0.5.3.post1", {LLAMA: (CAPTURE_LIST, CAPTURE_LIST)})
    edit_in_shadow(shadow, LLAMA, CAPTURE_LIST, CAPTURE_LIST + "        torch.cuda.current_device()\n")
    for key in ("PARITY_HOME", "PYTHONPYCACHEPREFIX"):
        monkeypatch.setenv(key, env[key])
    cell = serving_cell(SERVING_CASES[0], engine("sglang", "0.5.3.post1"), tmp_path)
    assert cell["outcome"] == "parity cannot run", cell
    assert "CUDA-only code path" in cell["error"] and "fc" not in cell, cell
    assert "torch.cuda.current_device()" not in (original / LLAMA).read_text()  # the installed release untouched


@pytest.mark.slow  # runs SGLang 0.5.3.post1's and vLLM 0.10.2's probes
def test_each_release_resolves_the_seed_launch_with_its_own_code(tmp_path):
    """SGLang 0.5.3.post1 resolves the born-from command by its own __post_init__: 16 draft tokens
    asked, 2 run (top-k 1 resets them to steps + 1). vLLM 0.10.2 (the 0.9 family) resolves it by
    its own parser and config classes, unchanged."""
    sglang = launch_cell(engine("sglang", "0.5.3.post1"), tmp_path)
    assert sglang["outcome"] == "extracted", sglang
    assert sglang["effective"]["speculative_num_draft_tokens"] == 2, sglang
    (o,) = [o for o in sglang["overrides"] if o["field"] == "speculative_num_draft_tokens"]
    assert (o["requested"], o["effective"]) == (16, 2), o
    vllm = launch_cell(engine("vllm", "0.10.2"), tmp_path)
    assert vllm["outcome"] == "extracted", vllm
    assert (vllm["effective"]["method"], vllm["effective"]["num_speculative_tokens"]) == ("eagle3", 15), vllm
    assert vllm["overrides"] == [], vllm
