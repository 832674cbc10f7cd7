"""`parity export --engine sglang`: a speculators draft becomes a directory SGLang really loads."""

from __future__ import annotations

import sys

import pytest
import torch

from parity import cli
from parity.envs import run_module
from parity.fixtures import DraftRecipe, speculators_draft

from .helpers import ROOT

pytestmark = pytest.mark.slow

TINY = str(ROOT / "fixtures" / "targets" / "tiny-llama-32l" / "config.json")


def test_export_writes_a_draft_sglang_loads_with_the_solved_ids(tmp_path, capsys):
    out = tmp_path / "served"
    rc = cli.main(["export", "--engine", "sglang", str(speculators_draft(DraftRecipe())), str(out),
                   "--target-config", TINY, "--dump-layout", "h2,h16,h29,h32"])
    assert rc == 0, capsys.readouterr().err
    loaded = run_module(sys.executable, "tests.sglang_load_draft", {"draft_dir": str(out)})
    assert loaded == {"class": "LlamaForCausalLMEagle3", "fc": True, "qkv": True, "lm_head": True,
                      "hot_token_id": True, "aux_ids": [1, 15, 28]}


def test_export_refuses_what_sglang_cannot_honour(tmp_path, capsys):
    out = tmp_path / "served"
    draft = speculators_draft(DraftRecipe(norm_before_residual=True))
    capsys.readouterr()  # building a fresh fixture may print; only the CLI's output is checked
    rc = cli.main(["export", "--engine", "sglang", str(draft), str(out), "--target-config", TINY,
                   "--dump-layout", "h2,h16,h29,h32"])
    err = capsys.readouterr().err
    assert rc == 2 and "norm_before_residual" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_export_for_0_4_8_renames_the_layer_and_zeroes_the_fc_bias(tmp_path, capsys):
    """SGLang 0.4.8's draft class names its decoder layer `midlayer` (its load_weights raises
    KeyError on speculators' `layers.0.*`) and builds its fc with a bias: the export writes the
    layer as `midlayer.*` and a zero `fc.bias`, and its own gate then finds parity."""
    from safetensors.torch import load_file

    from .helpers import built

    if not built("sglang", "0.4.8.post1"):
        pytest.skip("sglang 0.4.8.post1's environment is not built (./dev setup sglang-0.4.8.post1)")
    draft, out = speculators_draft(DraftRecipe()), tmp_path / "served"
    args = ["--target-config", TINY, "--dump-layout", "h2,h16,h29,h32", "--sglang", "0.4.8.post1"]
    assert cli.main(["export", "--engine", "sglang", str(draft), str(out), *args]) == 0, capsys.readouterr().err
    trained, served = load_file(str(draft / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert not [n for n in served if n.startswith("layers.")]
    for name, tensor in trained.items():
        assert served[name.replace("layers.0.", "midlayer.", 1)].equal(tensor), name
    assert served["fc.bias"].equal(torch.zeros(trained["fc.weight"].shape[0], dtype=trained["fc.weight"].dtype))
    capsys.readouterr()
    assert cli.main(["check", "--draft", str(out), *args]) == 0, capsys.readouterr().out
