"""vLLM as the data-generation engine: the dump speculators' training reads is found by running
vLLM's own capture on the tiny target (docs/vllm.md): the newest release built (0.34.0) unless a
test names one (0.33.0, the last with both model runners; 0.11.0, the oldest family). One
extraction is shared by the assertions below (module scope; repeated runs come from the reply
cache)."""

from __future__ import annotations

import json

import pytest

from parity import cli
from parity.contract import Tap
from parity.extract.engines.vllm import DatagenError, extract_dump, launch_ids
from parity.inputs import Target, read_inputs

from .helpers import ROOT

pytestmark = pytest.mark.slow  # every test runs vLLM (or speculators) in a release environment's child

LLAMA_32 = ROOT / "fixtures" / "targets" / "tiny-llama-32l" / "config.json"


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def dump():
    return extract_dump(Target.read(LLAMA_32), [2, 16, 29], "0.34.0")


def test_launch_ids_are_the_launch_scripts():
    assert launch_ids([2, 16, 29], 32) == [2, 16, 29, 32]
    assert launch_ids([2, 16, 32], 32) == [2, 16, 32]
    assert launch_ids(None, 32) == [2, 16, 29, 32]


def test_vllm_dumps_the_input_of_each_id_and_the_last_layer(dump):
    assert [t.name for t in dump.layout] == ["h2", "h16", "h29", "h32"]
    assert dump.version == "0.34.0" and dump.engine == "vllm" and dump.runner == "v2"
    assert dump.launch_ids == (2, 16, 29, 32) and dump.ids_given == (2, 16, 29)
    assert "set_eagle3_aux_hidden_state_layers" in dump.code_path
    assert "_setup_eagle3_aux_hidden_state_outputs" not in dump.code_path  # 0.34 has no V1 runner
    assert not dump.findings


def test_0_33_dumps_the_same_states_with_both_runners():
    both = extract_dump(Target.read(LLAMA_32), [2, 16, 29], "0.33.0")
    assert [t.name for t in both.layout] == ["h2", "h16", "h29", "h32"] and both.runner == "v2"
    assert "_setup_eagle3_aux_hidden_state_outputs" in both.code_path
    assert not both.findings  # a runner dumping other states would be a runners_differ finding


def test_contract_training_feeds_the_run_dump_to_speculators(dump, capsys):
    rc, out, err = run(capsys, "contract", "training", "--target-config", LLAMA_32,
                       "--datagen-ids", "2,16,29", "--vllm", "0.34.0", "--json")
    assert rc == 0, err
    c = json.loads(out)
    assert c["fc_input"] == ["h2", "h16", "h29"] and c["target"] == "h32"
    assert c["dump_layout_source"] == "datagen_run"
    assert c["provenance"]["details"]["dump_engine"] == "vllm 0.34.0"
    assert "extract_hidden_states" in c["provenance"]["details"]["dump"]


def test_no_ids_is_the_launch_default(dump, capsys):
    rc, out, err = run(capsys, "contract", "training", "--target-config", LLAMA_32,
                       "--datagen-ids", "default", "--vllm", "0.34.0", "--json")
    assert rc == 0, err
    c = json.loads(out)
    assert c["dump_layout"] == ["h2", "h16", "h29", "h32"]
    assert "the launch default" in c["provenance"]["details"]["dump"]


def test_a_typed_convention_is_labelled_not_run(capsys):
    rc, out, err = run(capsys, "contract", "training", "--target-config", LLAMA_32, "--datagen-ids", "2,16,29",
                       "--datagen-convention", "speculators-datagen", "--json")
    assert rc == 0, err
    c = json.loads(out)
    assert c["dump_layout_source"] == "datagen_ids"
    assert any(f["kind"] == "typed_rule_not_run" and "typed rule, not run" in f["message"] for f in c["findings"])
    assert "dump_engine" not in c["provenance"]["details"]


def test_the_contract_follows_a_patch_of_vllms_capture(dump, inject_drift, capsys):
    inject_drift("tests.drift.vllm_capture_without_residual")
    drifted = extract_dump(Target.read(LLAMA_32), [2, 16, 29], "0.34.0")
    assert drifted.layout != dump.layout
    assert drifted.layout == tuple(Tap.parse(f"h{k}.delta") for k in (2, 16, 29, 32))
    rc, out, err = run(capsys, "contract", "training", "--target-config", LLAMA_32,
                       "--datagen-ids", "2,16,29", "--vllm", "0.34.0", "--json")
    assert rc == 0, err
    assert json.loads(out)["fc_input"] == ["h2.delta", "h16.delta", "h29.delta"]


