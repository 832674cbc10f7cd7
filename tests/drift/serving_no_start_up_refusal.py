"""Injected: the serving probe no longer asks the release's capture statement about the target's
model class before building it (probe.start_up_refusal answers None), as before parity gave a
model the engine's EAGLE-3 start-up refuses the engine's own answer.

Run as `python -m tests.drift.serving_no_start_up_refusal` under an SGLang environment in place
of the serving probe: DeepSeek-V3 on 0.4.4.post4-0.4.8 is then stopped by parity's CPU run (its
CUDA-only MoE kernel, its CUDA-only build), a limit of the harness, as those cells once read."""

from parity.extract.engines.sglang import probe

probe.start_up_refusal = lambda *args, **kwargs: None

if __name__ == "__main__":
    raise SystemExit(probe.main())
