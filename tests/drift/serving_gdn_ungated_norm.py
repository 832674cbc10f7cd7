"""Injected: parity's CPU stand-in for SGLang's gated RMSNorm (gdn_standin.gated_rms_norm) drops
the output gate `z` (act(z) taken as 1), everything else as shipped.

Run as `python -m tests.drift.serving_gdn_ungated_norm` in place of the serving probe: a Qwen3-Next
target's linear-attention layers then compute no state of the model, and the captured states must
be unidentified against transformers."""

import torch

from parity.extract.engines.sglang import gdn_standin, probe

_norm = gdn_standin.gated_rms_norm
gdn_standin.gated_rms_norm = lambda x, z, weight, eps, activation="swish": _norm(
    x, torch.full_like(z, 30.0), weight, eps, "sigmoid")  # sigmoid(30) == 1: no gate

if __name__ == "__main__":
    raise SystemExit(probe.main())