def test_without_the_kernel_stand_ins_the_run_is_a_loud_error(inject_drift, capsys):
    """vLLM's CPU attention from the CUDA wheel raises nothing: it returns uninitialised memory.
    Identification must refuse every such slot; the CLI says so in one line, exit 2."""
    inject_drift("tests.drift.vllm_no_kernel_standins")
    with pytest.raises(DatagenError, match="matches no state|non-finite"):
        extract_dump(Target.read(LLAMA_32), [2, 16, 29], "0.34.0")
    rc, out, err = run(capsys, "contract", "training", "--target-config", LLAMA_32, "--datagen-ids", "2,16,29", "--vllm", "0.34.0")
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "vllm 0.34.0" in err


# -- vLLM as the serving engine ----------------------------------------------------------------


def _llama_draft(tmp, **ids) -> str:
    """A tiny EAGLE-3 draft for the 32-layer target, ids placed as given (config.json only)."""
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 64,
           "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
           "num_hidden_layers": 1, "vocab_size": 256, "draft_vocab_size": 256, "rms_norm_eps": 1e-5,
           "max_position_embeddings": 2048, **ids}
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "config.json").write_text(json.dumps(cfg))
    return str(tmp)


@pytest.fixture(scope="module")
def nested():
    """An SGLang/SpecForge-style draft (ids nested in eagle_config, [1, 15, 28]) trained on
    [h2, h16, h29]: docs/vllm.md's example, so its extractions repeat from the reply cache."""
    return str(ROOT / "fixtures" / "drafts" / "tiny-llama-32l-nested-ids")


def test_nested_ids_are_read_by_the_v1_runner_and_ignored_by_v2(nested, capsys):
    draft = nested
    rc, out, err = run(capsys, "contract", "serving", "--engine", "vllm", "--vllm", "0.33.0", "--target-config",
                       LLAMA_32, "--draft", draft, "--json")
    c = json.loads(out)
    details = c["provenance"]["details"]
    assert details["v1_ids"] == "[1, 15, 28]" and details["v1_fc_input"] == "['h1', 'h15', 'h28']"
    assert details["v2_ids"].startswith("none in the config") and details["v2_fc_input"] == "['h2', 'h16', 'h29']"
    assert details["gpu_default_runner"] == "v2" and c["fc_input"] == ["h2", "h16", "h29"]
    assert any(f["kind"] == "runners_differ" and f["severity"] == "error" for f in c["findings"])
    assert rc == 1  # an error finding: one runner is fed other states than the config's other reader


def test_0_34_has_one_runner_which_ignores_nested_ids(nested, capsys):
    """0.34 dropped the V1 runner: the nested ids have no reader left, the draft gets the model's
    default layers (a warning, not a runners_differ error) and no v1 entry is reported."""
    rc, out, err = run(capsys, "contract", "serving", "--engine", "vllm", "--vllm", "0.34.0", "--target-config", LLAMA_32,
                       "--draft", nested, "--json")
    c = json.loads(out)
    details = c["provenance"]["details"]
    assert rc == 0 and c["provenance"]["version"] == "0.34.0" and c["provenance"]["family"] == "0.34", err
    assert c["fc_input"] == ["h2", "h16", "h29"] and "v1_ids" not in details
    assert details["v2_ids"] == "none in the config: default [2, 16, 29]"
    assert [f["kind"] for f in c["findings"]] == ["default_layers_fallback"]


def test_check_finds_the_v1_drift_and_a_verified_fix_in_vllms_form(nested, capsys):
    draft = nested
    rc2, out, err = run(capsys, "check", "--engine", "vllm", "--vllm", "0.33.0", "--target-config", LLAMA_32,
                        "--draft", draft, "--dump-layout", "h2,h16,h29,h32", "--json")
    r = json.loads(out)
    assert rc2 == 1 and r["verdict"] == "drift"
    assert any("h1" in d["message"] and "v1 runner" in d["message"] for d in r["differences"])
    fix = r["suggestion"]
    assert fix["engine"] == "vllm" and fix["eagle_aux_hidden_state_layer_ids"] == [2, 16, 29]
    assert fix["config_key"] == "eagle_aux_hidden_state_layer_ids" and fix["verified"] is True


