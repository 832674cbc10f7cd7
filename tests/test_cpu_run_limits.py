"""What stops an engine on parity's CPU run but not on the GPU it serves on is a limit of parity's
CPU harness (HarnessLimit, exit 2, "parity cannot run"), decided from what the installed code
does, read off the exception and its frames, never its message: vLLM's CPU platform branch, its
import of Intel's extension, its compiled op libraries parity's CPU torch does not load, a
module its wheel requires that parity's environment leaves out (parity.extract.engines.vllm.
cpu_limits); SGLang 0.4.5.post3-0.4.6.post4's start-up arithmetic on the GPU's memory, which its
device query answers only on a GPU (parity.extract.engines.sglang.cpu_path.gpu_memory_unknown).

The vLLM rules run in the installed vLLM 0.16.0's environment (its torch, its files, its
metadata; vLLM itself is not imported): each statement is compiled under the file name of the
installed vLLM module that holds it, as parity's run_until runs an engine's statements, and the
same statement under another of its files is the engine's own."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from parity.envs import EnvError, find_env

from .helpers import ROOT

VLLM_RULES = r"""
import json
from parity.extract import child
from parity.extract.engines.vllm import probe  # registers vLLM's rules, as in every vLLM probe

[root] = child.package_roots("vllm")

def raised(source, where):
    try:
        exec(compile(source, str(root / where), "exec"), {})
    except Exception as exc:
        return exc
    raise AssertionError("nothing raised")

def limit(source, where):
    return child.harness_limit(raised(source, where))

mla = 'raise NotImplementedError("MLA is not supported on CPU.")'
unimplemented = 'raise NotImplementedError("num_compute_units is not implemented for the current platform.")'
print(json.dumps({
    "mla_on_cpu": limit(mla, "platforms/cpu.py"),
    "mla_on_cuda": limit(mla, "platforms/cuda.py"),
    "unimplemented_on_cpu": limit("class CpuPlatform: pass\ncls = CpuPlatform\n" + unimplemented, "platforms/interface.py"),
    "unimplemented_on_cuda": limit("class CudaPlatform: pass\ncls = CudaPlatform\n" + unimplemented,
                                   "platforms/interface.py"),
    "ipex": limit("import intel_extension_for_pytorch.llm.modules", "v1/attention/backends/cpu_attn.py"),
    "other_missing": limit("import no_such_module_parity_test", "v1/attention/backends/cpu_attn.py"),
    "moe_op": limit("import torch\ntorch.ops._moe_C.topk_softmax", "model_executor/layers/fused_moe/layer.py"),
    "unknown_namespace": limit("import torch\ntorch.ops.no_such_namespace_parity.op", "_custom_ops.py"),
    "required": limit("import lmformatenforcer", "v1/structured_output/backend_lm_format_enforcer.py"),
}))
"""


@pytest.fixture(scope="module")
def vllm_rules() -> dict:
    try:
        env = find_env("vllm", "0.16.0")
    except EnvError as exc:
        pytest.skip(str(exc))
    proc = subprocess.run([str(env.python), "-c", VLLM_RULES], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_vllm_s_cpu_platform_branch_is_a_limit_and_the_same_words_elsewhere_are_not(vllm_rules):
    """DeepSeek-V3 on vLLM 0.10.0-0.27.1: CpuPlatform.get_attn_backend_cls raises for MLA."""
    assert vllm_rules["mla_on_cpu"].startswith("vLLM's CPU platform, which parity runs it on, has no path for this: "
                                               "NotImplementedError: MLA is not supported on CPU.")
    assert "vllm/platforms/cpu.py:1" in vllm_rules["mla_on_cpu"]
    assert vllm_rules["mla_on_cuda"] is None  # the same sentence from its CUDA platform would be its own


def test_a_base_platform_method_the_cpu_platform_lacks_is_a_limit(vllm_rules):
    """vLLM 0.22's TritonMLAImpl (the GPU's MLA backend parity builds) asks the platform for
    its SM count: the base Platform raises for the CPU platform; asked of another, its own."""
    assert "NotImplementedError: num_compute_units" in vllm_rules["unimplemented_on_cpu"]
    assert "vllm/platforms/interface.py:3" in vllm_rules["unimplemented_on_cpu"]
    assert vllm_rules["unimplemented_on_cuda"] is None


def test_vllm_importing_intel_s_extension_is_a_limit_naming_it(vllm_rules):
    """The DeepSeek-V3 dump on vLLM 0.8.5-0.9.2: its CPU attention imports IPEX."""
    assert "imports intel_extension_for_pytorch (at vllm/v1/attention/backends/cpu_attn.py:1)" in vllm_rules["ipex"]
    assert vllm_rules["other_missing"] is None  # a module neither Intel's nor required stays the engine's


def test_an_op_of_vllm_s_unloaded_cuda_library_is_a_limit_naming_the_library(vllm_rules):
    """gpt-oss on vLLM 0.12.0-0.14.1: torch.ops._moe_C.topk_softmax."""
    assert vllm_rules["moe_op"].startswith("vLLM looks up torch.ops._moe_C.topk_softmax (looked up at "
                                           "vllm/model_executor/layers/fused_moe/layer.py:2)")
    assert "vllm/_moe_C.abi3.so" in vllm_rules["moe_op"]
    assert vllm_rules["unknown_namespace"] is None  # no library of vLLM registers it


def test_a_module_vllm_requires_that_parity_s_environment_leaves_out_is_a_limit_naming_it(vllm_rules):
    """`vllm serve`'s argument parsing on 0.11.1-0.14.1 imports lmformatenforcer."""
    assert vllm_rules["required"].startswith("its code imports 'lmformatenforcer', from lm-format-enforcer==")
    assert "which vllm 0.16.0 requires and parity's CPU environment does not install" in vllm_rules["required"]


