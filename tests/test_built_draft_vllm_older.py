"""The built-draft contract on vLLM 0.11-0.27 (issue 36): the 0.11, 0.16, 0.17 and 0.22 families
build the draft with each release's own `Eagle3LlamaForCausalLM` (as its proposer builds it) and
read the same facts as the 0.33 family, with the config keys the release reads; a draft a
release builds otherwise than training did is a drift naming the field and the release; an edit
of each installed draft class (0.11's; 0.16's and 0.17's, the same source; 0.22's), in a copy of
the environment, is followed. Each family's differences: the header of its file under
parity/extract/engines/vllm/families/."""

from __future__ import annotations

import json
import re
import sys

import pytest

from .helpers import LLAMA, edit_in_shadow, run_parity as parity, shadow_release
from .test_built_draft_cases import LAYOUT, LLAMA_DRAFT, REPLAY, REPLAY_DUMP, SITE, llama_draft

pytestmark = [pytest.mark.slow, pytest.mark.exhaustive]  # one release's cells: ./dev test --all (docs/development.md)
TINY_LLAMA = LLAMA.parents[1] / "tiny-llama-32l" / "config.json"


def _check(release: str, draft, **run) -> tuple[int, dict]:
    proc = parity("check", "--engine", "vllm", "--vllm", release, "--target-config", str(LLAMA), "--draft", str(draft),
                  *LAYOUT, "--json", "--no-verify", **run)
    assert proc.stdout.strip(), proc.stderr[-2000:]
    return proc.returncode, json.loads(proc.stdout)


def _drifted(result: dict) -> list[str]:
    """The built-draft fields the check found different (draft.*)."""
    return [d["field"] for d in result["diff"]["fields"] if d["field"].startswith("draft.")]


# The bundled draft on each release's installed environment, then the same with the release's
# draft class edited (its decoder layer's first RMSNorm built with another eps). 0.22's V1 runner
# reads the config's nested ids [1, 15, 28] (the runners then differ): exit 1 on the fc input,
# not on the built draft.
EDITED = {"0.11.0": 0, "0.17.0": 0, "0.22.0": 1}


@pytest.mark.parametrize("release", EDITED)
def test_the_bundled_draft_is_built_as_trained_and_an_edit_of_the_draft_class_is_followed(release, tmp_path):
    file = f"{SITE}/vllm/model_executor/models/llama_eagle3.py"
    old = "        self.hidden_norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)\n"
    new = old + "        self.input_layernorm.variance_epsilon = 1e-3  # the edit\n"
    shadow, original, env = shadow_release(tmp_path, "vllm", release, {file: (old, old)})
    code, before = _check(release, LLAMA_DRAFT, python=sys.executable, env=env)
    assert code == EDITED[release], before
    served = before["serving"]["draft"]
    assert served["built_by"] == f"vllm {release} Eagle3LlamaForCausalLM"
    assert _drifted(before) == [] and served["rms_norm_eps"] == 1e-5
    assert served["rope_frequencies"] == pytest.approx([500000.0 ** (-2 * i / 16) for i in range(8)], rel=1e-5)
    assert {"rope_theta", "rms_norm_eps", "draft_vocab_size", "target_hidden_size"} <= set(served["config_keys_read"])
    edit_in_shadow(shadow, file, old, new)
    code, after = _check(release, LLAMA_DRAFT, python=sys.executable, env=env)
    assert code == 1, after
    assert _drifted(after) == ["draft.rms_norm_eps"] and after["serving"]["draft"]["rms_norm_eps"] == 1e-3
    assert old + "        self.input" not in (original / file).read_text()  # the original is untouched


def test_a_served_rope_theta_other_than_the_trained_is_a_drift_naming_the_field_and_the_release(tmp_path):
    """`--trained`: the bundled speculators checkpoint (rope base 10000; its norm flags off, which
    0.11 never builds; config only), served in the speculators format vLLM loads natively with the
    layer's `rope_theta` 500000 (the key transformers 4.57, which vLLM 0.11 runs, reads)."""
    trained, served = tmp_path / "trained", tmp_path / "served"
    config = json.loads((REPLAY / "draft" / "config.json").read_text())
    config.update(norm_before_fc=False, norm_output=False)
    for folder, layer in ((trained, config["transformer_layer_config"]),
                          (served, {**{k: v for k, v in config["transformer_layer_config"].items()
                                       if k != "rope_parameters"}, "rope_theta": 500000.0})):
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({**config, "transformer_layer_config": layer}))
    proc = parity("check", "--engine", "vllm", "--vllm", "0.11.0", "--target-config",
                  str(REPLAY / "target" / "config.json"), *REPLAY_DUMP, "--trained", str(trained),
                  "--draft", str(served), "--no-verify")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert "served   vllm 0.11.0 Eagle3LlamaForCausalLM" in proc.stdout, proc.stdout
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if line.startswith("  rope_")}
    assert "MISMATCH: the math differs" in rows["rope_frequencies"] and "500000.0" in rows["rope_theta"], proc.stdout
    assert re.search(r"built draft .*: 1 of \d+ fields differ", proc.stdout), proc.stdout
    # the one key 0.11 never reads that training read: the ids (its runner reads none), which the
    # draft's own forward does not depend on (decided by running it: a note; what they wire is the
    # slot table's); num_hidden_layers 1 is what its class builds without reading it (at its default)
    unread = [line.split()[0] for line in proc.stdout.splitlines() if "MISMATCH: training built the draft with it" in line]
    assert unread == [], proc.stdout
    assert re.search(r"eagle_aux_hidden_state_layer_ids +read +never read +note: read by training only", proc.stdout)


