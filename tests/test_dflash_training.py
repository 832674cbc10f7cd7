"""DFlash drafts on the training side (issue 37 item 3): which target states, in which order, a
speculators DFlash draft is trained on, read from each release's own code.

The probe runs the release's data path (the arrow directory, `ArrowDataset`, the collate) with the
preprocess its training gives a DFlash run (0.8 on: read from its installed `train.cli.main`), then
its own `DFlashDraftModel.forward` on what the path handed over, reading back at the model's `fc`
which chunk lands where. Nothing of the rule is typed here: the mutation test edits the installed
model and CLI in a shadow copy of the environment and sees the contract, and the check, follow.
"""

from __future__ import annotations

import json
from argparse import Namespace

import pytest

from parity.extract.run_until import CodePathMoved, local_value

from .helpers import QWEN3, ROOT, built, run_parity, shadow_release

DFLASH = ROOT / "fixtures" / "drafts" / "qwen3-8b-dflash"  # ids [1, 9, 17, 25, 33]: h2 ... h34
TRAINED = "h2,h10,h18,h26,h34,h36"  # the dump a DFlash draft with those ids is trained on (last: the target)
FC = ["h2", "h10", "h18", "h26", "h34"]
UNSHIFTED = "row t pairs input_ids[t] with hidden_states[t] and verifier_last_hidden_states[t] (6 of 6 positions kept)"


def training(*extra: str, env: dict | None = None) -> tuple[int, dict | str]:
    proc = run_parity("contract", "training", "--json", "--target-config", str(QWEN3), "--dump-layout", TRAINED,
                      "--draft", str(DFLASH), *extra, env=env)
    return proc.returncode, (json.loads(proc.stdout) if proc.returncode in (0, 1) else proc.stderr.strip())


# -- fast: reading one local choice of an installed entry point -----------------------------------

def _entry(args):
    chosen = {"a": 1, "b": 2}
    picked = chosen.get(args.kind)
    raise RuntimeError("an entry point that would start a run")  # never reached by local_value


def test_local_value_runs_only_the_assigning_statement_and_fails_where_it_moved():
    table = local_value(_entry, "chosen")
    assert table == {"a": 1, "b": 2}
    assert local_value(_entry, "picked", chosen=table, args=Namespace(kind="b")) == 2
    assert local_value(_entry, "picked", chosen=table, args=Namespace(kind="dflash")) is None
    with pytest.raises(CodePathMoved, match="assigning nowhere"):
        local_value(_entry, "nowhere")


# -- slow: each release family's own DFlash model ------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("release,preprocess,normed", [
    (None, "none (read from speculators.train.cli.main", True),  # 0.9.0, this environment
    ("0.8.1", "none (read from speculators.train.cli.main", True),
    ("0.7.0.2", "none (not read", True),
    ("0.5.0", "none (not read", None),  # its DFlash model trains on the tokens, never the verifier's head
])
def test_a_dflash_draft_gets_a_training_contract_from_the_release(release, preprocess, normed):
    if release and not built("speculators", release):
        pytest.skip(f"speculators {release} environment not built")
    rc, c = training(*(("--speculators", release) if release else ()))
    assert rc == 0, c
    assert c["draft_kind"] == "dflash" and c["fc_input"] == FC and c["target"] == "h36"
    assert c["alignment"] == UNSHIFTED  # no eagle3 shift_batch: the model aligns its targets itself
    details = c["provenance"]["details"]
    assert details["preprocess"].startswith(preprocess)
    assert details["dflash_model"] == "speculators.models.dflash.core.DFlashDraftModel"
    assert details["dflash_fc_chunk_order"] == "[0, 1, 2, 3, 4]"
    assert c["target_normed_by_trainer"] is normed
    assert not [f for f in c["findings"] if f["severity"] != "info"], c["findings"]


@pytest.mark.slow
def test_a_trainer_release_before_dflash_says_it_has_none_typed_as_its_own_answer():
    """0.4.0.1 has no speculators.models.dflash: the release's own answer (engine_lacks), not parity's limit."""
    from parity.extract.trainers.speculators import probe_training

    if not built("speculators", "0.4.0.1"):
        pytest.skip("speculators 0.4.0.1 environment not built")
    info = probe_training(6, "0.4.0.1", kind="dflash")["cannot_extract"]
    assert info["engine_lacks"] is True
    assert info["reason"].startswith("this trainer release has no DFlash: no speculators.models.dflash.core."
                                     "DFlashDraftModel"), info
    rc, err = training("--speculators", "0.4.0.1")
    assert rc == 2 and err.endswith("in the installed source") and "Traceback" not in err


# -- slow: the installed DFlash model and CLI edited in a shadow copy --------------------------------

CORE = "lib/python3.11/site-packages/speculators/models/dflash/core.py"
FC_CALL = "        fc_output = self.fc(hidden_states)\n"
REVERSED = "        fc_output = self.fc(torch.cat(hidden_states.chunk(len(self.target_layer_ids), -1)[::-1], -1))\n"
CLI = "lib/python3.11/site-packages/speculators/train/cli.py"
FNS = '    preprocess_fns = {\n        "eagle3": shift_batch,\n'


@pytest.mark.slow
def test_the_training_contract_follows_an_edit_of_the_dflash_model_and_the_check_fails():
    """speculators 0.8.1 with its DFlashDraftModel feeding its fc the chunks in reverse, and its CLI giving
    dflash eagle3's shift_batch: the contract follows both (fc [h34 ... h2], shifted alignment) and the
    check against SGLang 0.5.23, PASS on the installed code, is a DRIFT on every slot but the middle one."""
    import tempfile
    from pathlib import Path

    if not built("speculators", "0.8.1"):
        pytest.skip("speculators 0.8.1 environment not built")
    check = ("check", "--json", "--target-config", str(QWEN3), "--draft", str(DFLASH), "--dump-layout", TRAINED,
             "--speculators", "0.8.1")
    proc = run_parity(*check)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert json.loads(proc.stdout)["training"]["draft_kind"] == "dflash"
    with tempfile.TemporaryDirectory() as tmp:
        _, _, env = shadow_release(Path(tmp), "speculators", "0.8.1", {
            CORE: (FC_CALL, REVERSED), CLI: (FNS, FNS + '        "dflash": shift_batch,\n')})
        rc, c = training("--speculators", "0.8.1", env=env)
        assert rc == 0, c
        assert c["fc_input"] == FC[::-1] and c["provenance"]["details"]["dflash_fc_chunk_order"] == "[4, 3, 2, 1, 0]"
        assert c["alignment"].startswith("row t pairs input_ids[t+1] with hidden_states[t]")
        assert c["provenance"]["details"]["preprocess"].startswith("speculators.models.eagle3.data.shift_batch")
        proc = run_parity(*check, env=env)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["verdict"] == "drift" and result["training"]["fc_input"] == FC[::-1]
    assert [d["where"] for d in result["differences"]] == ["slot 0", "slot 1", "slot 3", "slot 4"]