def test_the_fix_written_at_the_top_level_serves_the_training_contract(tmp_path, capsys):
    draft = _llama_draft(tmp_path / "fixed", eagle_aux_hidden_state_layer_ids=[2, 16, 29])
    rc, out, err = run(capsys, "check", "--engine", "vllm", "--vllm", "0.34.0", "--target-config", LLAMA_32, "--draft", draft,
                       "--dump-layout", "h2,h16,h29,h32", "--no-verify")
    assert rc == 0, out + err
    assert "served by vllm" in out and "PARITY" in out


def test_deepseek_id_0_raises_in_vllms_capture(tmp_path):
    """DeepSeek's decoder in vLLM 0.33 adds a residual that is None before layer 0: id 0 (h0, the
    embeddings, which Llama and Qwen capture) raises there. A run through the real MLA and MoE
    (router real, expert and attention kernels stood in), on an 8-layer DeepSeek-V3."""
    config = json.loads((ROOT / "fixtures" / "targets" / "deepseek-v3-61l" / "config.json").read_text())
    target = tmp_path / "config.json"
    target.write_text(json.dumps({**config, "num_hidden_layers": 8}))
    with pytest.raises(DatagenError, match="TypeError"):
        extract_dump(Target.read(target), [0, 3, 5], "0.34.0")
    assert [t.name for t in extract_dump(Target.read(target), [1, 3, 5], "0.34.0").layout] == ["h1", "h3", "h5", "h8"]


@pytest.mark.parametrize("argv, says", [
    (["--datagen-ids", "2,16,29", "--vllm", "0.1.0"], "no environment pins vllm==0.1.0"),
    (["--datagen-ids", "default", "--datagen-convention", "speculators-datagen"], "needs the ids themselves"),
])
def test_bad_datagen_input_is_one_line_exit_2(argv, says, capsys):
    rc, out, err = run(capsys, "contract", "training", "--target-config", LLAMA_32, *argv)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and says in err, err


def test_a_lock_is_checked_under_vllm(nested, tmp_path, capsys):
    lock = tmp_path / "nested.json"
    rc, out, err = run(capsys, "lock", lock, "--target-config", LLAMA_32, "--draft", nested,
                       "--dump-layout", "h2,h16,h29,h32")
    assert rc == 0, err
    rc, out, err = run(capsys, "check", "--lock", lock, "--engine", "vllm", "--vllm", "0.33.0", "--json")
    r = json.loads(out)
    assert rc == 1 and r["verdict"] == "drift" and r["serving"]["engine"] == "vllm"
    assert r["suggestion"]["eagle_aux_hidden_state_layer_ids"] == [2, 16, 29]


def test_the_draft_side_is_read_from_vllms_draft_class(tmp_path, capsys):
    """Graph flags as vLLM's Eagle3 Llama draft stores them, the vocabulary mapping as its
    compute_logits applies it (run with a known d2t) and its load_weights drops a t2d."""
    draft = _llama_draft(tmp_path / "d", eagle_aux_hidden_state_layer_ids=[2, 16, 29], draft_vocab_size=128,
                         norm_before_fc=True, norm_output=True)
    rc, out, err = run(capsys, "contract", "serving", "--engine", "vllm", "--vllm", "0.34.0", "--target-config", LLAMA_32,
                       "--draft", draft, "--json")
    c = json.loads(out)
    assert rc == 0, c["findings"]
    assert c["graph"] == {"norm_before_fc": True, "fc_norm": False, "norm_output": True, "norm_before_residual": False}
    assert c["vocab"]["d2t"] == "offsets" and c["vocab"]["t2d"] == "ignored"
    assert (c["vocab"]["draft_vocab_size"], c["vocab"]["target_vocab_size"]) == (128, 256)
    assert c["provenance"]["details"]["draft_class"].endswith("Eagle3LlamaForCausalLM")
    assert c["embedding"] == "target"  # no embed_tokens in the checkpoint: the proposer shares the target's


