"""DFlash drafts (issue 37 item 3): a contract kind of their own, read from each engine's own code.

SGLang 0.5.23 serves a DFlash draft under `--speculative-algorithm DFLASH` (ids from the draft's
`target_layer_ids`, else its `build_target_layer_ids(N, L)`; `set_dflash_layers_to_capture` adds 1);
vLLM 0.34 with method `dflash` (the same id reader as EAGLE-3: `dflash_config.target_layer_ids` + 1,
else the target's EAGLE-3 default). The rule is never typed here: each test runs the installed code,
and the mutation tests edit that code in a shadow copy of the environment and see the contract follow.
"""

from __future__ import annotations

import json
import shutil

import pytest

from parity.contract import ServingContract, TargetModel, Provenance
from parity.contract.hf import draft_kind
from parity.forkserver import OFF as NO_FORKSERVER

from .helpers import QWEN3, ROOT, built, run_parity, shadow_env, shadow_release, shadow_run_env

DFLASH = ROOT / "fixtures" / "drafts" / "qwen3-8b-dflash"  # ids [1, 9, 17, 25, 33]: h2 ... h34
NO_IDS = ROOT / "fixtures" / "drafts" / "qwen3-8b-dflash-no-ids"  # 3 draft layers, no ids
TRAINED = "h2,h10,h18,h26,h34,h36"  # what a DFlash draft with those ids is trained on (last: the target)
TRAINED_NO_IDS = "h2,h18,h34,h36"  # SGLang's default for a 3-layer draft on 36 layers, as trained


def check(draft, layout: str, *extra: str, python: str | None = None, env: dict | None = None):
    proc = run_parity("check", "--json", "--target-config", str(QWEN3), "--draft", str(draft), "--dump-layout",
                      layout, *extra, **({"python": python} if python else {}), env=env)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


# -- fast: the kind, and contracts that read unchanged ------------------------------------------

def test_the_draft_kind_is_read_from_the_published_config_forms():
    assert draft_kind(json.loads((DFLASH / "config.json").read_text())) == "dflash"
    assert draft_kind({"speculators_model_type": "dflash", "architectures": ["DFlashDraftModel"]}) == "dflash"
    assert draft_kind({"architectures": ["Qwen3DSparkModel"]}) == "dflash"
    assert draft_kind({"architectures": ["LlamaForCausalLMEagle3"]}) == "eagle3"
    assert draft_kind({"speculators_model_type": "eagle3"}) == "eagle3"


def test_an_eagle3_serving_contract_serialises_without_the_kind_and_a_dflash_one_with_it():
    common = dict(target_model=TargetModel(architecture="Qwen3ForCausalLM", num_hidden_layers=36),
                  fc_input=("h2",), provenance=Provenance(package="sglang", version="0.5.23", code_path="x"),
                  engine="sglang", requested_ids=None, ids_source="engine default")
    eagle = json.loads(ServingContract(**common).to_json())
    assert "draft_kind" not in eagle  # old contracts and locks read unchanged
    assert ServingContract.model_validate(eagle).draft_kind == "eagle3"
    assert json.loads(ServingContract(**common, draft_kind="dflash").to_json())["draft_kind"] == "dflash"


def test_a_dflash_built_draft_judges_its_own_fields_and_an_eagle3_one_keeps_its_count():
    """BuiltDraft.JUDGED: on the class and on an EAGLE-3 build, the common fields (the report's
    count unchanged); on a DFlash build, its block size, context features and mask token too, and
    a block size that differs is a draft field difference."""
    from parity.contract import BuiltDraft
    from parity.contract.diff import diff

    dflash = dict(built_by="x", config_from="y", draft_kind="dflash", num_context_features=5, mask_token_id=151669)
    trained, served = BuiltDraft(**dflash, block_size=8), BuiltDraft(**dflash, block_size=16)
    assert trained.JUDGED[-3:] == ("block_size", "num_context_features", "mask_token_id")
    assert BuiltDraft(built_by="x", config_from="y").JUDGED == BuiltDraft.JUDGED
    assert "block_size" not in BuiltDraft.JUDGED and "draft_kind" not in json.loads(
        BuiltDraft(built_by="x", config_from="y").model_dump_json(exclude_none=True))
    common = dict(target_model=TargetModel(architecture="Qwen3ForCausalLM", num_hidden_layers=36),
                  fc_input=("h2",), provenance=Provenance(package="sglang", version="0.5.23", code_path="x"),
                  engine="sglang", requested_ids=None, ids_source="x", draft_kind="dflash")
    fields = lambda a, b: [(f.field, f.expected, f.actual) for f in diff(  # noqa: E731
        ServingContract(**common, draft=a), ServingContract(**common, draft=b)).fields]
    assert fields(trained, served) == [("draft.block_size", 8, 16)]
    assert fields(served, served) == []



