"""Injected drift: the installed vLLM's capture forgets the residual (appends the layer's MLP
output instead of `hidden_states + residual`), a plausible regression of its fused-residual
layout. Run as `python -m tests.drift.vllm_capture_without_residual` in place of the vLLM probe:
the dump's slots must then be named hK.delta, not hK."""

import os

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

from vllm.model_executor.models.interfaces import EagleModelMixin  # noqa: E402

from parity.extract.engines.vllm import probe  # noqa: E402


def _without_residual(self, aux_hidden_states, layer_idx, hidden_states, residual):
    if layer_idx in self.aux_hidden_state_layers:
        aux_hidden_states.append(hidden_states)
    return aux_hidden_states


EagleModelMixin._maybe_add_hidden_state = _without_residual

if __name__ == "__main__":
    raise SystemExit(probe.main())
