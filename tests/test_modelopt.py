"""NVIDIA ModelOpt as a trainer (`--trainer modelopt`, issue 50): its own conversion and hooks run
on the tiny target, its drafts exported by its own exporter (tests/modelopt_export.py, in parity's
ModelOpt environment), checked against SGLang and vLLM as served."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from .helpers import ROOT, built, default_edit_followed, run_parity as parity

RELEASE = "0.47.0"
TARGET = ROOT / "fixtures" / "targets" / "tiny-llama-32l"
TRAINER = ("--trainer", "modelopt", "--modelopt", RELEASE)
VLLM = ("--engine", "vllm", "--vllm", "0.34.0")
ARCH = {"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128}
HOOKS = "lib/python3.11/site-packages/modelopt/torch/speculative/plugins/hf_eagle.py"

pytestmark = [pytest.mark.slow,  # each runs ModelOpt's probe and an engine in child processes
              pytest.mark.skipif(not built("nvidia-modelopt", RELEASE), reason="no nvidia-modelopt environment")]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """Three drafts ModelOpt exported for the 32-layer target: its default ids and export
    (`default`); the same with the trained rope kept (`kept`: eagle_export_rope_scaling {});
    ids [20, 1, 9], as given, rope kept (`unsorted`)."""
    root = tmp_path_factory.mktemp("modelopt-exports")
    specs = [{"out": str(root / "default"), "arch": ARCH},
             {"out": str(root / "kept"), "arch": ARCH, "export_rope_scaling": {}},
             {"out": str(root / "unsorted"), "arch": ARCH, "ids": [20, 1, 9], "export_rope_scaling": {}}]
    run_export(RELEASE, specs)
    return {name: root / name for name in ("default", "kept", "unsorted")}


def run_export(release: str, specs: list[dict]) -> None:
    """tests/modelopt_export.py in ModelOpt `release`'s environment (it runs parity's family of it)."""
    from parity.envs import find_env

    subprocess.run([str(find_env("nvidia-modelopt", release).python), str(ROOT / "tests" / "modelopt_export.py"),
                    str(TARGET), json.dumps(specs)], check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})


def check(draft, *extra, trainer=TRAINER):
    proc = parity("check", "--target-config", str(TARGET / "config.json"), "--draft", str(draft), *trainer, *extra,
                  "--json")
    assert proc.stdout, proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


def fed(result) -> tuple[list[str], list[str]]:
    return result["training"]["fc_input"], result["serving"]["fc_input"]


def notes(result) -> str:
    return "\n".join(result["notes"])


def test_its_default_export_trains_on_the_outputs_of_its_default_ids_and_is_served_another_rope(exports):
    """ModelOpt's default ids [1, 15, 28] are the outputs of those layers (h2, h16, h29), as SGLang
    feeds them; its exporter writes YaRN over the default rope the draft trained with, so SGLang's
    draft computes another rope: DRIFT on the rope alone, with a verified config fix."""
    config = json.loads((exports["default"] / "config.json").read_text())
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 15, 28]
    assert config["rope_scaling"]["rope_type"] == "yarn"
    rc, result = check(exports["default"])
    assert (rc, result["verdict"]) == (1, "drift")
    assert fed(result) == (["h2", "h16", "h29"], ["h2", "h16", "h29"]) and result["training"]["target"] == "final"
    assert [d["field"] for d in result["diff"]["fields"]] == ["draft.rope_frequencies", "draft.rope_scale"]
    assert "eagle_export_rope_scaling" in notes(result)
    fix = result["draft_fix"]
    assert fix["edit"]["rope_scaling"] is None and fix["verified"] and not fix.get("still_differ")


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_its_export_with_the_trained_rope_is_parity_on_both_engines(exports, engine):
    rc, result = check(exports["kept"], *(VLLM if engine == "vllm" else ()))
    assert (rc, result["verdict"]) == (0, "parity"), result.get("differences")
    assert fed(result) == (["h2", "h16", "h29"], ["h2", "h16", "h29"])


def test_ids_out_of_order_train_in_layer_order_and_say_so(exports):
    """Ids [20, 1, 9], exported as given: ModelOpt's hooks fire in layer order (h2, h10, h21),
    SGLang captures in layer order too: PARITY, and the report says the config order is not
    the slot order. vLLM 0.34 reads no ids in eagle_config and serves its default: DRIFT, with
    the ids fix verified."""
    rc, result = check(exports["unsorted"])
    assert (rc, result["verdict"]) == (0, "parity"), result.get("differences")
    assert fed(result) == (["h2", "h10", "h21"], ["h2", "h10", "h21"])
    assert "the config order is not the slot order" in notes(result)
    rc, result = check(exports["unsorted"], *VLLM)
    assert (rc, result["verdict"]) == (1, "drift")
    assert fed(result) == (["h2", "h10", "h21"], ["h2", "h16", "h29"])
    assert result["suggestion"]["verified"] and result["suggestion"]["serving_fc_input"] == ["h2", "h10", "h21"]


def test_an_edit_of_its_installed_default_ids_is_followed(tmp_path):
    """The default ids are ModelOpt's, not typed: edited in a copy of its environment, the
    training contract follows (no draft: its default decides)."""
    old = "    return sorted({1, max(0, num_layers // 2 - 1), max(0, num_layers - 4)})\n"
    new = "    return sorted({2, max(0, num_layers // 2 - 1), max(0, num_layers - 4)})\n"
    args = ("--target-config", str(TARGET / "config.json"), *TRAINER)
    assert default_edit_followed(tmp_path, "nvidia-modelopt", RELEASE, HOOKS, old, new, args) == (
        ["h2", "h16", "h29"], ["h3", "h16", "h29"])


def test_the_first_release_its_family_runs_takes_its_default_ids_unsorted_and_trains_in_layer_order():
    """0.44.0, the first release this family runs: its default ids for 32 layers are the set
    {1, 15, 28} unsorted ([1, 28, 15]), its hooks still fire in layer order (h2, h16, h29), and the
    report says the config order is not the slot order. 0.47.0 sorts them."""
    if not built("nvidia-modelopt", "0.44.0"):
        pytest.skip("no nvidia-modelopt 0.44.0 environment")
    proc = parity("contract", "training", "--target-config", str(TARGET / "config.json"), "--trainer", "modelopt",
                  "--modelopt", "0.44.0", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    contract = json.loads(proc.stdout)
    assert contract["fc_input"] == ["h2", "h16", "h29"] and contract["provenance"]["family"] == "0.44"
    assert contract["provenance"]["details"]["ids"] == "[1, 28, 15]"
    assert any("the config order is not the slot order" in f["message"] for f in contract["findings"])


@pytest.fixture(scope="module")
def exports_0_43(tmp_path_factory):
    """Drafts ModelOpt 0.43.0 exported (its `export_speculative_decoding`): its defaults (ids and the
    llama3 rope its default architecture trains with); ids [20, 1, 9] as given."""
    if not built("nvidia-modelopt", "0.43.0"):
        pytest.skip("no nvidia-modelopt 0.43.0 environment")
    root = tmp_path_factory.mktemp("modelopt-0.43-exports")
    run_export("0.43.0", [{"out": str(root / "default"), "arch": ARCH},
                          {"out": str(root / "unsorted"), "arch": ARCH, "ids": [20, 1, 9]}])
    return {name: root / name for name in ("default", "unsorted")}


def test_before_0_44_its_default_draft_trains_and_exports_the_llama3_rope_and_is_parity(exports_0_43):
    """0.43.0 (family 0.43) trains with its default architecture's llama3 rope and its exporter
    writes that rope: PARITY on SGLang, the rope compared as each side builds it (0.43's draft
    module makes its rotary on the forward) and no note of an exporter's rewrite."""
    config = json.loads((exports_0_43["default"] / "config.json").read_text())
    assert config["rope_scaling"]["rope_type"] == "llama3"
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 28, 15]  # its set's order
    rc, result = check(exports_0_43["default"], trainer=("--trainer", "modelopt", "--modelopt", "0.43.0"))
    assert (rc, result["verdict"]) == (0, "parity"), notes(result)
    assert fed(result) == (["h2", "h16", "h29"], ["h2", "h16", "h29"])
    trained, served = result["training"]["draft"], result["serving"]["draft"]
    assert trained["rope_frequencies"] and trained["rope_frequencies"][3] == pytest.approx(
        served["rope_frequencies"][3], rel=1e-4) and trained["rope_frequencies"][3] < 0.008  # llama3's low band
    assert "the config order is not the slot order" in notes(result) and "eagle_export_rope_scaling" not in notes(result)


