"""gpt-oss on the SGLang releases whose own non-CUDA code path does not compute it (issue 37, item 4).

parity runs a release's model code as SGLang runs it off CUDA, and on these releases that path
is not the model, by the engine's own code, found by running it (parity.extract.engines.sglang.cpu_path).
A GPU runs the CUDA methods instead:
- 0.5.3rc2-0.5.10.post1: the non-CUDA MoE never reads the experts' biases the model loaded, nor
  their clamped SwiGLU (0.5.11 reads them). parity stands in for the CUDA fused-MoE route there
  (moe_standin.py: numerically transformers' GptOssExperts, with the release's own activation),
  and every captured state is identified; without the stand-in it is a limit of parity's CPU run
  (HarnessLimit, exit 2), naming the engine's non-CUDA code, never the engine's refusal;
- 0.5.0rc1-0.5.3rc0: the model passes the rotary op `fused_set_kv_buffer_arg`, which only its
  CUDA method takes (shown on 0.5.10 by an injected edit restoring those releases' signature).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from parity.envs import PROBE_OVERRIDES, find_env
from parity.errors import HarnessLimit
from parity.extract.engines.sglang import extract_serving
from parity.forkserver import OFF as NO_FORKSERVER
from parity.inputs import read_inputs

from .helpers import (GPT_OSS, ROOT, built, drift_overrides, run_parity, sglang_draft,
                      shadow_release)

pytestmark = pytest.mark.slow

SITE = "lib/python3.11/site-packages"

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


def test_gpt_oss_is_captured_through_the_moe_stand_in_and_every_state_identified(tmp_path):
    c = _gpt_oss(tmp_path)
    assert [t.name for t in c.fc_input] == ["h2", "h12", "h21"]  # ids [1, 11, 20], +1
    assert not [f for f in c.findings if f.severity == "error"], c.findings


def test_without_the_moe_stand_in_the_non_cuda_moe_that_ignores_the_biases_is_a_limit_of_the_cpu_run(
        tmp_path, monkeypatch):
    monkeypatch.setenv(PROBE_OVERRIDES, drift_overrides("tests.drift.serving_no_moe_standin"))
    with pytest.raises(HarnessLimit) as exc:
        _gpt_oss(tmp_path)
    assert str(exc.value) == UNREAD


def test_the_moe_stand_in_follows_an_edit_of_the_releases_own_swiglu(tmp_path):
    """The stand-in applies the release's own activation function (from under its torch.compile):
    an edit of it in a shadow of 0.5.10's environment changes what is captured, and the states
    are then no state of the model (unidentified, exit 1), where the unedited release's are
    identified (the test above)."""
    file = f"{SITE}/sglang/srt/layers/moe/fused_moe_triton/fused_moe.py"
    old = "    return gate * torch.sigmoid(gate * gemm1_alpha) * (up + 1)\n"
    shadow, original, env = shadow_release(tmp_path, "sglang", "0.5.10", {file: (old, old.replace("(up + 1)", "(up + 2)"))})
    env[NO_FORKSERVER] = "1"  # one run in a copy made for this test: fresh, not a server of its own
    draft = sglang_draft(tmp_path / "draft", ids=[1, 11, 20])
    proc = run_parity("contract", "serving", "--sglang", "0.5.10", "--target-config", str(GPT_OSS), "--draft",
                      str(draft), "--json", env=env)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    kinds = [f["kind"] for f in json.loads(proc.stdout)["findings"] if f["severity"] == "error"]
    assert "unidentified_state" in kinds, kinds
    assert "(up + 2)" not in (original / file).read_text()  # the original is untouched


def test_the_moe_and_rope_stand_ins_compute_the_reference_and_refuse_what_they_do_not():
    """moe_standin.experts_forward, with 0.5.10's own MoeRunnerConfig and SwiGLU, on random
    experts (values past the clamp limit), against transformers' GptOssExperts: equal; and each
    injected drift of it (no expert biases, no clamp, SiLU on the halves) is caught. The rotary
    stand-in, on a forward_native without the argument: the release's own method's call with it
    None, and StandInUsed for a fused KV write."""
    proc = subprocess.run([str(find_env("sglang", "0.5.10").python), "-c", NUMERIC], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["clamped"] > 0  # the limit is reached, so a stand-in without the clamp would differ
    assert result["stand_in"] < 1e-4 and result["by_keywords"] < 1e-4, result  # by_keywords: 0.5.0rc0's signature
    assert all(error > 1e-2 for error in result["drifts"].values()), result
    assert result["refused"] == ["expert parallelism (moe_ep_size 2)", "no_combine (one output per routed expert)"]
    # the rotary stand-in, on 0.5.10's RotaryEmbedding with 0.5.0rc1-0.5.3rc0's forward_native signature
    assert "RotaryEmbedding.forward_native" in result["rope"]["installed"], result
    assert result["rope"]["same"] and result["rope"]["refused"], result


NUMERIC = """
import json, types
import torch
from transformers import GptOssConfig
from transformers.models.gpt_oss.modeling_gpt_oss import GptOssExperts
from parity.extract import standins
from parity.extract.engines.sglang.concerns.process import KERNEL_STANDINS
standins.install(*KERNEL_STANDINS)
from sglang.srt.layers.moe.moe_runner import MoeRunnerConfig
from parity.extract.engines.sglang import moe_standin

torch.manual_seed(0)
hf = GptOssExperts(GptOssConfig(hidden_size=16, intermediate_size=8, num_local_experts=4))
for p in hf.parameters():
    torch.nn.init.normal_(p, std=0.5)