def test_a_draft_with_its_own_embedding_keeps_it_under_vllm(capsys):
    """The proposer's own sharing decides: a checkpoint whose embed_tokens differs from the
    target's keeps its own (SGLang binds the target's whatever the checkpoint holds)."""
    from parity.fixtures import DraftRecipe, speculators_draft

    draft = speculators_draft(DraftRecipe(seed=1))
    capsys.readouterr()
    rc, out, err = run(capsys, "contract", "serving", "--engine", "vllm", "--vllm", "0.34.0", "--target-config", LLAMA_32,
                       "--draft", draft, "--json")
    assert rc == 0 and json.loads(out)["embedding"] == "draft", err


def test_a_specforge_draft_with_nested_ids_served_by_vllm_drifts_with_a_fix_vllm_verifies(nested, capsys):
    """The cross pair: SpecForge trains this draft (nested ids [1, 15, 28]) on [h2, h16, h29] (its
    own capture by SGLang 0.5.14); vLLM's V1 runner feeds it [h1, h15, h28], the V2 runner its
    defaults. The fix is vLLM's top-level key, verified by a second vLLM extraction."""
    rc, out, err = run(capsys, "check", "--trainer", "specforge", "--specforge", "0.2.0", "--engine", "vllm", "--vllm", "0.33.0",
                       "--target-config", LLAMA_32, "--draft", nested, "--json")
    r = json.loads(out)
    assert rc == 1 and r["verdict"] == "drift", err
    assert r["training"]["fc_input"] == ["h2", "h16", "h29"] and r["training"]["target"] == "final"
    assert r["training"]["provenance"]["package"] == "specforge"
    assert any("['h1', 'h15', 'h28']" in d["message"] and "v1 runner" in d["message"] for d in r["differences"])
    fix = r["suggestion"]
    assert fix["engine"] == "vllm" and fix["eagle_aux_hidden_state_layer_ids"] == [2, 16, 29] and fix["verified"]


@pytest.mark.parametrize("command", [["contract", "serving"], ["check", "--dump-layout", "h2,h16,h29,h32"]])
def test_an_sglang_release_named_for_vllm_is_refused(command, nested, capsys):
    rc, out, err = run(capsys, *command, "--engine", "vllm", "--sglang", "0.5.14", "--target-config", LLAMA_32,
                       "--draft", nested)
    assert rc == 2 and out == "" and err.strip() == ("parity: --sglang names an SGLang release, but the engine "
                                                     "is vllm: use --vllm VERSION"), err


# -- vLLM as the serving side of the matrix, can-i-deploy and export ------------------------------

def test_the_matrix_and_can_i_deploy_run_vllm_releases(nested, capsys):
    """The nested-ids draft under every installed vLLM release: DRIFT (the runners disagree) with
    the top-level fix verified on that release; can-i-deploy answers no with the same reason."""
    rc, out, err = run(capsys, "matrix", "--engine", "vllm", "--target-config", LLAMA_32, "--draft", nested,
                       "--dump-layout", "h2,h16,h29,h32", "--speculators", "0.9.0", "--json")
    m = json.loads(out)
    assert rc == 1 and m["engine"] == "vllm", err
    row = next(r for r in m["serving"] if r["version"] == "0.33.0")
    assert row["verdicts"][0]["verdict"] == "drift" and row["verdicts"][0]["fix"] == [2, 16, 29]
    assert row["verdicts"][0]["fix_verified"] and any("v1 runner" in e for e in row["engine_errors"])
    rc, out, err = run(capsys, "can-i-deploy", "--vllm", "0.33.0", "--speculators", "0.9.0", "--target-config",
                       LLAMA_32, "--draft", nested, "--dump-layout", "h2,h16,h29,h32")
    assert rc == 1 and out.startswith("no: vllm 0.33.0 with speculators 0.9.0: ") and \
        "fix: write eagle_aux_hidden_state_layer_ids = [2, 16, 29] (verified on this release)" in out, out
    with pytest.raises(SystemExit) as exited:  # a usage error: one line, exit 2
        run(capsys, "can-i-deploy", "--vllm", "0.33.0", "--sglang", "0.5.23", "--speculators", "0.9.0")
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "not allowed with" in err and err.count("\n") == 1


