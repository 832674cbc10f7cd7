"""A limit of parity's CPU harness is never a verdict: a CUDA-only code path (or one of
parity's stand-ins relied on) ends in exit 2 naming the limit, per engine, never UNSERVABLE
or DRIFT (parity.extract.child.harness_limit; errors.HarnessLimit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .helpers import LLAMA, ROOT, drift_overrides

KIMI = ROOT / "fixtures" / "targets" / "kimi-k2.5" / "config.json"
LLAMA_DRAFT = ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3"


def parity(*args: str, overrides: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if overrides:
        env["PARITY_PROBE_OVERRIDES"] = overrides
    return subprocess.run([sys.executable, "-m", "parity", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=900)


def one_limit_line(proc: subprocess.CompletedProcess, engine: str) -> str:
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"parity: parity's CPU harness cannot run {engine} "), line
    assert "a CUDA-only code path" in line and "no verdict is given" in line
    return line


@pytest.mark.slow
def test_sglang_a_cuda_only_draft_build_is_exit_2_not_unservable():
    proc = parity("check", "--target-config", str(LLAMA), "--draft", str(LLAMA_DRAFT), "--dump-layout",
                  "h2,h16,h29,h32", overrides=drift_overrides("tests.drift.serving_cuda_only_draft"))
    line = one_limit_line(proc, "sglang")
    assert "Torch not compiled with CUDA enabled" in line


@pytest.mark.slow
def test_vllm_a_cuda_only_forward_is_exit_2_not_an_engine_error():
    proc = parity("contract", "serving", "--engine", "vllm", "--target-config", str(LLAMA), "--draft",
                  str(LLAMA_DRAFT), overrides=drift_overrides("tests.drift.vllm_cuda_only_forward"))
    one_limit_line(proc, "vllm")


@pytest.mark.slow
def test_the_kimi_mla_draft_reads_as_parity_s_limit_not_the_engine_s_refusal(tmp_path):
    """The issue's own case: the Kimi-K2.5 fixed draft as SGLang's MLA draft class
    (Eagle3DeepseekV2ForCausalLM, the target's MLA widths). SGLang builds it on a GPU; on CPU its
    set_embed calls into torch.cuda. It used to read UNSERVABLE."""
    target = json.loads(KIMI.read_text())
    text = target.get("text_config", target)
    config = json.loads((ROOT / "fixtures/drafts/kimi-k2.5-eagle3-fixed/config.json").read_text())
    config["architectures"] = ["Eagle3DeepseekV2ForCausalLM"]
    config.update({k: text[k] for k in ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                        "v_head_dim", "rope_scaling") if k in text})
    draft = tmp_path / "mla-draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(config))
    proc = parity("check", "--target-config", str(KIMI), "--draft", str(draft), "--dump-layout", "h0,h3,h31,h59")
    line = one_limit_line(proc, "sglang")
    assert "kimi_k25_eagle3.py" in line and "UNSERVABLE" not in proc.stdout


def test_only_cuda_paths_and_stand_ins_are_limits():
    """The classification is by where the error came from (inside torch.cuda) or what raised it
    (parity's stand-ins), not by guessing: an engine's own ValueError is not a limit."""
    import torch

    from parity.extract.child import harness_limit
    from parity.extract.standins import StandInUsed

    if torch.cuda.is_available():
        pytest.skip("torch.cuda works here: no CUDA-only failure to classify")
    with pytest.raises(Exception) as raised:
        torch.cuda.current_device()
    assert "CUDA-only code path" in harness_limit(raised.value)
    with pytest.raises(ValueError) as wrapped:
        try:
            torch.cuda.current_device()
        except Exception as inner:  # noqa: BLE001
            raise ValueError("the draft could not be built") from inner
    assert "CUDA-only code path" in harness_limit(wrapped.value)  # the cause counts
    assert "stand-ins" in harness_limit(StandInUsed("torchvision.io.decode_image was used"))
    assert harness_limit(ValueError("captured 2 of 3 aux hidden states")) is None
    assert harness_limit(TypeError("unsupported operand type(s) for +: 'Tensor' and 'NoneType'")) is None
