"""Injected: parity's CPU stand-ins for SGLang's GDN kernels and shared-expert gate are not installed
(gdn_standin.install and shared_gate_standin.install replace nothing), so a Qwen3-Next target runs
SGLang's Triton kernels, which cannot run on a CPU.

Run as `python -m tests.drift.serving_no_gdn_standin` in place of the serving probe: the run must
stop as a limit of parity's CPU harness naming the Triton split (exit 2), never a verdict."""

from parity.extract.engines.sglang import gdn_standin, probe, shared_gate_standin

gdn_standin.install = lambda: []
shared_gate_standin.install = lambda: []

if __name__ == "__main__":
    raise SystemExit(probe.main())
