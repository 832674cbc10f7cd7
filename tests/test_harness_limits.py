"""A limit of parity's CPU harness is never a verdict: a CUDA-only code path (or one of
parity's stand-ins relied on) ends in exit 2 naming the limit, per engine, never UNSERVABLE
or DRIFT (parity.extract.child.harness_limit; errors.HarnessLimit)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .helpers import run_parity as parity, LLAMA, ROOT, drift_overrides

KIMI = ROOT / "fixtures" / "targets" / "kimi-k2.5" / "config.json"
LLAMA_DRAFT = ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3"


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
    proc = parity("contract", "serving", "--engine", "vllm", "--vllm", "0.34.0", "--target-config", str(LLAMA), "--draft",
                  str(LLAMA_DRAFT), overrides=drift_overrides("tests.drift.vllm_cuda_only_forward"))
    one_limit_line(proc, "vllm")


@pytest.mark.slow
def test_the_kimi_mla_draft_s_cuda_only_binding_reads_as_parity_s_limit_not_the_engine_s_refusal():
    """The issue's own case: the Kimi-K2.5 fixed draft as SGLang's MLA draft class
    (Eagle3DeepseekV2ForCausalLM, the bundled kimi-k2.5-eagle3-mla). SGLang builds it on a GPU; on
    CPU its set_embed ends in torch.cuda.synchronize(). It used to read UNSERVABLE; parity now
    runs it under a stand-in (tests/test_mla_draft.py: a real verdict). Without that stand-in
    (an injected fault) the real CUDA-only failure is still exit 2, never a verdict."""
    mla = ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3-mla"
    proc = parity("check", "--target-config", str(KIMI), "--draft", str(mla), "--dump-layout", "h0,h3,h31,h59",
                  overrides=drift_overrides("tests.drift.serving_mla_draft_without_cuda_standin"))
    line = one_limit_line(proc, "sglang")
    assert "kimi_k25_eagle3.py" in line and "set_embed" in line and "UNSERVABLE" not in proc.stdout
    assert "Torch not compiled with CUDA enabled" in line


def harness_limit_of(exc: BaseException) -> str:
    from parity.extract.child import harness_limit

    return harness_limit(exc) or ""


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


def test_the_synchronize_stand_in_stands_for_waiting_on_no_device_only():
    """standins.cuda_synchronize_on_cpu (around the MLA draft's set_embed): without CUDA, a bare
    `torch.cuda.synchronize()` returns, as the real one does with nothing queued; a device named
    raises StandInUsed (a limit of the harness, exit 2); outside the block the real one is back.
    On a machine with CUDA nothing is replaced."""
    import torch

    from parity.extract.standins import StandInUsed, cuda_synchronize_on_cpu

    real = torch.cuda.synchronize
    if torch.cuda.is_available():
        with cuda_synchronize_on_cpu():
            assert torch.cuda.synchronize is real
        return
    with pytest.raises(AssertionError, match="not compiled with CUDA"):
        real()  # the reference: what the CPU build does without the stand-in
    with cuda_synchronize_on_cpu():
        assert torch.cuda.synchronize() is None
        with pytest.raises(StandInUsed) as named:
            torch.cuda.synchronize("cuda:0")
        assert "stands for waiting on no device" in str(named.value)
        assert "stand-ins" in harness_limit_of(named.value)
    assert torch.cuda.synchronize is real


@pytest.mark.slow
def test_the_mla_draft_s_embedding_binding_is_the_class_s_own_under_the_stand_in():
    """The binding the stand-in lets run is the draft class's own, unchanged: SGLang's
    Eagle3DeepseekV2ForCausalLM.set_embed swaps in the target's embedding tensor itself (the
    reference: the very object, no copy), then synchronizes. As written, on the CPU build, it
    raises (the harness limit); under the family adapter's wrapping it binds. Run in a child:
    importing SGLang's model code sets process-wide state."""
    script = """
import torch
from parity.extract import standins
standins.install()
from sglang.srt.models.kimi_k25_eagle3 import Eagle3DeepseekV2ForCausalLM as Draft
from parity.extract.engines.sglang.concerns.draft import on_cpu_embedding_binding
draft = Draft.__new__(Draft)
torch.nn.Module.__init__(draft)
draft.config = type("Config", (), {"target_hidden_size": 2, "hidden_size": 2})()
draft.model = torch.nn.Module()
draft.model.embed_tokens = torch.nn.Embedding(4, 2)
target = torch.nn.Parameter(torch.ones(4, 2))
try:
    draft.set_embed(target)
    print("as written: bound")
except AssertionError as exc:
    print("as written:", exc)
on_cpu_embedding_binding(draft)
draft.set_embed(target)
print("wrapped:", draft.model.embed_tokens.weight is target)
"""
    import torch

    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    written = "as written: bound" if torch.cuda.is_available() else "as written: Torch not compiled with CUDA enabled"
    assert done.stdout.splitlines() == [written, "wrapped: True"], done.stdout + done.stderr[-2000:]
