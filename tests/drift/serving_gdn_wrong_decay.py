"""Injected: parity's CPU stand-in for SGLang's GDN gating (gdn_standin.gdn_gates) halves the
log-decay `g` (a wrong decay), everything else as shipped.

Run as `python -m tests.drift.serving_gdn_wrong_decay` in place of the serving probe: a Qwen3-Next
target's linear-attention layers then compute no state of the model, and every captured state after
one must be unidentified against transformers (a stand-in's fault is caught, never a contract)."""

from parity.extract.engines.sglang import gdn_standin, probe

_gates = gdn_standin.gdn_gates
gdn_standin.gdn_gates = lambda A_log, a, b, dt_bias: (lambda g, beta: (g / 2, beta))(*_gates(A_log, a, b, dt_bias))

if __name__ == "__main__":
    raise SystemExit(probe.main())