def test_export_for_vllm_writes_the_top_level_ids_vllm_serves_as_trained(tmp_path, capsys):
    from parity.fixtures import DraftRecipe, speculators_draft

    draft = speculators_draft(DraftRecipe())
    capsys.readouterr()
    out = tmp_path / "served"
    rc, said, err = run(capsys, "export", "--engine", "vllm", "--vllm", "0.34.0", draft, out, "--target-config", LLAMA_32,
                        "--dump-layout", "h2,h16,h29,h32")
    assert rc == 0 and "for vllm 0.34.0: eagle_aux_hidden_state_layer_ids [2, 16, 29] feed [h2, h16, h29]" in said, err
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [2, 16, 29]
    assert "eagle_aux_hidden_state_layer_ids" not in (cfg.get("eagle_config") or {})
    rc, said, err = run(capsys, "check", "--engine", "vllm", "--vllm", "0.34.0", "--target-config", LLAMA_32, "--draft", out,
                        "--dump-layout", "h2,h16,h29,h32")
    assert rc == 0, said + err  # the runner(s) feed what it was trained on


def test_export_for_a_vllm_release_without_a_speculators_loader_writes_the_eagle3_format(tmp_path, capsys):
    """vLLM 0.8.5 has no speculators-format config loader (its AutoConfig refused the speculators
    config parity used to write: 'Unrecognized model'): the export writes the EAGLE-3 format, which
    it loads, and what it then says is its own verdict (it keeps a draft's own embedding)."""
    from parity.extract.engines import engine
    from parity.fixtures import DraftRecipe, speculators_draft

    draft = speculators_draft(DraftRecipe())
    spec = json.loads((draft / "config.json").read_text())
    assert engine("vllm", "0.8.5").served_config(spec, [2, 16, 29])["architectures"] == ["LlamaForCausalLMEagle3"]
    assert "speculators_config" in engine("vllm", "0.34.0").served_config(spec, [2, 16, 29])
    capsys.readouterr()
    rc, said, err = run(capsys, "export", "--engine", "vllm", "--vllm", "0.8.5", draft, tmp_path / "served",
                        "--target-config", LLAMA_32, "--dump-layout", "h2,h16,h29,h32")
    assert rc == 2 and "Unrecognized model" not in err, err
    assert "vllm 0.8.5 cannot serve it as trained: embedding: trained with target, served with draft" in err, err


# -- vLLM 0.11: the older family (no config key, id N dropped, its own sharing) -------------------

def test_a_dump_made_by_0_11_drops_the_last_layer_that_0_33_dumps(dump, capsys):
    """The same launch ids [2, 16, 29, 32]: 0.33 dumps h32, 0.11's capture never reaches id 32, so
    speculators trains that draft to predict h29 from [h2, h16]; the contract says why."""
    old = extract_dump(Target.read(LLAMA_32), [2, 16, 29], "0.11.0")
    assert [t.name for t in old.layout] == ["h2", "h16", "h29"]
    assert [t.name for t in dump.layout] == ["h2", "h16", "h29", "h32"]
    assert old.method.startswith("the model's own capture") and dump.method == "extract_hidden_states"
    assert any("[32] captured nothing" in f.message for f in old.findings)
    rc, out, err = run(capsys, "contract", "training", "--target-config", LLAMA_32, "--datagen-ids", "2,16,29",
                       "--vllm", "0.11.0", "--json")
    c = json.loads(out)
    assert rc == 0 and c["fc_input"] == ["h2", "h16"] and c["target"] == "h29", err
    assert c["provenance"]["details"]["dump_engine"] == "vllm 0.11.0"


def test_0_11_serves_every_draft_its_default_layers(nested, tmp_path, capsys):
    """No config key: nested ids and top-level ids alike are ignored; a draft trained on
    [h1, h15, h28] drifts, and no id list fixes it on 0.11."""
    rc, out, err = run(capsys, "contract", "serving", "--engine", "vllm", "--vllm", "0.11.0", "--target-config",
                       LLAMA_32, "--draft", nested, "--json")
    c = json.loads(out)
    assert c["fc_input"] == ["h2", "h16", "h29"] and c["provenance"]["family"] == "0.11", err
    assert any("found no ids it reads" in f["message"] for f in c["findings"])
    top = _llama_draft(tmp_path / "top", eagle_aux_hidden_state_layer_ids=[1, 15, 28])
    rc, out, err = run(capsys, "check", "--engine", "vllm", "--vllm", "0.11.0", "--target-config", LLAMA_32,
                       "--draft", top, "--dump-layout", "h1,h15,h28,h32", "--json")
    r = json.loads(out)
    assert rc == 1 and r["verdict"] == "drift" and r["serving"]["fc_input"] == ["h2", "h16", "h29"], err
    assert r["suggestion"] is None and r["unfixable"]


