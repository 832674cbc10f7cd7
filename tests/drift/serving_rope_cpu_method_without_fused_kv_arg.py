"""Injected: SGLang's `RotaryEmbedding.forward_native` takes no `fused_set_kv_buffer_arg`, as in
SGLang 0.5.0rc1-0.5.3rc0, whose gpt-oss attention passes it to the rotary op whichever method the
op dispatched to (only `forward_cuda` took it there).

Run as `python -m tests.drift.serving_rope_cpu_method_without_fused_kv_arg` under SGLang
0.5.10's environment in place of the serving probe: parity's rotary stand-in (rope_standin.py)
lets that method take the argument as None, as it does on those releases, and gpt-oss's states
are identified; without the stand-in (serving_rope_without_standin) the prefill raises TypeError
in the engine's own non-CUDA rotary method, which the probe names as the engine's non-CUDA path
(cpu_path.method_lacks_argument)."""

from parity.extract import standins
from parity.extract.engines.sglang.concerns.process import KERNEL_STANDINS

standins.install(*KERNEL_STANDINS)

from sglang.srt.layers.rotary_embedding.base import RotaryEmbedding  # noqa: E402

from parity.extract.engines.sglang import probe  # noqa: E402

_native = RotaryEmbedding.forward_native


def forward_native(self, positions, query, key, offsets=None):
    return _native(self, positions, query, key, offsets)


forward_native.__qualname__ = "RotaryEmbedding.forward_native"
RotaryEmbedding.forward_native = forward_native

if __name__ == "__main__":
    raise SystemExit(probe.main())