def test_norm_before_fc_where_the_release_never_reads_it_is_a_drift_naming_it_and_the_release(tmp_path):
    """vLLM 0.17's draft class builds no norm before the fc (0.21 on does): a draft trained with
    one is served without it."""
    proc = parity("check", "--engine", "vllm", "--vllm", "0.17.0", "--target-config", str(LLAMA),
                  "--draft", str(llama_draft(tmp_path, norm_before_fc=True)), *LAYOUT, "--no-verify")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    row = next(line for line in proc.stdout.splitlines() if line.strip().startswith("norm_before_fc"))
    assert "MISMATCH" in row, proc.stdout
    assert "vllm 0.17.0" in proc.stdout and "never reads" in proc.stdout, proc.stdout


def test_a_two_layer_draft_is_built_and_wired_as_trained_on_0_17():
    """0.12-0.21's class builds `num_hidden_layers` layers but keeps no `fc_input_size`: the
    wiring forward takes its fc's own input width, and both layers are compared."""
    code, result = _check("0.17.0", LLAMA_DRAFT.parent / "llama-3.1-8b-eagle3-2layer")
    assert code == 0, result
    trained, served = result["training"]["draft"], result["serving"]["draft"]
    assert _drifted(result) == [] and served["layers_built"] == trained["layers_built"] == 2, served
    assert served["later_layer_input_norms"] == trained["later_layer_input_norms"] == ["input_layernorm"]


def test_a_checkpoint_vllm_0_11_s_loader_refuses_is_unservable_naming_its_error(tmp_path):
    """A two-layer speculators checkpoint (with weights) on vLLM 0.11.0, which builds one decoder
    layer: its own `load_weights` raises KeyError on `layers.1.*`, as the server's start-up would.
    That is the engine refusing the draft (UNSERVABLE, exit 1, its error and where it raised it
    named), not a draft parity could not read. The same draft on a copy of 0.11.0 whose loader
    skips layer 1's tensors loads, and is then compared: DRIFT on layers_built."""
    from parity.fixtures import DraftRecipe, speculators_draft

    draft = speculators_draft(DraftRecipe(ids=(2, 4, 6), layer={"num_hidden_layers": 2}))
    file = f"{SITE}/vllm/model_executor/models/llama_eagle3.py"
    old = "            if 'midlayer.' in name:\n                name = name.replace('midlayer.', 'layers.0.')\n"
    new = old + "            if name.startswith('layers.1.'):  # the edit: layer 1's tensors skipped\n                continue\n"
    shadow, original, env = shadow_release(tmp_path, "vllm", "0.11.0", {file: (old, old)})

    def check() -> tuple[int, dict]:
        proc = parity("check", "--engine", "vllm", "--vllm", "0.11.0", "--target-config", str(TINY_LLAMA),
                      "--draft", str(draft), "--dump-layout", "h2,h4,h6,h32", "--json", "--no-verify",
                      python=sys.executable, env=env)
        assert proc.stdout.strip(), proc.stderr[-2000:]
        return proc.returncode, json.loads(proc.stdout)

    code, refused = check()
    assert code == 1 and refused["verdict"] == "unservable", refused
    assert "KeyError: 'layers.1.input_layernorm.weight'" in refused["unservable"], refused["unservable"]
    assert "llama_eagle3.py" in refused["unservable"] and "load_weights" in refused["unservable"]
    kinds = [f["kind"] for f in refused["serving"]["findings"]]
    assert "draft_unloadable" in kinds and "draft_facts_unread" not in kinds, kinds
    edit_in_shadow(shadow, file, old, new)
    code, loaded = check()
    assert code == 1 and loaded["verdict"] == "drift", loaded.get("unservable")
    assert "draft.layers_built" in _drifted(loaded), loaded["diff"]
    assert new not in (original / file).read_text()  # the original is untouched