def test_0_11_binds_the_targets_embedding_over_a_drafts_own(capsys):
    """0.11's proposer shares the target's embedding whenever the shapes match (0.33's proposer and
    0.34's load_eagle_model keep a draft's own): the same checkpoint is served with another
    embedding after the bump."""
    from parity.fixtures import DraftRecipe, speculators_draft

    draft = speculators_draft(DraftRecipe(seed=1))
    capsys.readouterr()
    seen = {}
    for version in ("0.11.0", "0.33.0", "0.34.0"):
        rc, out, err = run(capsys, "contract", "serving", "--engine", "vllm", "--vllm", version, "--target-config",
                           LLAMA_32, "--draft", draft, "--json")
        seen[version] = json.loads(out)["embedding"]
    assert seen == {"0.11.0": "target", "0.33.0": "draft", "0.34.0": "draft"}


def test_the_born_from_case_with_a_vllm_made_dump(capsys):
    """Kimi-K2.5 trained on vLLM 0.33's dump of launch ids [3, 31, 59] (+ the last layer): fc
    [h3, h31, h59]; SGLang 0.5.23 serves the draft's ids [2, 30, 58] as [h2, h30, h58]: DRIFT,
    fix [3, 31, 59] verified on SGLang."""
    rc, out, err = run(capsys, "check", "--target-config", ROOT / "fixtures" / "targets" / "kimi-k2.5" / "config.json",
                       "--draft", ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3", "--datagen-ids", "3,31,59", "--vllm", "0.34.0",
                       "--json")
    r = json.loads(out)
    assert rc == 1 and r["training"]["fc_input"] == ["h3", "h31", "h59"] and r["training"]["target"] == "h61", err
    assert r["serving"]["fc_input"] == ["h2", "h30", "h58"]
    assert r["suggestion"]["eagle_aux_hidden_state_layer_ids"] == [3, 31, 59] and r["suggestion"]["verified"]


def _run_in(version: str, code: str, tmp_path):
    """`code` run by the interpreter of vllm `version`'s environment, parity on its path and its
    TMPDIR (where the adapters' platform() puts vLLM's cache root) in `tmp_path`."""
    import os
    import subprocess

    from parity.envs import EnvError, parity_on_path
    from parity.extract.engines.vllm import python

    try:
        interpreter = python(version)
    except EnvError:
        pytest.skip(f"vllm {version}'s environment is not built")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    with parity_on_path(env) as cwd:
        return subprocess.run([str(interpreter), "-c", code], capture_output=True, text=True, env=env, cwd=cwd)


@pytest.mark.parametrize("version", ["0.34.0", "0.33.0", "0.28.0", "0.22.0", "0.17.0", "0.16.0", "0.11.0"])
def test_each_family_fits_its_verified_release(version, tmp_path):
    """A family's code paths (IMPORTS, and REQUIRES: the names its kernel stand-ins replace) are
    all found in the release it was verified on, so an unseen release is judged by the same list."""
    out = _run_in(version, ("from parity.extract.engines.vllm.families import _fits, family_for\n"
                            f"module = family_for({version!r}); _fits(module); assert {version!r} in module.VERIFIED; "
                            "print('fits')"), tmp_path)
    assert out.stdout.strip().endswith("fits"), out.stderr[-2000:]


