"""NVIDIA NeMo Automodel as a trainer (`--trainer nemo-automodel`, issue 50): its own target hooks,
draft and training step run on the tiny target; its draft as its recipe writes it and its
`serve_sglang` rewrites it (tests/nemo_export.py, in parity's NeMo Automodel environment), checked
against SGLang and vLLM as served."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from .helpers import ROOT, built, default_edit_followed, run_parity as parity

RELEASE = "0.7.0"
TARGET = ROOT / "fixtures" / "targets" / "tiny-llama-32l"
TRAINER = ("--trainer", "nemo-automodel", "--nemo-automodel", RELEASE)
VLLM = ("--engine", "vllm", "--vllm", "0.34.0")
TARGET_PY = "lib/python3.11/site-packages/nemo_automodel/components/speculative/eagle/target.py"

pytestmark = [pytest.mark.slow,  # each runs NeMo Automodel's probe and an engine in child processes
              pytest.mark.skipif(not built("nemo-automodel", RELEASE), reason="no nemo-automodel environment")]


@pytest.fixture(scope="module")
def draft(tmp_path_factory):
    """The draft its recipe writes for the 32-layer target (no layer ids), made servable by its
    serve_sglang (LlamaForCausalLMEagle3, one layer)."""
    from parity.envs import find_env

    out = tmp_path_factory.mktemp("nemo-automodel") / "draft"
    subprocess.run([str(find_env("nemo-automodel", RELEASE).python), str(ROOT / "tests" / "nemo_export.py"),
                    str(TARGET), str(out)], check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLMEagle3"] and not any("aux" in k for k in config)
    return out


def check(draft, *extra):
    proc = parity("check", "--target-config", str(TARGET / "config.json"), "--draft", str(draft), *TRAINER, *extra,
                  "--json")
    assert proc.stdout, proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


def test_its_default_ids_are_the_engines_defaults_and_the_missing_ids_are_said(draft):
    """Its default [1, 15, 28] trains on the outputs of those layers (h2, h16, h29), which SGLang's
    default feeds: PARITY, with the notes that the draft records no ids."""
    rc, result = check(draft)
    assert (rc, result["verdict"]) == (0, "parity")
    assert result["training"]["fc_input"] == result["serving"]["fc_input"] == ["h2", "h16", "h29"]
    assert "records no layer ids" in "\n".join(result["notes"])
    trained = result["training"]["draft"]  # the draft its recipe builds, compared with SGLang's
    assert trained["built_by"].startswith("nemo-automodel 0.7.0") and trained["rope_frequencies"]
    assert trained["intermediate_size"] == result["serving"]["draft"]["intermediate_size"] == 128


def test_its_built_draft_is_compared_a_served_width_it_did_not_train_is_drift(draft, tmp_path):
    """The draft its recipe built has the target's MLP width; a served config edited to another
    is DRIFT on that field alone, with the config fix verified."""
    import shutil

    edited = tmp_path / "edited"
    shutil.copytree(draft, edited)
    config = json.loads((edited / "config.json").read_text())
    config["intermediate_size"] *= 2
    (edited / "config.json").write_text(json.dumps(config))
    rc, result = check(edited)
    assert (rc, result["verdict"]) == (1, "drift")
    assert [d["field"] for d in result["diff"]["fields"]] == ["draft.intermediate_size"]
    assert result["draft_fix"] == {"edit": {"intermediate_size": 128}, "verified": True, "still_differ": []}


def test_other_ids_are_served_the_engines_defaults_and_the_ids_fix_is_verified(draft):
    """A run on [3, 9, 20]: its export writes no ids, so SGLang serves its default: DRIFT, and
    the fix writes the ids, verified by SGLang feeding h4, h10, h21."""
    rc, result = check(draft, "--nemo-automodel-ids", "3,9,20")
    assert (rc, result["verdict"]) == (1, "drift")
    assert result["training"]["fc_input"] == ["h4", "h10", "h21"]
    assert result["serving"]["fc_input"] == ["h2", "h16", "h29"]
    assert result["suggestion"]["verified"] and result["suggestion"]["serving_fc_input"] == ["h4", "h10", "h21"]


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_ids_out_of_order_train_in_config_order_which_no_ids_fix_gives(draft, engine):
    """[5, 1, 3] trains on h6, h2, h4 (config order, as measured); each engine feeds layer order:
    DRIFT naming the order, and no ids fix, said with what was tried."""
    rc, result = check(draft, "--nemo-automodel-ids", "5,1,3", *(VLLM if engine == "vllm" else ()))
    assert (rc, result["verdict"]) == (1, "drift")
    assert result["training"]["fc_input"] == ["h6", "h2", "h4"]
    assert result["diff"]["slots"][0]["why"].startswith("order differs")
    assert "in the order the run gave the ids [5, 1, 3]" in "\n".join(result["notes"])
    assert result["suggestion"] is None and "no id list makes" in result["unfixable"]


def test_an_edit_of_its_installed_default_ids_is_followed(tmp_path):
    old = "    candidates = [1, num_layers // 2 - 1, num_layers - 4]\n"
    new = "    candidates = [2, num_layers // 2 - 1, num_layers - 4]\n"
    args = ("--target-config", str(TARGET / "config.json"), *TRAINER)
    assert default_edit_followed(tmp_path, "nemo-automodel", RELEASE, TARGET_PY, old, new, args) == (
        ["h2", "h16", "h29"], ["h3", "h16", "h29"])


@pytest.mark.parametrize("release", ["0.5.0", "0.6.0"])
def test_its_first_release_with_eagle3_and_the_next_run_in_their_family(release):
    """0.5.0 (its first release with EAGLE-3; family 0.5) and 0.6.0 (family 0.6, as 0.7.0): the
    states in the order given, its default from its own target class."""
    if not built("nemo-automodel", release):
        pytest.skip(f"no nemo-automodel {release} environment")
    proc = parity("contract", "training", "--target-config", str(TARGET / "config.json"), "--trainer",
                  "nemo-automodel", "--nemo-automodel", release, "--nemo-automodel-ids", "5,1,3", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    contract = json.loads(proc.stdout)
    assert contract["fc_input"] == ["h6", "h2", "h4"] and contract["provenance"]["version"] == release
    assert contract["provenance"]["family"] == release.rsplit(".", 1)[0]


def cache(tmp_path, ids: str, release: str = RELEASE):
    """An offline cache's manifest as its precompute_eagle3 writes it (tests/nemo_cache.py)."""
    from parity.envs import find_env

    out = tmp_path / f"cache-{ids.replace(',', '-')}"
    subprocess.run([str(find_env("nemo-automodel", release).python), str(ROOT / "tests" / "nemo_cache.py"),
                    str(TARGET), str(out), ids], check=True, capture_output=True)
    return out