@pytest.mark.parametrize("engine,eagle3_key", [("sglang", "eagle_config.eagle_aux_hidden_state_layer_ids"),
                                               ("vllm", "eagle_aux_hidden_state_layer_ids")])
def test_each_engine_writes_a_dflash_drafts_ids_in_the_key_it_reads_for_dflash(engine, eagle3_key):
    """Issue 48 item 5: a DFlash draft's ids fix is written in `dflash_config.target_layer_ids`
    (SGLang's parse_dflash_draft_config reads it before a top-level target_layer_ids; vLLM's
    get_eagle3_aux_layers_from_config after a top-level eagle_aux_hidden_state_layer_ids, which
    the fix therefore removes), the rest of dflash_config kept; an EAGLE-3 draft's where it was."""
    from parity.extract.engines import engine as bind

    e = bind(engine)
    config = json.loads((DFLASH / "config.json").read_text())
    config["eagle_aux_hidden_state_layer_ids"] = [5, 6, 7]
    written = e.write_ids(config, [0, 8, 16, 24, 32], "dflash")
    assert e.ids_key("dflash") == "dflash_config.target_layer_ids" and e.ids_key("eagle3") == eagle3_key
    assert written["dflash_config"] == {"mask_token_id": 151669, "target_layer_ids": [0, 8, 16, 24, 32]}
    assert ("eagle_aux_hidden_state_layer_ids" in written) is (engine == "sglang")  # vLLM would read it first
    assert config["dflash_config"]["target_layer_ids"] == [1, 9, 17, 25, 33]  # the draft's own config untouched
    eagle3 = e.write_ids({"eagle_config": {"use_aux_hidden_state": True}}, [1, 15, 28])
    outer, _, inner = eagle3_key.rpartition(".")
    assert (eagle3[outer] if outer else eagle3)[inner] == [1, 15, 28] and "dflash_config" not in eagle3

# -- slow: each engine's own capture ---------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_dflash_draft_gets_a_contract_read_from_the_engine(engine):
    if engine == "vllm" and not built("vllm", "0.34.0"):
        pytest.skip("vllm 0.34.0 environment not built")
    rc, result = check(DFLASH, TRAINED, "--engine", engine, *(["--vllm", "0.34.0"] if engine == "vllm" else []))
    serving = result["serving"]
    assert rc == 0, result["differences"]
    assert serving["draft_kind"] == "dflash"
    assert serving["fc_input"] == ["h2", "h10", "h18", "h26", "h34"]
    details, code = serving["provenance"]["details"], serving["provenance"]["code_path"]
    if engine == "sglang":
        assert details["algorithm"] == "DFLASH" and details["dflash_draft.num_context_features"] == "5"
        assert "set_dflash_layers_to_capture" in code and "DFlashDraftModel.project_target_hidden" in code
        assert serving["capture_ids"] == [2, 10, 18, 26, 34]
        # the DFlash fields of the draft as each side builds it: the same, read from each side's build
        for side in ("training", "serving"):
            draft = result[side]["draft"]
            assert (draft["draft_kind"], draft["block_size"], draft["num_context_features"],
                    draft["mask_token_id"]) == ("dflash", 16, 5, 151669), (side, draft)
    else:
        assert details["dflash_draft.model_class"].endswith("DFlashQwen3ForCausalLM")
        assert "combine_hidden_states" in code
    assert not [f for f in serving["findings"] if f["severity"] == "error"]