def test_0_34_reads_triton_as_present_only_inside_the_cpu_platforms_config_check(tmp_path):
    """vLLM 0.34's CPU platform refuses an x86 CPU without Triton-CPU. parity's 0.34 adapter runs
    that one check as if Triton were there while it builds a config: the config builds, and
    afterwards vLLM's own check is back (it refuses the same config) and `HAS_TRITON` is False."""
    target = tmp_path / "target"
    target.mkdir()
    (target / "config.json").write_text(LLAMA_32.read_text())
    said = _run_in("0.34.0", (
        "from parity.extract.engines.vllm.families import v0_34\n"
        "from parity.extract.child import free_port\n"
        "adapter = v0_34.Adapter(); adapter.platform()\n"
        f"config = adapter.config({str(target)!r}, None, free_port()); print('config built')\n"
        "import vllm.triton_utils as t\n"
        "from vllm.platforms import current_platform\n"
        "try:\n"
        "    current_platform.check_and_update_config(config); print('own check: passed')\n"
        "except RuntimeError as exc:\n"
        "    print('own check:', exc)\n"
        "print('HAS_TRITON', t.HAS_TRITON)\n"), tmp_path)
    expected = "config built\nown check: vLLM on x86 CPUs requires Triton (triton-cpu).\nHAS_TRITON False\n"
    assert expected in said.stdout, said.stdout + said.stderr[-2000:]


def test_the_0_34_family_does_not_run_a_release_that_still_has_the_v1_runner(tmp_path):
    """Its ABSENT: placed on 0.33.0's source (as a release outside every range would be tried),
    the 0.34 family refuses, naming the V1 runner, instead of silently dropping its column."""
    said = _run_in("0.33.0", (
        "from parity.extract.engines.vllm.families import _fits, v0_34\n"
        "try:\n"
        "    _fits(v0_34); print('fits')\n"
        "except LookupError as exc:\n"
        "    print('refused:', exc)\n"), tmp_path)
    assert ("refused: found vllm.v1.worker.gpu_model_runner, which this adapter assumes absent (a model runner "
            "this family does not run)") in said.stdout, said.stdout + said.stderr[-2000:]


def test_gpt_oss_is_captured_with_its_sliding_window_sinks_and_swiglu_experts(tmp_path):
    """gpt-oss runs vLLM's own model code with the stand-ins honouring what it uses (a sliding
    window on every other layer, attention sinks, biased SwiGLU-OAI experts): every slot of
    both runners is named against transformers, and the proposer shares the target's
    `embedding` (gpt-oss's name for it)."""
    from parity.extract.engines import engine
    from parity.sweep.cases import SERVING_CASES

    case = next(c for c in SERVING_CASES if c.target == "gpt-oss-20b")
    contract, _ = engine("vllm", "0.33.0").probe_serving(*read_inputs(case.target_config, case.write_draft(tmp_path / "d")))
    assert [t.name for t in contract.fc_input] == ["h2", "h12", "h21"]  # v2: the defaults
    assert {k: [t.name for t in v] for k, v in contract.runners.items()} == {
        "v1": ["h1", "h11", "h20"], "v2": ["h2", "h12", "h21"]}
    assert contract.embedding == "target"
    assert not [f for f in contract.findings if f.severity == "error" and f.kind != "runners_differ"], contract.findings


def test_the_attention_stand_in_honours_windows_and_sinks():
    import torch

    from parity.extract.engines.vllm.kernels import _causal, _windowed_with_sinks

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(5, 4, 8, generator=gen) for _ in range(3))
    k, v = k[:, :2], v[:, :2]  # grouped-query: 2 kv heads for 4 query heads
    plain = _causal(q, k, v, 0.3)
    torch.testing.assert_close(_windowed_with_sinks(q, k, v, 0.3, None, None), plain)
    torch.testing.assert_close(_windowed_with_sinks(q, k, v, 0.3, 99, torch.full((4,), -1e9)), plain)
    alone = v.repeat_interleave(2, dim=1).reshape(5, -1)  # a window of 1: each token sees itself only
    torch.testing.assert_close(_windowed_with_sinks(q, k, v, 0.3, 1, None), alone)
    sunk = _windowed_with_sinks(q, k, v, 0.3, 1, torch.zeros(4))  # one sink logit 0 beside one score
    weight = torch.sigmoid(torch.einsum("thd,thd->ht", q, k.repeat_interleave(2, dim=1)) * 0.3).t()  # e^s/(e^s+1)
    torch.testing.assert_close(sunk, (alone.view(5, 4, 8) * weight[..., None]).reshape(5, -1))


