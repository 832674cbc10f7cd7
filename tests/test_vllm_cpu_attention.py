"""vLLM 0.18-0.27's MLA on parity's CPU run (issue 37): DeepSeek-V3 stopped with "MLA is not
supported on CPU" (their `CpuPlatform.get_attn_backend_cls`), before parity's MLA stand-in ran.

parity.extract.engines.vllm.cpu_attention answers the platform's choice with the GPU's TRITON_MLA
(built only; its kernels raise) and, from 0.22, the layer's prefill backend with one built by the
release's `MLAPrefillBackend` whose kernels raise. What the MLA layers then compute (vLLM's own
projections, norms, rotary and decompression weights, parity's `MLAAttention.forward`) is checked
the way every extraction checks it: each captured state named against transformers' DeepSeek-V3.
- the dump (0.27.0) and serving (0.18.0, the 0.17 family; 0.22.0) name h2, h30, h58 (h61) closely
  (their environments built on demand, `parity sweep --derive`; skipped where not built);
- on 0.22 the GPU's TRITON_MLA impl's constructor asks the platform for an SM count
  (`num_compute_units`, which that CPU platform lacks): answered there with UncountedUnits; the
  dump names h2, h30, h58 (the release's own loop never reaches id 61), and without that answer
  the run is parity's CPU limit again (exit 2);
- without the answer the same run is parity's CPU limit again (the check depends on the fix);
- an edit of the installed MLA wrapper (rotary left off the latent's rope part) is seen: the
  states are no longer any state of the reference;
- the backend's and the prefill stand-in's kernels raise if called; a non-MLA layer gets the
  release's own answer.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from parity.envs import EnvError, find_env

from .helpers import ROOT, shadow_release

pytestmark = [pytest.mark.slow, pytest.mark.exhaustive]  # one release's cells: ./dev test --all (docs/development.md)

DEEPSEEK = ROOT / "fixtures" / "targets" / "deepseek-v3-61l" / "config.json"
LLAMA_DRAFT = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 4096,
               "intermediate_size": 16384, "num_attention_heads": 32, "num_key_value_heads": 8,
               "num_hidden_layers": 1, "vocab_size": 128256, "draft_vocab_size": 32000, "rms_norm_eps": 1e-5,
               "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58]}}

# The probe as parity runs it, after the statement given (a stand-in removed, or `pass`).
PROBE = r"""
import sys
from parity.extract.engines.vllm import cpu_attention, kernels, probe
exec(sys.argv[1])
probe.main()
"""
WITHOUT_MLA_ANSWER = "cpu_attention.install = lambda: []"

STAND_INS = r"""
import json, types
from parity.extract.engines.vllm.families import place
from importlib import metadata
adapter = place(metadata.version("vllm")).module.Adapter()
adapter.platform()
lines = adapter.replace_kernels()
from vllm.platforms.cpu import CpuPlatform
from vllm.v1.attention.backends.registry import AttentionBackendEnum
from vllm.model_executor.layers.attention import mla_attention
from parity.extract.engines.vllm import cpu_attention
ask = lambda mla: CpuPlatform.get_attn_backend_cls(None, types.SimpleNamespace(use_mla=mla, use_sparse=False))
mla, dense = ask(True), ask(False)
raised = []
impl = AttentionBackendEnum.TRITON_MLA.get_class().get_impl_cls()
for name in cpu_attention.KERNEL_BODIES:
    if hasattr(impl, name):
        try:
            getattr(impl, name)(object(), None)
        except Exception as exc:
            raised.append(type(exc).__name__)
if hasattr(mla_attention, "get_mla_prefill_backend"):  # 0.22 on
    prefill = mla_attention.get_mla_prefill_backend(None)
    backend = prefill(num_heads=2, scale=0.5, kv_lora_rank=4, qk_nope_head_dim=2, qk_rope_head_dim=2,
                      v_head_dim=2, vllm_config=None)
    for name in cpu_attention.PREFILL_KERNELS:
        try:
            getattr(backend.clone() if hasattr(backend, "clone") else backend, name)(None, None, None, None)
        except Exception as exc:
            raised.append(type(exc).__name__)
if "flash_attn_varlen_func" in vars(mla_attention):  # 0.16-0.21
    try:
        mla_attention.flash_attn_varlen_func(None)
    except Exception as exc:
        raised.append(type(exc).__name__)
count = cpu_attention.UncountedUnits("test")
for use in (lambda: count * 2, lambda: min(4, count), lambda: int(count), lambda: range(count), lambda: f"{count}"):
    try:
        use()
    except Exception as exc:
        raised.append(type(exc).__name__)
