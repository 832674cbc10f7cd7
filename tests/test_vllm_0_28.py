"""vLLM 0.28-0.29, the family of CPU experts that route themselves (issue 37): gpt-oss and
DeepSeek-V3 stopped on parity's 0.33 stand-in (TypeError: unexpected keyword argument
'router_logits') and 0.28's DeepSeek-V3 on its FlashAttention MLA prefill (ImportError:
compile_flash_attn_varlen_func_from_specs). With the 0.28 family every slot is named against
transformers; each stand-in removed, the same run stops or its states match nothing:
- gpt-oss serving: V1 h1, h11, h20 and V2 h2, h12, h21 (the 0.33 family's experts stand-in in
  place of the routing one: the router_logits TypeError);
- the router's settings not copied from the layer (the release's `_select_experts` then routes
  with the class defaults): the states are no longer gpt-oss's;
- the DeepSeek-V3 dump: h2, h30, h58, h61 (without cpu_attention: the prefill ImportError).
"""

from __future__ import annotations

import json

import pytest

from .test_vllm_cpu_attention import (DEEPSEEK, LLAMA_DRAFT, PROBE, WITHOUT_MLA_ANSWER, _dump, _env, _named, _run,
                                      every_slot_named)

pytestmark = [pytest.mark.slow, pytest.mark.exhaustive]  # one release's cells: ./dev test --all (docs/development.md)

GPT_OSS = DEEPSEEK.parent.parent / "gpt-oss-20b" / "config.json"
MODULAR_EXPERTS = "kernels.experts_apply_routing = kernels.experts_apply"  # the 0.33 family's stand-in
NO_ROUTER_SETTINGS = "kernels.ROUTER_SETTINGS = ()"


def _gpt_oss(tmp_path, removed: str = "pass") -> dict:
    draft = tmp_path / "draft"
    draft.mkdir(exist_ok=True)
    (draft / "config.json").write_text(json.dumps(
        {**LLAMA_DRAFT, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 11, 20]}}))
    return _run(_env("0.28.0").python, PROBE, {"mode": "serving", "target_config": json.loads(GPT_OSS.read_text()),
                                               "draft_dir": str(draft), "candidates": []}, removed)


def test_gpt_oss_on_0_28_runs_the_release_s_router_and_names_every_slot(tmp_path):
    got = _gpt_oss(tmp_path)
    assert "error" not in got, got.get("error")
    assert got["family"] == "0.28"
    assert _named(got, "v1") == ["h1", "h11", "h20"] and _named(got, "v2") == ["h2", "h12", "h21"], got["runners"]
    modular = _gpt_oss(tmp_path, MODULAR_EXPERTS)
    # each runner's forward raised it (the reply carries it per runner)
    assert "unexpected keyword argument 'router_logits'" in json.dumps(modular), modular


def test_the_router_s_settings_taken_from_the_layer_are_what_names_the_states(tmp_path):
    got = _gpt_oss(tmp_path, NO_ROUTER_SETTINGS)
    assert "error" in got or _named(got, "v1") != ["h1", "h11", "h20"], got["runners"]


def test_the_deepseek_dump_on_0_28_names_every_slot():
    python = _env("0.28.0").python
    every_slot_named(python)
    without = _dump(python, WITHOUT_MLA_ANSWER)
    assert "compile_flash_attn_varlen_func_from_specs" in without.get("error", ""), without.get("error")