@pytest.mark.slow
def test_the_engines_id_less_defaults_differ_and_the_check_catches_it(tmp_path):
    """A DFlash draft without ids: SGLang takes build_target_layer_ids(36, 3) = [1, 17, 33] (h2, h18,
    h34), vLLM its EAGLE-3 default (2, 18, 33) (h2, h18, h33). Trained on SGLang's default: PASS on
    SGLang, DRIFT on vLLM (slot 2); with the ids written, PASS on both."""
    if not built("vllm", "0.34.0"):
        pytest.skip("vllm 0.34.0 environment not built")
    rc, result = check(NO_IDS, TRAINED_NO_IDS)
    assert rc == 0 and result["serving"]["fc_input"] == ["h2", "h18", "h34"]
    fallback = [f["message"] for f in result["serving"]["findings"] if f["kind"] == "default_layers_fallback"]
    assert fallback and "build_target_layer_ids(36, 3) = [1, 17, 33]" in fallback[0]
    rc, result = check(NO_IDS, TRAINED_NO_IDS, "--engine", "vllm", "--vllm", "0.34.0")
    assert rc == 1 and result["verdict"] == "drift" and result["serving"]["fc_input"] == ["h2", "h18", "h33"]
    assert [d["where"] for d in result["differences"]] == ["slot 2"]
    assert "its EAGLE-3 default, also for this DFlash draft" in " ".join(
        f["message"] for f in result["serving"]["findings"] if f["kind"] == "default_layers_fallback")
    fix = result["suggestion"]  # in the DFlash key, which SGLang reads too: the ids written below
    assert (fix["config_key"], fix["eagle_aux_hidden_state_layer_ids"], fix["verified"]) == (
        "dflash_config.target_layer_ids", [1, 17, 33], True)
    fixed = tmp_path / "draft"
    shutil.copytree(NO_IDS, fixed)
    config = json.loads((fixed / "config.json").read_text())
    config["dflash_config"]["target_layer_ids"] = [1, 17, 33]
    (fixed / "config.json").write_text(json.dumps(config))
    for engine in ("sglang", "vllm"):
        rc, result = check(fixed, TRAINED_NO_IDS, "--engine", engine, *(["--vllm", "0.34.0"] if engine == "vllm" else []))
        assert rc == 0 and result["serving"]["fc_input"] == ["h2", "h18", "h34"], (engine, result["differences"])


@pytest.mark.slow
def test_a_dflash_draft_trained_with_another_block_size_is_a_built_draft_drift(tmp_path):
    """The trained checkpoint's block_size edited to 8 (the served config says 16): speculators builds
    its DFlashDraftModel with 8 (read by its own DFlashConverter), SGLang 0.5.23 its DFlashDraftModel
    with 16: a DRIFT on draft.block_size, and the FIX writes 8 (verified by building again)."""
    trained = tmp_path / "trained"
    shutil.copytree(DFLASH, trained)
    config = json.loads((trained / "config.json").read_text())
    config["block_size"] = 8
    (trained / "config.json").write_text(json.dumps(config))
    rc, result = check(DFLASH, TRAINED, "--trained", str(trained))
    assert rc == 1 and result["verdict"] == "drift", result["differences"]
    assert [(d["where"], d["training"], d["serving"]) for d in result["differences"]] == [("draft.block_size", 8, 16)]
    assert result["training"]["draft"]["block_size"] == 8 and result["serving"]["draft"]["block_size"] == 16
    assert "DFlashConverter._build_config" in result["training"]["draft"]["built_by"]
    assert result["draft_fix"]["edit"] == {"block_size": 8} and result["draft_fix"]["verified"] is True


OFF_BY_ONE = "h1,h9,h17,h25,h33,h36"  # one layer below what the draft's ids [1, 9, 17, 25, 33] feed


@pytest.mark.slow
@pytest.mark.parametrize("engine,release", [("sglang", "0.5.23"), ("vllm", "0.34.0")])
def test_a_dflash_draft_off_by_one_gets_a_verified_fix_in_its_own_key(engine, release):
    """Issue 48 item 5: trained one layer below what its ids feed on every slot, the DFlash draft's
    fix is written where each engine reads a DFlash draft's ids, `dflash_config.target_layer_ids`
    (SGLang reads no other; vLLM reads it after a top-level `eagle_aux_hidden_state_layer_ids`,
    which the fix leaves out), and a full extraction with it verifies it. Before: SGLang's fix
    was written in eagle_config, which its DFlash start-up never reads ("NO FIX"), and vLLM's in
    its EAGLE-3 key, which SGLang never reads."""
    if engine == "vllm" and not built("vllm", release):
        pytest.skip(f"vllm {release} environment not built")
    proc = run_parity("check", "--target-config", str(QWEN3), "--draft", str(DFLASH), "--dump-layout", OFF_BY_ONE,
                      "--engine", engine, *(["--vllm", release] if engine == "vllm" else []))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith("  FIX")), None)
    assert at is not None, proc.stdout
    assert lines[at:at + 2] == [
        f'  FIX: write {{"dflash_config": {{"target_layer_ids": [0, 8, 16, 24, 32]}}}} in {DFLASH}/config.json',
        f"       (verified: a full extraction with this config makes {engine} {release} feed [h1, h9, h17, h25, h33], "
        "the training contract)"], proc.stdout