x = torch.randn(6, 16) * 3
ids = torch.tensor([[0, 1], [1, 2], [3, 0], [2, 3], [0, 2], [1, 3]])
w = torch.rand(6, 2).softmax(-1)
with torch.no_grad():
    ref = hf(x, ids, w)
    clamped = int(((x @ hf.gate_up_proj[0] + hf.gate_up_proj_bias[0]).abs() > hf.limit).sum())

def run(config=None, biases=True, **layer):
    config = config or MoeRunnerConfig(activation="silu", gemm1_alpha=hf.alpha, gemm1_clamp_limit=hf.limit)
    weights = dict(w13_weight=hf.gate_up_proj.detach().transpose(1, 2), w2_weight=hf.down_proj.detach().transpose(1, 2),
                   w13_weight_bias=hf.gate_up_proj_bias.detach() if biases else None,
                   w2_weight_bias=hf.down_proj_bias.detach() if biases else None, moe_ep_size=1)
    method = types.SimpleNamespace(moe_runner_config=config, use_triton_kernels=False)
    out = moe_standin.experts_forward(method, types.SimpleNamespace(**{**weights, **layer}), x, (w, ids, None), config)
    return float((out - ref).abs().max() / ref.abs().max())

keywords = moe_standin._in_front_of_keywords(lambda *args, **kwargs: None)  # 0.5.0rc0's keyword signature
layer = types.SimpleNamespace(w13_weight=hf.gate_up_proj.detach().transpose(1, 2), moe_ep_size=1,
                              w2_weight=hf.down_proj.detach().transpose(1, 2),
                              w13_weight_bias=hf.gate_up_proj_bias.detach(), w2_weight_bias=hf.down_proj_bias.detach())
out = keywords(types.SimpleNamespace(use_triton_kernels=False), layer, x, (w, ids, None), activation="silu",
               activation_alpha=hf.alpha, swiglu_limit=hf.limit)
by_keywords = float((out - ref).abs().max() / ref.abs().max())
drifts = {"no biases": run(biases=False),
          "no clamp": run(MoeRunnerConfig(activation="silu", gemm1_alpha=hf.alpha, gemm1_clamp_limit=1e9)),
          "silu on the halves": run(MoeRunnerConfig(activation="silu"))}
refused = []
for config, layer in ((None, {"moe_ep_size": 2}), (MoeRunnerConfig(activation="silu", gemm1_alpha=hf.alpha,
                                                                   gemm1_clamp_limit=hf.limit, no_combine=True), {})):
    try:
        run(config, **layer)
    except standins.StandInUsed as exc:
        refused.append(str(exc).split("fused MoE: ")[1].split(", but")[0])

from sglang.srt.layers.rotary_embedding import RotaryEmbedding
from parity.extract.engines.sglang import rope_standin
assert "RotaryEmbedding.forward_native" not in rope_standin.install()  # 0.5.10's takes the argument already
def forward_native(self, positions, query, key, offsets=None):  # 0.5.0rc1-0.5.3rc0's signature
    return positions, query, key, offsets
RotaryEmbedding.forward_native = forward_native
installed = rope_standin.install()
rope, args = RotaryEmbedding.__new__(RotaryEmbedding), (torch.arange(3), torch.randn(3, 16), torch.randn(3, 8))
same = RotaryEmbedding.forward_native(rope, *args, fused_set_kv_buffer_arg=None) == (*args, None)
try:
    RotaryEmbedding.forward_native(rope, *args, fused_set_kv_buffer_arg=object())
    rope_refused = False
except standins.StandInUsed:
    rope_refused = True
print(json.dumps({"stand_in": run(), "by_keywords": by_keywords, "clamped": clamped, "drifts": drifts, "refused": refused,
                  "rope": {"installed": installed, "same": same, "refused": rope_refused}}))
"""


def test_without_the_stand_in_and_the_unread_parameter_check_it_reads_as_parity_unable_to_name_them(
        tmp_path, monkeypatch):
    monkeypatch.setenv(PROBE_OVERRIDES, drift_overrides("tests.drift.serving_unread_parameters_unchecked"))
    c = _gpt_oss(tmp_path)
    assert [f.kind for f in c.findings if f.severity == "error"] == ["unidentified_state"] * 3


def test_the_rope_stand_in_takes_the_argument_only_the_cuda_method_takes(tmp_path, monkeypatch):
    monkeypatch.setenv(PROBE_OVERRIDES, drift_overrides("tests.drift.serving_rope_cpu_method_without_fused_kv_arg"))
    c = _gpt_oss(tmp_path)
    assert [t.name for t in c.fc_input] == ["h2", "h12", "h21"]
    assert not [f for f in c.findings if f.severity == "error"], c.findings


def test_without_the_rope_stand_in_an_argument_only_the_cuda_method_takes_is_the_engines_non_cuda_path(
        tmp_path, monkeypatch):
    monkeypatch.setenv(PROBE_OVERRIDES, drift_overrides("tests.drift.serving_rope_without_standin"))
    with pytest.raises(HarnessLimit) as exc:
        _gpt_oss(tmp_path)
    msg = str(exc.value)
    assert msg.startswith(
        "parity's CPU harness cannot run sglang 0.5.10 here: its own non-CUDA code path, which parity runs, cannot run "
        "architecture GptOssForCausalLM (model_type 'gpt_oss'): its model code passes 'fused_set_kv_buffer_arg' to "
        "RotaryEmbedding, whose non-CUDA method forward_native() does not take it (its forward_cuda() does); a GPU "
        "runs its CUDA method: a plain prefill"), msg
    assert msg.endswith("not sglang refusing the draft: no verdict is given"), msg
