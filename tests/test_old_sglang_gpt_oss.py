"""gpt-oss on the SGLang releases whose own non-CUDA code path cannot compute it (issue 37, item 4).

parity runs a release's model code as SGLang runs it off CUDA, and on these releases that path
is not the model, by the engine's own code, found by running it (parity.extract.engines.sglang.cpu_path).
A GPU runs the CUDA methods instead, so each is a limit of parity's CPU run (HarnessLimit, exit 2),
naming the engine's non-CUDA code, never the engine's refusal (an UNSERVABLE verdict):
- 0.5.3rc2-0.5.10.post1: the non-CUDA MoE never reads the experts' biases the model loaded
  (0.5.11 reads them): every captured state is then no state of the model;
- 0.5.0rc1-0.5.3rc0: the model passes the rotary op `fused_set_kv_buffer_arg`, which only its
  CUDA method takes (shown on 0.5.10 by an injected edit restoring those releases' signature).
"""

from __future__ import annotations

import pytest

from parity.envs import PROBE_OVERRIDES
from parity.errors import HarnessLimit
from parity.extract.engines.sglang import extract_serving
from parity.inputs import read_inputs

from .helpers import GPT_OSS, built, drift_overrides, sglang_draft

pytestmark = pytest.mark.slow

UNREAD = ("parity's CPU harness cannot run sglang 0.5.10 here: its own non-CUDA forward of GptOssForCausalLM, which "
          "parity runs, is not the model: it never reads the loaded model.layers.*.mlp.experts.w13_weight_bias (of its "
          "FusedMoE), model.layers.*.mlp.experts.w2_weight_bias (of its FusedMoE) (zeroing them changes none of its "
          "outputs), so the states it computes off CUDA match no state of the model; a GPU runs its CUDA kernels. "
          "This is a limit of parity's CPU run, not sglang refusing the draft: no verdict is given")


@pytest.fixture(autouse=True)
def _need():
    if not built("sglang", "0.5.10"):
        pytest.skip("sglang 0.5.10's environment is not built (./dev setup sglang-0.5.10)")


def _gpt_oss(tmp_path):
    return extract_serving(*read_inputs(GPT_OSS, sglang_draft(tmp_path, ids=[1, 11, 20])), "0.5.10")


def test_a_non_cuda_moe_that_ignores_the_expert_biases_is_a_limit_of_the_cpu_run(tmp_path):
    with pytest.raises(HarnessLimit) as exc:
        _gpt_oss(tmp_path)
    assert str(exc.value) == UNREAD


def test_without_the_unread_parameter_check_it_reads_as_parity_unable_to_name_them(tmp_path, monkeypatch):
    monkeypatch.setenv(PROBE_OVERRIDES, drift_overrides("tests.drift.serving_unread_parameters_unchecked"))
    c = _gpt_oss(tmp_path)
    assert [f.kind for f in c.findings if f.severity == "error"] == ["unidentified_state"] * 3


def test_an_argument_only_the_cuda_method_takes_is_the_engines_non_cuda_path(tmp_path, monkeypatch):
    monkeypatch.setenv(PROBE_OVERRIDES, drift_overrides("tests.drift.serving_rope_cpu_method_without_fused_kv_arg"))
    with pytest.raises(HarnessLimit) as exc:
        _gpt_oss(tmp_path)
    msg = str(exc.value)
    assert msg.startswith(
        "parity's CPU harness cannot run sglang 0.5.10 here: its own non-CUDA code path, which parity runs, cannot run "
        "architecture GptOssForCausalLM (model_type 'gpt_oss'): its model code passes 'fused_set_kv_buffer_arg' to "
        "RotaryEmbedding, whose non-CUDA method forward_native() does not take it (its forward_cuda() does); a GPU "
        "runs its CUDA method: a plain prefill"), msg
    assert msg.endswith("not sglang refusing the draft: no verdict is given"), msg