def test_before_0_44_ids_out_of_order_are_drift_on_vllm_which_reads_none(exports_0_43):
    """0.43.0 trained on ids [20, 1, 9] in layer order (h2, h10, h21); vLLM 0.34 reads no
    eagle_config ids and serves its default: DRIFT with the ids fix verified."""
    rc, result = check(exports_0_43["unsorted"], *VLLM, trainer=("--trainer", "modelopt", "--modelopt", "0.43.0"))
    assert (rc, result["verdict"]) == (1, "drift")
    assert fed(result) == (["h2", "h10", "h21"], ["h2", "h16", "h29"])
    assert result["suggestion"]["verified"]


def test_its_first_eagle3_release_that_imports_here_runs_with_its_rotary_on_the_model(exports_0_43):
    """0.35.1 (family 0.35: the whole default architecture given, the rotary on the training model,
    no exporter in its package) on the draft 0.43.0 wrote: PARITY, its rope read off
    `model.eagle_rotary_emb`, and its ids' order said without naming an export."""
    if not built("nvidia-modelopt", "0.35.1"):
        pytest.skip("no nvidia-modelopt 0.35.1 environment")
    rc, result = check(exports_0_43["default"], trainer=("--trainer", "modelopt", "--modelopt", "0.35.1"))
    assert (rc, result["verdict"]) == (0, "parity"), notes(result)
    assert result["training"]["provenance"]["family"] == "0.35"
    assert result["training"]["draft"]["rope_frequencies"][3] < 0.008
    assert "as given: the config order" not in notes(result) and "the config order is not the slot order" in notes(result)
