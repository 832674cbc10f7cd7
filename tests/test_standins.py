"""The torchvision/vllm stand-ins: importable, invisible to availability probes, loud on use."""

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
print("ok")
"""


def test_standins_import_but_raise_on_use():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
