"""A CPU stand-in for the Triton kernel SGLang gates a shared expert with (Qwen2-MoE's sparse MoE
block, which Qwen3-Next's layers use): `_launch_fused_gate_sigmoid_mul` in
`sglang/kernels/ops/elementwise/elementwise.py` (0.5.23), behind `fused_gate_sigmoid_mul` and
`fused_gate_sigmoid_mul_add`, which `Qwen2MoeSparseMoeBlock` calls whatever the device.

Per token it computes `sigmoid(<h, w>) * shared_output` in float32, `w` the shared-expert gate's
one row, added to `output` when `do_add`, as the kernel does. The shared expert, its gate's
weight and the routed experts stay SGLang's own. It covers that signature only: a release whose
launcher takes anything else is left as it is (then its Triton kernel fails as a limit of
parity's CPU run), and a non-contiguous or mis-shaped operand raises `StandInUsed`.
"""

from __future__ import annotations

import importlib
import inspect

import torch

from ...standins import StandInUsed

MODULE = "sglang.kernels.ops.elementwise.elementwise"
NAME = "_launch_fused_gate_sigmoid_mul"
SIGNATURE = ["hidden_states", "gate_weight", "shared_output", "output", "do_add"]


def gate_sigmoid_mul(hidden_states: torch.Tensor, gate_weight: torch.Tensor, shared_output: torch.Tensor,
                     output: torch.Tensor, *, do_add: bool) -> None:
    """output <- sigmoid(hidden_states @ gate_weight) * shared_output (+ output when do_add)."""
    tokens, width = hidden_states.shape
    if gate_weight.shape != (width,) or shared_output.shape != (tokens, width) or output.shape != (tokens, width):
        raise StandInUsed("shared-expert gate: operands of another shape than [T, H], [H], [T, H], [T, H]; "
                          "parity's CPU stand-in for SGLang's fused gate kernel does not compute it")
    gate = torch.sigmoid((hidden_states.float() * gate_weight.float()).sum(-1, keepdim=True))
    result = gate * shared_output.float()
    if do_add:
        result = result + output.float()
    output.copy_(result.to(output.dtype))


def install() -> list[str]:
    """Put `gate_sigmoid_mul` in place of the release's launcher when it has SIGNATURE."""
    try:
        module = importlib.import_module(MODULE)
    except ModuleNotFoundError:
        return []
    original = getattr(module, NAME, None)
    if original is None or getattr(original, "__parity_standin__", False):
        return []
    if list(inspect.signature(original).parameters) != SIGNATURE:
        return []

    def launch(hidden_states, gate_weight, shared_output, output, *, do_add):
        return gate_sigmoid_mul(hidden_states, gate_weight, shared_output, output, do_add=do_add)

    launch.__parity_standin__ = True
    launch.__wrapped__ = original
    launch.__doc__ = f"parity's CPU stand-in for {original.__qualname__}: {gate_sigmoid_mul.__doc__}"
    setattr(module, NAME, launch)
    return [NAME]