def test_its_offline_cache_gives_the_run_s_ids_and_its_offline_path_is_run(draft, tmp_path):
    """A cache its precompute made with ids [5, 1, 3]: its manifest says the run's ids (no
    --nemo-automodel-ids), its offline path (the cached bf16 states read back and handed to its
    trainer module) trains on h6, h2, h4 in that order: DRIFT on SGLang, NO FIX; the built draft
    is the same in every field (the cache's dtype does not reach it)."""
    rc, result = check(draft, "--nemo-automodel-cache", str(cache(tmp_path, "5,1,3")))
    assert (rc, result["verdict"]) == (1, "drift")
    assert result["training"]["fc_input"] == ["h6", "h2", "h4"]
    assert result["training"]["provenance"]["details"]["data_path"].startswith("offline")
    assert not result["diff"]["fields"] and result["unfixable"]
    proc = parity("check", "--target-config", str(TARGET / "config.json"), "--draft", str(draft), *TRAINER,
                  "--nemo-automodel-cache", str(cache(tmp_path, "5,1,3")), "--nemo-automodel-ids", "1,3,5")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "records aux_layer_ids [5, 1, 3]" in proc.stderr


def test_its_first_release_s_offline_path_runs_its_own_cache_writer(tmp_path):
    """0.5.0's cache sample takes no top-k (family 0.5's `cache_sample_full`): its offline path
    on a cache of its default ids trains on h2, h16, h29."""
    if not built("nemo-automodel", "0.5.0"):
        pytest.skip("no nemo-automodel 0.5.0 environment")
    proc = parity("contract", "training", "--target-config", str(TARGET / "config.json"), "--trainer",
                  "nemo-automodel", "--nemo-automodel", "0.5.0", "--nemo-automodel-cache",
                  str(cache(tmp_path, "1,15,28", "0.5.0")), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    contract = json.loads(proc.stdout)
    assert contract["fc_input"] == ["h2", "h16", "h29"] and contract["provenance"]["family"] == "0.5"
    assert contract["provenance"]["details"]["data_path"].startswith("offline")
