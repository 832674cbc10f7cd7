"""The torchvision/vllm stand-ins (and one family's single-module sgl_kernel.kvcacheio): importable,
invisible to availability probes, loud on use."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import importlib.util
from parity.extract import standins
installed = standins.install()
assert set(installed) == {"torchvision", "vllm"}, installed
assert importlib.util.find_spec("torchvision") is None  # libraries probing see it is absent
from torchvision.io import decode_image  # an import the model code does at module level
try:
    decode_image(b"")
except standins.StandInUsed as exc:
    assert "stand-in" in str(exc) and "torchvision" in str(exc)
else:
    raise AssertionError("a stand-in call did not raise")
from vllm._custom_ops import rotary_embedding
try:
    rotary_embedding.some_field
except standins.StandInUsed:
    pass
else:
    raise AssertionError("a stand-in attribute did not raise")
from torchvision.io import VideoReader
assert not isinstance(object(), VideoReader)  # nothing is an instance of a class not installed
try:  # asked only whether they exist (SGLang <= 0.5.3.post3): vLLM's quantization methods do not
    from vllm.model_executor.layers.quantization.aqlm import AQLMConfig
except ModuleNotFoundError:
    pass
else:
    raise AssertionError("vllm.model_executor.layers.quantization is stood in")
print("ok")
"""

ONE_MODULE = """
from parity.extract import standins
assert "sgl_kernel.kvcacheio" in standins.install("sgl_kernel.kvcacheio")
from sgl_kernel.kvcacheio import transfer_kv_per_layer  # what SGLang 0.5.10 imports on a CPU
try:
    transfer_kv_per_layer()
except standins.StandInUsed:
    pass
else:
    raise AssertionError("a stand-in call did not raise")
try:  # the package's other modules stay absent: SGLang's ImportError fallbacks still run
    from sgl_kernel.scalar_type import scalar_types
except ImportError:
    print("ok")
"""


def test_standins_import_but_raise_on_use():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_a_single_module_stand_in_leaves_its_package_absent():
    out = subprocess.run([sys.executable, "-c", ONE_MODULE], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
