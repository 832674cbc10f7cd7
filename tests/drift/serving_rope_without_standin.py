"""Injected: SGLang's `RotaryEmbedding.forward_native` takes no `fused_set_kv_buffer_arg`, as in
SGLang 0.5.0rc1-0.5.3rc0 (serving_rope_cpu_method_without_fused_kv_arg), AND parity's rotary
stand-in (rope_standin.install) is left out.

Run as `python -m tests.drift.serving_rope_without_standin` under SGLang 0.5.10's environment in
place of the serving probe: a gpt-oss prefill then raises TypeError in the engine's own non-CUDA
rotary method, which the probe must name as the engine's non-CUDA path
(cpu_path.method_lacks_argument), not as a limit of parity's harness."""

from parity.extract.engines.sglang import probe, rope_standin
from tests.drift import serving_rope_cpu_method_without_fused_kv_arg  # noqa: F401  (the old signature)

rope_standin.install = lambda: []

if __name__ == "__main__":
    raise SystemExit(probe.main())
