"""The gated-delta-net (GDN) linear-attention layers of hybrid targets on vLLM (Qwen3-Next,
Qwen3.5, Kimi-Linear, OLMo-hybrid: the `GatedDeltaNetAttention` subclasses under
`vllm/model_executor/layers/mamba/gdn/`, 0.33 and 0.34): a limit of parity's CPU run, said so.

Their core (causal conv1d, gated delta rule) is a custom op (`torch.ops.vllm.qwen_gdn_attention_core`,
`cpu_gdn_attention_core`, ...) whose CPU body the official wheel does not ship; on parity's CPU
run it leaves the layer's output as it was allocated (zeros) instead of raising, so the states
after the first GDN layer match no state of the model, which would read as drift (measured on
0.34.0 with the bundled Qwen3-Next config at depth 8: every captured slot unidentified, exit 1).
parity has no stand-in for this core on vLLM yet (SGLang's is parity/extract/engines/sglang/
gdn_standin.py), so each such layer's `forward` raises `KernelStandInError` naming it: the run
stops as a limit of parity's CPU harness (exit 2), never a verdict.
"""

from __future__ import annotations

import importlib
import pkgutil

from .kernels import KernelStandInError

PACKAGE = "vllm.model_executor.layers.mamba.gdn"
BASE = "base.GatedDeltaNetAttention"


def install() -> list[str]:
    """Make `forward` of every GatedDeltaNetAttention subclass of the release raise. Returns one line
    naming them (none on a release without the package)."""
    try:
        package = importlib.import_module(PACKAGE)
    except ModuleNotFoundError:  # a release without the GDN package
        return []
    module_name, cls_name = BASE.split(".")
    base = getattr(importlib.import_module(f"{PACKAGE}.{module_name}"), cls_name)
    done = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{PACKAGE}.{info.name}")
        for cls in vars(module).values():
            if (isinstance(cls, type) and issubclass(cls, base) and cls.__module__ == module.__name__
                    and "forward" in vars(cls) and not getattr(cls.forward, "__parity_guard__", False)):
                cls.forward = _refusing(cls)
                done.append(cls.__name__)
    return [f"{PACKAGE}: {', '.join(sorted(done))}.forward -> raises (no CPU GDN core)"] if done else []


def _refusing(cls):
    def forward(self, *args, **kwargs):
        raise KernelStandInError(
            f"{cls.__name__} (gated-delta-net linear attention): vLLM's official wheel has no CPU kernel for its "
            "core (causal conv1d, gated delta rule), which would leave its output unset, and parity has no "
            "stand-in for it on vLLM")

    forward.__parity_guard__ = True
    forward.__wrapped__ = cls.forward
    return forward
