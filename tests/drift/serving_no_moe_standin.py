"""Injected: parity's CPU stand-in for SGLang's CUDA fused-MoE route is not installed
(moe_standin.install replaces nothing), so the release's own non-CUDA MoE method runs as shipped.

Run as `python -m tests.drift.serving_no_moe_standin` under SGLang 0.5.10's environment in place
of the serving probe: gpt-oss's experts then run without their biases and clamped SwiGLU (what
that method computes), and the probe must name that run as the engine's non-CUDA forward that
is not the model (cpu_path.unread_parameters), never give a contract."""

from parity.extract.engines.sglang import moe_standin, probe

moe_standin.install = lambda: []

if __name__ == "__main__":
    raise SystemExit(probe.main())
