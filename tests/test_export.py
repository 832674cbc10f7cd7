"""`parity export --engine sglang`: a speculators draft becomes a directory SGLang really loads."""

from __future__ import annotations

import sys

import pytest

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