print(json.dumps({"mla": mla, "dense": dense, "raised": raised, "lines": lines,
                  "cpu_attn": AttentionBackendEnum.CPU_ATTN.get_path()}))
"""

MLA_WRAPPER = "vllm/model_executor/layers/mla.py"
ROTARY = "q[..., self.qk_nope_head_dim :], k_pe = self.rotary_emb("


def _env(version: str):
    try:
        return find_env("vllm", version)
    except EnvError as exc:
        pytest.skip(str(exc))


def _run(python, script: str, request: dict | None = None, *args: str, env: dict | None = None) -> dict:
    env = dict(os.environ if env is None else env)
    env.update(PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    payload = json.dumps({"seq_len": 8, "seed": 0, **request}) if request is not None else ""
    proc = subprocess.run([str(python), "-c", script, *args], input=payload, capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _dump(python, removed: str = "pass", env: dict | None = None) -> dict:
    target = json.loads(DEEPSEEK.read_text())
    return _run(python, PROBE, {"mode": "dump", "target_config": target, "launch_ids": [2, 30, 58, 61]},
                removed, env=env)


def _named(reply: dict, runner: str) -> list[str]:
    return [s["best"] for s in reply["runners"][runner]["slots"] if s["rel_err"] < 1e-3]


def every_slot_named(python) -> dict:
    """The DeepSeek-V3 dump (launch ids 2, 30, 58, 61) on `python`'s release, each slot named by
    both runners."""
    got = _dump(python)
    assert "error" not in got, got.get("error")
    for runner in ("v1", "v2"):
        assert _named(got, runner) == ["h2", "h30", "h58", "h61"], got["runners"][runner]
    return got


def test_the_deepseek_dump_on_0_27_runs_mla_and_names_every_slot():
    python = _env("0.27.0").python
    got = every_slot_named(python)
    assert any("TRITON_MLA" in line for line in got["kernel_standins"])
    assert any("get_mla_prefill_backend" in line for line in got["kernel_standins"])
    without = _dump(python, WITHOUT_MLA_ANSWER)  # the fix removed: parity's CPU limit again
    assert "MLA is not supported on CPU" in without["error"] and without.get("harness_limit"), without


def test_the_deepseek_dump_on_0_22_answers_the_sm_count_and_without_it_is_parity_s_limit():
    python = _env("0.22.0").python
    got = _dump(python)
    assert "error" not in got, got.get("error")
    assert any("num_compute_units" in line and "UncountedUnits" in line for line in got["kernel_standins"])
    for runner in ("v1", "v2"):  # 0.22's capture runs before each of its 61 layers: id 61 is never reached
        assert _named(got, runner) == ["h2", "h30", "h58"], got["runners"][runner]
    without = _dump(python, "cpu_attention._compute_units_uncounted = lambda impl: None")
    assert "num_compute_units" in without["error"] and without.get("harness_limit"), without


def test_an_edit_of_the_installed_mla_rotary_is_seen(tmp_path):
    _env("0.27.0")
    shadow, _, env = shadow_release(tmp_path, "vllm", "0.27.0", {
        f"lib/python3.11/site-packages/{MLA_WRAPPER}": (ROTARY, "_unused_q, _unused_k = self.rotary_emb(")})
    got = _dump(shadow / "bin" / "python", env=env)
    assert "error" in got or _named(got, "v1") != ["h2", "h30", "h58", "h61"], got


@pytest.mark.parametrize("version", ["0.18.0", "0.22.0"])
def test_deepseek_serving_names_the_draft_s_ids(tmp_path, version):
    python = _env(version).python
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(LLAMA_DRAFT))
    got = _run(python, PROBE, {"mode": "serving", "target_config": json.loads(DEEPSEEK.read_text()),
                               "draft_dir": str(draft), "candidates": []}, "pass")
    assert "error" not in got, got.get("error")
    assert _named(got, got["gpu_default_runner"]) == ["h2", "h30", "h58"], got["runners"]


@pytest.mark.parametrize("version", ["0.17.0", "0.22.0", "0.27.0"])
def test_the_stand_ins_raise_if_relied_on_and_other_layers_keep_the_release_s_answer(version):
    got = _run(_env(version).python, STAND_INS)
    assert got["mla"].endswith("TritonMLABackend") and got["dense"] == got["cpu_attn"], got
    assert got["raised"] and set(got["raised"]) == {"KernelStandInError"}, got
    # the SM count answered only where the release's CPU platform lacks it (0.22)
    assert any("num_compute_units" in line for line in got["lines"]) == (version == "0.22.0"), got["lines"]