def sglang_start_up(body: str):
    """`body` run as SGLang's own ServerArgs.__post_init__ (compiled under the installed
    server_args.py's name), with the device memory query answering as off a GPU (None)."""
    from parity.extract import child

    [root] = child.package_roots("sglang")
    source = "def __post_init__(self):\n" + "".join(f"    {line}\n" for line in body.splitlines())
    namespace = {"get_device_memory_capacity": lambda device=None: None}
    exec(compile(source, str(root / "srt" / "server_args.py"), "exec"), namespace)
    with pytest.raises(TypeError) as info:
        namespace["__post_init__"](type("Args", (), {"device": "cpu", "mem_fraction_static": None})())
    return info.value


def test_sglang_s_start_up_comparing_the_gpu_s_memory_is_a_limit():
    """SGLang 0.4.5.post3 server_args.py:225, `if gpu_mem <= 81920:` after
    `gpu_mem = get_device_memory_capacity(self.device)`, None for device cpu."""
    from parity.extract.engines.sglang.cpu_path import gpu_memory_unknown

    exc = sglang_start_up("gpu_mem = get_device_memory_capacity(self.device)\nif gpu_mem <= 81920:\n    pass")
    assert gpu_memory_unknown(exc).startswith("sglang's start-up computes with the GPU's memory (gpu_mem = "
                                              "get_device_memory_capacity(...), None off a GPU), at server_args.py:3 "
                                              "__post_init__: TypeError: '<=' not supported")
    # the same TypeError where the GPU's memory was answered, or with no memory query: the engine's own
    answered = sglang_start_up("gpu_mem = 80000\nif self.mem_fraction_static <= gpu_mem:\n    pass")
    assert gpu_memory_unknown(answered) is None
    asked = sglang_start_up("gpu_mem = get_device_memory_capacity(self.device) or 80000\n"
                            "if self.mem_fraction_static <= gpu_mem:\n    pass")
    assert gpu_memory_unknown(asked) is None
    assert str(answered) == str(asked)  # same words, told apart by the frame
