"""vLLM 0.10-0.15 on parity's CPU run (issue 37 item 4): what stopped gpt-oss and the DeepSeek-V3 dump.

- 0.10-0.11.x: the x86 CPU branch of the unquantized fused MoE builds Intel's experts; parity's
  stand-in (parity.extract.engines.vllm.moe_cpu) computes the GPU's route and experts in torch.
  Checked here against transformers' own gpt-oss MoE block (router, interleaved clamped SwiGLU,
  biases) on the same weights, in vLLM 0.11.0's environment; and an edit of the installed
  `SwigluOAIAndMul.forward_native` (which the stand-in calls) to split gate and up in halves,
  as 0.11.1's own CPU experts do, is seen (the check fails there).
- 0.12-0.15: the CPU platform is chosen before the newest families' code-path checks import vLLM
  (parity.extract.engines.vllm.platform_first); without it, placing such a release left
  vLLM's platform unresolved (UnspecifiedPlatform) while fused_moe was imported.
- 0.10-0.11: the DeepSeek-V3 dump is the release's own answer (its class has no aux capture).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from parity.envs import EnvError, find_env

from .helpers import ROOT, shadow_release

pytestmark = [pytest.mark.slow, pytest.mark.exhaustive]  # one release's cells: ./dev test --all (docs/development.md)

MOE_AGAINST_TRANSFORMERS = r"""
import json, torch
from parity.extract.engines.vllm import platform_first
platform_first.cpu_platform_unless_chosen()
from transformers import GptOssConfig
from transformers.models.gpt_oss.modeling_gpt_oss import GptOssMLP
from vllm.model_executor.layers.fused_moe import cpu_fused_moe
from parity.extract.engines.vllm import moe_cpu

torch.manual_seed(0)
cfg = GptOssConfig(hidden_size=32, intermediate_size=16, num_local_experts=6, num_experts_per_tok=2)
mlp = GptOssMLP(cfg).float()
for p in mlp.parameters():
    torch.nn.init.normal_(p, std=0.5)
x = torch.randn(9, 32)
with torch.no_grad():
    want, _ = mlp(x[None])
    want = want[0]
    layer = torch.nn.Module()  # the tensors vLLM's FusedMoE holds after loading gpt-oss (w13 [E, 2I, H])
    layer.w13_weight = mlp.experts.gate_up_proj.transpose(1, 2).contiguous()
    layer.w13_bias = mlp.experts.gate_up_proj_bias
    layer.w2_weight = mlp.experts.down_proj.transpose(1, 2).contiguous()
    layer.w2_bias = mlp.experts.down_proj_bias
    line = moe_cpu.install()
    experts = cpu_fused_moe.IPEXFusedMOE(layer)
    logits = torch.nn.functional.linear(x, mlp.router.weight, mlp.router.bias)
    got = experts(layer, x, False, 2, logits, True, activation="swigluoai")
    try:
        experts(layer, x, False, 2, logits, True, expert_map=torch.arange(6), activation="swigluoai")
        refused = None
    except Exception as exc:
        refused = type(exc).__name__
print(json.dumps({"err": (got - want).abs().max().item(), "scale": want.abs().max().item(), "line": line,
                  "refused": refused}))
"""

SWIGLU = "vllm/model_executor/layers/activation.py"
INTERLEAVED = "gate, up = x[..., ::2], x[..., 1::2]"


def _run(python, script: str, env: dict | None = None) -> dict:
    env = dict(os.environ if env is None else env)
    env.update(PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([str(python), "-c", script], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _env(version: str):
    try:
        return find_env("vllm", version)
    except EnvError as exc:
        pytest.skip(str(exc))


def test_the_ipex_stand_in_computes_transformers_gpt_oss_moe_and_refuses_expert_parallelism():
    got = _run(_env("0.11.0").python, MOE_AGAINST_TRANSFORMERS)
    assert got["scale"] > 1.0  # a block that moves the states, not one near zero
    assert got["err"] < 1e-4 * got["scale"], got
    assert "IPEXFusedMOE (Intel's extension) -> the GPU's route" in got["line"][0]
    assert got["refused"] == "KernelStandInError"


def test_an_edit_of_the_installed_swiglu_to_halves_is_seen(tmp_path):
    _env("0.11.0")
    shadow, _, env = shadow_release(tmp_path, "vllm", "0.11.0", {
        f"lib/python3.11/site-packages/{SWIGLU}": (INTERLEAVED, "gate, up = x.chunk(2, dim=-1)")})
    got = _run(shadow / "bin" / "python", MOE_AGAINST_TRANSFORMERS, env)
    assert got["err"] > 1e-2 * got["scale"], got


PLACEMENT = r"""
import json
from parity.extract.engines.vllm import families
from parity.extract.engines.vllm.families import v0_34
try:
    families._fits(v0_34)  # what placing a release outside every range tries first
    fits = True
except LookupError:
    fits = False
import vllm.platforms as platforms
print(json.dumps({"fits": fits, "platform": type(platforms._current_platform).__name__}))
"""


def test_trying_the_newest_family_first_leaves_vllm_on_the_cpu_platform():
    """vLLM 0.16.0's wheel ignores VLLM_TARGET_DEVICE (as 0.12-0.27's do): the 0.34 family's check,
    which fails there, used to leave the platform unresolved (UnspecifiedPlatform) with vLLM's
    modules imported, so a release placed by code paths (0.12-0.15) ran gpt-oss's MoE on the CUDA
    path."""
    got = _run(_env("0.16.0").python, PLACEMENT)
    assert got == {"fits": False, "platform": "CpuPlatform"}


def test_the_deepseek_dump_on_0_11_is_the_release_s_own_answer():
    from parity.errors import CannotExtract
    from parity.extract.engines.vllm import extract_dump
    from parity.inputs import Target
    from parity.sweep.outcome import Outcome, of_error

    _env("0.11.0")
    with pytest.raises(CannotExtract) as raised:
        extract_dump(Target.read(ROOT / "fixtures" / "targets" / "deepseek-v3-61l" / "config.json"), None, "0.11.0")
    assert raised.value.engine_lacks
    assert "DeepseekV3ForCausalLM has no aux hidden-state capture" in str(raised.value)
    assert of_error(raised.value) == Outcome.engine_refuses
