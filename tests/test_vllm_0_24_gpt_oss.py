"""gpt-oss on vLLM 0.24.0 (issue 37): `KeyError: 'layers.0.mlp.experts.w2_weight'` is the
release's own answer, not a limit of parity's CPU run.

0.24's MoE layer keeps its expert weights under `mlp.experts.routed_experts.*` on every platform
(`FusedMoE` builds a `MoERunner` around a `RoutedExperts`, whatever the device), and
`GptOssModel` loads a checkpoint by its quantization: the mxfp4 loader (the published
checkpoint) renames the checkpoint's `mlp.experts.*` through `remap_moe_expert_weights`, the
loader for unquantized weights (`_load_weights_other`, which parity's tiny checkpoint and any
bf16 gpt-oss checkpoint take, on a GPU as here) does not, and looks up the old name (0.25.0
extracts gpt-oss; 0.27.0's loader remaps there too). So the cell is "engine refuses", typed by
the sweep from the probe's reply.
- the gpt-oss serving cell on 0.24.0: the engine's KeyError, "engine refuses", no harness limit;
- that remap made to 0.24.0's loader in a shadow environment: the same cell extracts
  h1, h11, h20 (the V1 runner's, as on 0.22, 0.23 and 0.25), so nothing else of parity's run
  stood in the way.
"""

from __future__ import annotations

import pytest

from parity.extract.engines import engine
from parity.sweep.cases import SERVING_CASES
from parity.sweep.run import serving_cell

from .helpers import shadow_release
from .test_vllm_cpu_attention import _env

pytestmark = [pytest.mark.slow, pytest.mark.exhaustive]  # one release's cells: ./dev test --all (docs/development.md)

GPT_OSS = next(case for case in SERVING_CASES if case.target == "gpt-oss-20b")
LOADER = "lib/python3.11/site-packages/vllm/model_executor/models/gpt_oss.py"
OTHER_LOOP = "        for name, weight in weights:\n            # Skip layers on other devices."
REMAPPED = ("        for name, weight in remap_moe_expert_weights(weights, params_dict):\n"
            "            # Skip layers on other devices.")


def test_gpt_oss_on_0_24_is_the_release_s_own_loader_error(tmp_path, monkeypatch):
    _env("0.24.0")
    monkeypatch.setenv("PARITY_NO_CACHE", "1")
    cell = serving_cell(GPT_OSS, engine("vllm", "0.24.0"), tmp_path)
    assert cell["outcome"] == "engine refuses" and "fc" not in cell, cell
    assert "KeyError: 'layers.0.mlp.experts.w2_weight'" in cell["error"], cell
    assert "CPU harness" not in cell["error"], cell


def test_with_0_25_s_remap_in_that_loader_0_24_extracts_gpt_oss(tmp_path, monkeypatch):
    _env("0.24.0")
    _, _, env = shadow_release(tmp_path, "vllm", "0.24.0", {LOADER: (OTHER_LOOP, REMAPPED)})
    for key in ("PARITY_HOME", "PYTHONPYCACHEPREFIX"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.setenv("PARITY_NO_CACHE", "1")
    cell = serving_cell(GPT_OSS, engine("vllm", "0.24.0"), tmp_path / "work")
    assert cell["outcome"] == "extracted", cell
    assert cell["fc"] == ["h1", "h11", "h20"] and cell["runners"]["v2"] == ["h2", "h12", "h21"], cell
