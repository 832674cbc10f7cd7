"""gpt-oss on vLLM 0.11.0 (issue 37): its CPU platform answers every dense attention layer with
`TorchSDPABackend`, whose impl takes no `sinks` (TypeError: TorchSDPABackendImpl.__init__() got an
unexpected keyword argument 'sinks'), once read as the engine refusing gpt-oss; a GPU install
gives a layer with sinks a backend that takes them (TRITON_ATTN below compute capability 9.0).

parity.extract.engines.vllm.cpu_attention.install_sinks answers that choice with the GPU's
TRITON_ATTN, built only (its kernels raise), its head-size check (its Triton kernel's: 32 on; real
gpt-oss has 64) also taking the tiny target's 16; parity's `Attention.forward` honours the layer's
sinks. One serving run of the sweep's gpt-oss case, each captured state named against
transformers' gpt-oss:
- 0.11.0 names h2, h12, h21 (the model's defaults: 0.11 reads no ids from the draft), the
  answer's lines listed, a layer with sinks gets TRITON_ATTN and every other layer TorchSDPA, the
  built backend's kernel raises if called, and the head-size check still refuses another size;
- with the sinks ignored by parity's attention body, no captured state is any state of the
  reference (the check fails on that drift);
- without the answer, the TypeError is parity's CPU limit (exit 2), never the engine's refusal;
- parity's attention body with sinks (and a sliding window) equals the softmax written out with
  one more logit per head and no value (no child run).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from parity.envs import EnvError, find_env
from parity.sweep.cases import SERVING_CASES

from .helpers import GPT_OSS, ROOT

pytestmark = [pytest.mark.slow, pytest.mark.exhaustive]  # one release's cells: ./dev test --all (docs/development.md)

# The probe as parity runs it, after the statement given (a drift injected, or `pass`).
PROBE = r"""
import sys
from parity.extract.engines.vllm import cpu_attention, kernels, probe
exec(sys.argv[1])
probe.main()
"""

# Around the answer as the family installs it: what the platform then answers, and whether the
# built backend's kernel and head-size check stay the release's where they must (written to a file).
CHECKED = r"""
import json as _json
_install = cpu_attention.install_sinks

def _checked(head_sizes=()):
    lines = _install(head_sizes)
    from vllm.platforms.cpu import CpuPlatform
    from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend
    ask = lambda sink: CpuPlatform.get_attn_backend_cls(None, 64, None, None, 16, True, False, sink, False)
    seen = {"sink": ask(True), "dense": ask(False), "raised": [], "head_sizes": {}}
    try:
        TritonAttentionBackend.get_impl_cls().forward(object(), None, None, None, None, None, None)
    except Exception as exc:
        seen["raised"].append(type(exc).__name__)
    for size in (8, 16, 64):
        try:
            TritonAttentionBackend.validate_head_size(size)
            seen["head_sizes"][size] = "taken"
        except ValueError:
            seen["head_sizes"][size] = "refused"
    open(%r, "w").write(_json.dumps(seen))
    return lines

cpu_attention.install_sinks = _checked
"""
SINKS_IGNORED = """
_own = kernels._windowed_with_sinks
kernels._windowed_with_sinks = lambda q, k, v, scale, window, sinks: _own(q, k, v, scale, window, None)
"""
WITHOUT_ANSWER = "cpu_attention.install_sinks = lambda head_sizes=(): []"


def _python():
    try:
        return find_env("vllm", "0.11.0").python
    except EnvError as exc:
        pytest.skip(str(exc))


def _serve(python, statement: str, draft) -> dict:
    request = {"seq_len": 8, "seed": 0, "mode": "serving", "target_config": json.loads(GPT_OSS.read_text()),
               "draft_dir": str(draft), "candidates": []}
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([str(python), "-c", PROBE, statement], input=json.dumps(request), capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _named(reply: dict) -> list[str]:
    return [s["best"] for s in reply["runners"]["v1"]["slots"] if s["rel_err"] < 1e-3]


@pytest.fixture(scope="module")
def draft(tmp_path_factory):
    case = next(c for c in SERVING_CASES if c.target == "gpt-oss-20b")
    return case.write_draft(tmp_path_factory.mktemp("gpt-oss") / "draft")


def test_gpt_oss_on_0_11_0_is_served_by_the_gpu_s_sink_backend_and_every_slot_is_named(draft, tmp_path):
    python = _python()
    seen = tmp_path / "seen.json"
    got = _serve(python, CHECKED % str(seen), draft)
    assert "error" not in got, got.get("error")
    assert _named(got) == ["h2", "h12", "h21"], got["runners"]
    assert any("TRITON_ATTN for a layer with sinks" in line for line in got["kernel_standins"]), got["kernel_standins"]
    assert any("validate_head_size" in line and "16" in line for line in got["kernel_standins"])
    checked = json.loads(seen.read_text())
    assert checked["sink"].endswith("TritonAttentionBackend") and checked["dense"].endswith("TorchSDPABackend"), checked
    assert checked["raised"] == ["KernelStandInError"], checked
    assert checked["head_sizes"] == {"8": "refused", "16": "taken", "64": "taken"}, checked


def test_sinks_ignored_by_the_attention_body_are_seen(draft):
    got = _serve(_python(), SINKS_IGNORED, draft)
    assert "error" not in got and _named(got) == [], got  # it ran, and no captured state is any state of the model


def test_without_the_answer_the_cpu_backend_s_refusal_is_parity_s_limit(draft):
    got = _serve(_python(), WITHOUT_ANSWER, draft)
    assert "unexpected keyword argument 'sinks'" in got["error"], got.get("error")
    assert "TorchSDPABackendImpl" in got["harness_limit"] and "TritonAttentionImpl" in got["harness_limit"], got


def test_the_attention_body_honours_sinks_as_a_plain_reference_does():
    """parity's attention body with sinks (what the built-only TRITON_ATTN's kernel would compute),
    against the softmax written out per head and query: one more logit per head, no value."""
    import torch

    from parity.extract.engines.vllm.kernels import _windowed_with_sinks

    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(6, 4, 8, generator=gen) for _ in range(3))
    k, v = k[:, :2], v[:, :2]  # grouped-query: 2 kv heads for 4 query heads
    sinks = torch.randn(4, generator=gen)
    for window in (None, 3):
        expected = torch.zeros(6, 4, 8, dtype=torch.float64)
        for h in range(4):
            for t in range(6):
                seen = [j for j in range(t + 1) if window is None or t - j < window]
                logits = torch.stack([q[t, h].double() @ k[j, h // 2].double() * 0.3 for j in seen]
                                     + [sinks[h].double()])
                weights = torch.softmax(logits, dim=0)[:-1]
                expected[t, h] = sum(w * v[j, h // 2].double() for w, j in zip(weights, seen))
        expected = expected.reshape(6, -1).float()
        torch.testing.assert_close(_windowed_with_sinks(q, k, v, 0.3, window, sinks), expected)
        assert not torch.allclose(_windowed_with_sinks(q, k, v, 0.3, window, None), expected, atol=1e-3)