# -- slow: the engines' capture edited in a shadow copy of their environment ----------------------

QWEN3_MODEL = "lib/python3.11/site-packages/sglang/srt/models/qwen3.py"
SGLANG_PLUS_ONE = "before layer `k + 1`.\n        self.model.layers_to_capture = [val + 1 for val in layer_ids]"
VLLM_IDS = "lib/python3.11/site-packages/vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
VLLM_PLUS_ONE = 'layer_ids = [i + 1 for i in (dflash_config.get("target_layer_ids") or [])]'


@pytest.mark.slow
def test_sglang_dflash_contract_follows_an_edit_of_its_capture(tmp_path):
    """Qwen3's set_dflash_layers_to_capture edited to drop its +1: the serving contract follows (h1,
    h9, ...; PASS before, test_a_dflash_draft_gets_a_contract_read_from_the_engine). Only SGLang
    is edited, so only the serving side runs in the copy; those states against training's are
    the off-by-one DRIFT (test_a_dflash_draft_off_by_one_gets_a_verified_fix_in_its_own_key)."""
    shadow = shadow_env(ROOT / ".venv", tmp_path / "shadow",
                        {QWEN3_MODEL: (SGLANG_PLUS_ONE, SGLANG_PLUS_ONE.replace("val + 1", "val"))})
    proc = run_parity("contract", "serving", "--json", "--target-config", str(QWEN3), "--draft", str(DFLASH),
                      python=str(shadow / "bin" / "python"), env=shadow_run_env(shadow, tmp_path / "home"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    serving = json.loads(proc.stdout)
    assert serving["fc_input"] == ["h1", "h9", "h17", "h25", "h33"]
    assert serving["capture_ids"] == [1, 9, 17, 25, 33]


@pytest.mark.slow
def test_vllm_dflash_contract_follows_an_edit_of_its_id_reader(tmp_path):
    """vLLM 0.34's get_eagle3_aux_layers_from_config edited to take dflash_config's ids without the
    +1: the serving contract follows (h1, h9, ...; h2, h10, ... unedited:
    test_a_dflash_draft_gets_a_contract_read_from_the_engine). Only vLLM is edited, so only the
    serving side runs on the copy (the training side, in this run's private home, would be
    extracted again); those states against training's are the off-by-one DRIFT
    (test_a_dflash_draft_off_by_one_gets_a_verified_fix_in_its_own_key)."""
    if not built("vllm", "0.34.0"):
        pytest.skip("vllm 0.34.0 environment not built")
    _, _, env = shadow_release(tmp_path, "vllm", "0.34.0", {VLLM_IDS: (VLLM_PLUS_ONE, VLLM_PLUS_ONE.replace("i + 1", "i"))})
    env[NO_FORKSERVER] = "1"  # one run in a copy made for this test: fresh, not a server of its own
    proc = run_parity("contract", "serving", "--json", "--engine", "vllm", "--vllm", "0.34.0", "--target-config",
                      str(QWEN3), "--draft", str(DFLASH), env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert json.loads(proc.stdout)["fc_input"] == ["h1", "h9", "h17", "h25", "h33"]


# -- slow: releases that cannot extract a DFlash draft say whose answer that is ----------------------

@pytest.mark.slow
@pytest.mark.parametrize("version,engine_lacks,words", [
    ("0.5.10", True, "sglang 0.5.10 has no DFlash: its SpeculativeAlgorithm has no DFLASH"),
])
def test_an_older_sglang_refuses_a_dflash_draft_typed(version, engine_lacks, words):
    """0.5.10 has no DFlash at all: the release's own answer (engine_lacks, as 0.4.4's missing
    EAGLE3)."""
    from parity.extract.engines.sglang import run_probe

    if not built("sglang", version):
        pytest.skip(f"sglang {version} environment not built")
    reply = run_probe(json.loads(QWEN3.read_text()), DFLASH, version)
    info = reply["cannot_extract"]
    assert info["reason"].startswith(words), info
    assert bool(info.get("engine_lacks")) is engine_lacks


# -- slow: the older releases that have DFlash run it with their own code ------------------------

MODEL_RUNNER = "lib/python3.11/site-packages/sglang/srt/model_executor/model_runner.py"
RUNNER_HANDS = "self.model.set_dflash_layers_to_capture(self.dflash_target_layer_ids)"


@pytest.mark.slow
@pytest.mark.parametrize("version,ids_path", [
    ("0.5.12.post1", "ModelRunner.__init__ (under is_dflash()"),  # the oldest with DFLASH: read in __init__
    ("0.5.18", "_resolve_dflash_aux_hidden_state"),  # a middle one: spec_aux_hidden_state's resolver
])
def test_an_older_sglang_with_dflash_gives_the_contract_by_its_own_code(version, ids_path):
    """Each release's own reader and capture: the written ids (h2 ... h34, PASS) and, without ids,
    its build_target_layer_ids(36, 3) = [1, 17, 33] (h2, h18, h34, PASS, the fallback named)."""
    if not built("sglang", version):
        pytest.skip(f"sglang {version} environment not built")
    rc, result = check(DFLASH, TRAINED, "--sglang", version)
    serving = result["serving"]
    assert rc == 0, result["differences"]
    assert serving["draft_kind"] == "dflash" and serving["provenance"]["version"] == version
    assert serving["fc_input"] == ["h2", "h10", "h18", "h26", "h34"]
    assert serving["capture_ids"] == [2, 10, 18, 26, 34]
    details, code = serving["provenance"]["details"], serving["provenance"]["code_path"]
    assert details["algorithm"] == "DFLASH" and details["dflash_draft.num_context_features"] == "5"
    assert ids_path in code and "set_dflash_layers_to_capture" in code
    assert "DFlashDraftModel.project_target_hidden" in code
    rc, result = check(NO_IDS, TRAINED_NO_IDS, "--sglang", version)
    assert rc == 0 and result["serving"]["fc_input"] == ["h2", "h18", "h34"], result["differences"]
    fallback = [f["message"] for f in result["serving"]["findings"] if f["kind"] == "default_layers_fallback"]
    assert fallback and "build_target_layer_ids(36, 3) = [1, 17, 33]" in fallback[0]


@pytest.mark.slow
def test_sglang_0_5_12_dflash_contract_follows_an_edit_of_its_model_runner(tmp_path):
    """0.5.12.post1's ModelRunner.init_aux_hidden_state_capture (the capture this release runs, before
    attention_backend_setup existed) edited to hand each id + 1: the contract follows (h3, h11, ...)
    and the check, PASS on the installed release, is a DRIFT."""
    if not built("sglang", "0.5.12.post1"):
        pytest.skip("sglang 0.5.12.post1 environment not built")
    edited = RUNNER_HANDS.replace("(self.dflash_target_layer_ids)", "([i + 1 for i in self.dflash_target_layer_ids])")
    _, _, env = shadow_release(tmp_path, "sglang", "0.5.12.post1", {MODEL_RUNNER: (RUNNER_HANDS, edited)})
    rc, result = check(DFLASH, TRAINED, "--sglang", "0.5.12.post1", env=env)
    assert rc == 1 and result["verdict"] == "drift"
    assert result["serving"]["fc_input"] == ["h3", "h11", "h19", "h27", "h35"]
    assert result["serving"]["capture_ids"] == [3, 11, 19, 27, 35]


ATTENTION_SETUP = "lib/python3.11/site-packages/sglang/srt/model_executor/model_runner_components/attention_backend_setup.py"
RUNNER_READS = "self.dflash_target_layer_ids = dflash_draft_config.resolve_target_layer_ids("


@pytest.mark.slow
@pytest.mark.parametrize("version,file,old,new,words", [
    ("0.5.18", ATTENTION_SETUP, "    is_dspark: bool,\n) -> None:", "    dspark: bool,\n) -> None:", "is_dspark"),
    ("0.5.12.post1", MODEL_RUNNER, RUNNER_READS, RUNNER_READS.replace("dflash_target_layer_ids", "dflash_layer_ids"),
     "no longer sets self.dflash_target_layer_ids"),
])
def test_a_moved_dflash_code_path_is_paritys_limit_not_the_releases(tmp_path, monkeypatch, version, file, old, new,
                                                                   words):
    """The capture's `is_dspark` argument renamed (0.5.18), or `ModelRunner.__init__`'s DFlash block
    no longer setting `dflash_target_layer_ids` (0.5.12.post1, where the run would stop short of
    it): refused before any run as a moved code path (parity's limit), never the release's answer."""
    from parity.extract.engines.sglang import run_probe

    if not built("sglang", version):
        pytest.skip(f"sglang {version} environment not built")
    _, _, env = shadow_release(tmp_path, "sglang", version, {file: (old, new)})
    for key in ("PARITY_HOME", "PYTHONPYCACHEPREFIX"):
        monkeypatch.setenv(key, env[key])
    info = run_probe(json.loads(QWEN3.read_text()), DFLASH, version)["cannot_extract"]
    assert info["reason"].startswith("a DFlash code path parity runs moved") and words in info["reason"], info
    assert not info.get("engine_lacks")


@pytest.mark.slow
def test_vllm_0_33_dflash_contract_on_both_runners_and_follows_an_edit_of_v2s_reader(tmp_path):
    """vLLM 0.33 (V1 and V2) runs a DFlash draft with its own readers: h2 ... h34 on both (PASS);
    V2's get_eagle3_aux_layers_from_config (the GPU default's) edited to drop the +1: the contract
    follows (h1, h9, ...), V1 unchanged (runners_differ), a DRIFT."""
    if not built("vllm", "0.33.0"):
        pytest.skip("vllm 0.33.0 environment not built")
    rc, result = check(DFLASH, TRAINED, "--engine", "vllm", "--vllm", "0.33.0")
    serving = result["serving"]
    assert rc == 0, result["differences"]
    assert serving["draft_kind"] == "dflash" and serving["provenance"]["version"] == "0.33.0"
    details = serving["provenance"]["details"]
    assert details["v1_fc_input"] == details["v2_fc_input"] == str(["h2", "h10", "h18", "h26", "h34"])
    assert "dflash_config.target_layer_ids +1" in serving["provenance"]["code_path"]
    assert details["dflash_draft.model_class"].endswith("DFlashQwen3ForCausalLM")
    _, _, env = shadow_release(tmp_path, "vllm", "0.33.0", {VLLM_IDS: (VLLM_PLUS_ONE, VLLM_PLUS_ONE.replace("i + 1", "i"))})
    rc, result = check(DFLASH, TRAINED, "--engine", "vllm", "--vllm", "0.33.0", env=env)
    assert rc == 1 and result["verdict"] == "drift"
    assert result["serving"]["fc_input"] == ["h1", "h9", "h17", "h25", "h33"]
    assert "runners_differ" in [f["kind"] for f in result["serving"]["findings"]]


@pytest.mark.slow
def test_vllm_0_22_refuses_a_dflash_draft_as_paritys_limit():
    """0.22 has the method dflash, but its V2 refuses it, which the runner columns do not express:
    parity's limit (exit 2, one line), never the release's answer."""
    if not built("vllm", "0.22.0"):
        pytest.skip("vllm 0.22.0 environment not built")
    proc = run_parity("check", "--json", "--engine", "vllm", "--vllm", "0.22.0", "--target-config", str(QWEN3),
                      "--draft", str(DFLASH), "--dump-layout", TRAINED)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "parity's adapter for vllm 0.22.0 does not run DFlash capture" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_vllm_serves_a_dflash_draft_under_method_dflash_and_not_under_eagle3():
    """vLLM 0.34's launch: a DFlash draft under method `dflash` is served as its kind (PARITY, with
    the serve arguments; was a false DRIFT, 'dflash is not EAGLE-3'); under `eagle3` vLLM's own
    resolution refuses the draft, in its words (exit 2)."""
    if not built("vllm", "0.34.0"):
        pytest.skip("vllm 0.34.0 environment not built")
    spec = '{"method": "%s", "model": "org/Qwen3-8B-DFlash", "num_speculative_tokens": 3}'
    rc, result = check(DFLASH, TRAINED, "--engine", "vllm", "--vllm", "0.34.0",
                       "--serve-args", f"--speculative-config '{spec % 'dflash'}'")
    assert (rc, result["verdict"]) == (0, "parity"), result["differences"]
    assert result["serving"]["launch"]["algorithm_is_dflash"] is True
    proc = run_parity("check", "--target-config", str(QWEN3), "--draft", str(DFLASH), "--dump-layout", TRAINED,
                      "--engine", "vllm", "--vllm", "0.34.0", "--serve-args",
                      f"--speculative-config '{spec % 'eagle3'}'")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr[-2000:]
    assert "requested method='eagle3', but the draft model" in proc.stderr and "'dflash' checkpoint" in proc.stderr