def test_a_looked_up_absent_kernel_raises_when_called():
    """vLLM 0.28-0.30 fetch `torch.ops._C.silu_and_mul` when building a layer (then run the
    native version on a CPU): parity registers the absent op, and a call to it is loud."""
    import torch

    from parity.extract.engines.vllm.kernels import KernelStandInError, absent_custom_ops

    assert absent_custom_ops("parity_test_absent_op") == ["parity_test_absent_op"]
    assert absent_custom_ops("parity_test_absent_op") == []  # once
    with pytest.raises(KernelStandInError, match="parity_test_absent_op was called"):
        torch.ops._C.parity_test_absent_op(torch.empty(2), torch.ones(4))


# -- vLLM 0.16-0.27: three families (the CPU experts in cpu_fused_moe, no MoE stand-in) ------------

@pytest.mark.parametrize("version, family, runners, default", [
    # 0.22: V1 reads eagle_config's ids, V2 does not; a GPU runs Llama on V1 (V2's list is Qwen3's)
    ("0.22.0", "0.22", {"v1": ["h1", "h15", "h28"], "v2": ["h2", "h16", "h29"]}, "v1"),
    # 0.17-0.21: both runners read only the top-level key (V2 opt-in): the defaults, no drift between them
    ("0.17.0", "0.17", {"v1": ["h2", "h16", "h29"], "v2": ["h2", "h16", "h29"]}, "v1"),
    # 0.16: one EAGLE-3 runner
    ("0.16.0", "0.16", {"v1": ["h2", "h16", "h29"]}, "v1"),
])
def test_the_0_16_to_0_27_families_serve_the_nested_ids_draft(version, family, runners, default, nested, capsys):
    rc, out, err = run(capsys, "contract", "serving", "--engine", "vllm", "--vllm", version, "--target-config",
                       LLAMA_32, "--draft", nested, "--json")
    c = json.loads(out)
    details = c["provenance"]["details"]
    assert c["provenance"]["family"] == family and c["provenance"].get("release_note") is None, err
    assert {r: eval(details[f"{r}_fc_input"]) for r in runners} == runners  # noqa: S307 - our own repr
    assert details["gpu_default_runner"] == default and c["fc_input"] == runners[default]
    assert ("v2_fc_input" in details) == ("v2" in runners)
    assert "CPUUnquantizedExperts" not in details["kernel_standins"]  # vLLM's own CPU experts run


@pytest.mark.parametrize("version, layout, method", [
    ("0.22.0", ["h2", "h16", "h29", "h32"], "extract_hidden_states"),
    ("0.17.0", ["h2", "h16", "h29"], "extract_hidden_states"),  # its capture never reaches id 32
    ("0.16.0", ["h2", "h16", "h29"], "the model's own capture"),  # no extract_hidden_states yet
])
def test_the_0_16_to_0_27_dumps(version, layout, method):
    dump = extract_dump(Target.read(LLAMA_32), [2, 16, 29], version)
    assert [t.name for t in dump.layout] == layout and dump.method.startswith(method)
    assert dump.runner == "v1"  # 0.22: V2 does not support extract_hidden_states; before, V2 is opt-in
    assert (len(layout) == 3) == any("[32] captured nothing" in f.message for f in dump.findings)


def test_gpt_oss_runs_vllms_own_cpu_experts_under_0_22(tmp_path):
    """No MoE stand-in in 0.16-0.27: the unquantised method's CPU backend (`CPUFusedMOE`) runs
    vLLM's own pure-torch experts (SwiGLU-OAI, biases) after its own router, and every slot of
    both runners is still named against transformers. A MoE model runs on V1 on a GPU there."""
    from parity.extract.engines import engine
    from parity.sweep.cases import SERVING_CASES

    case = next(c for c in SERVING_CASES if c.target == "gpt-oss-20b")
    contract, _ = engine("vllm", "0.22.0").probe_serving(*read_inputs(case.target_config, case.write_draft(tmp_path / "d")))
    assert {k: [t.name for t in v] for k, v in contract.runners.items()} == {
        "v1": ["h1", "h11", "h20"], "v2": ["h2", "h12", "h21"]}
    assert [t.name for t in contract.fc_input] == ["h1", "h11", "h20"]  # the GPU default: v1
    assert contract.provenance.details["gpu_default_runner"] == "v1"
    assert not [f for f in contract.findings if f.severity == "error" and f.kind != "runners_differ"], contract.findings
