"""The `fused_set_kv_buffer_arg` of SGLang's rotary op, taken by its non-CUDA methods on the
releases whose model code passes it whichever method the op dispatched to (gpt-oss on SGLang
0.5.0rc1-0.5.3rc0), where only `forward_cuda` takes it.

There the gpt-oss attention calls `self.rotary_emb(positions, q, k, fused_set_kv_buffer_arg=...)`,
with the argument None unless the fused KV write is on (`_enable_fused_set_kv_buffer`: CUDA with
a bfloat16 KV pool), in which case the attention does not save the KV itself. Off CUDA it is
always None and the attention saves the KV; but `RotaryEmbedding.forward_native()` takes no such
keyword, so the call raises TypeError before anything is computed (cpu_path.method_lacks_argument
names it). With the argument None, `forward_cuda` computes the rotary embedding alone, which is
what the release's own non-CUDA method computes.

`install` gives each such non-CUDA method (one that lacks the keyword while the class's
`forward_cuda` takes it) the keyword: None runs the release's own method unchanged; anything
else (a fused write into the KV pool, which only the CUDA kernel does) raises `StandInUsed`.
"""

from __future__ import annotations

import inspect

from ...standins import StandInUsed

ARGUMENT = "fused_set_kv_buffer_arg"
ROTARY = "sglang.srt.layers.rotary_embedding"  # the module (0.5.9 and older) or package exporting RotaryEmbedding
METHODS = ("forward_native", "forward_cpu")  # the non-CUDA methods an op may dispatch to on a CPU


def _takes(func) -> bool:
    try:
        return ARGUMENT in inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False


def install() -> list[str]:
    """Give the non-CUDA methods of the installed rotary classes (RotaryEmbedding and every
    subclass imported by then; the model modules import theirs before the model is built) that lack `fused_set_kv_buffer_arg`
    (where the class's `forward_cuda` takes it) that keyword; run before the model is built (an op
    binds its method then). Returns the methods changed; none on a release whose methods take it
    or whose model code never passes it."""
    import importlib

    base = importlib.import_module(ROTARY).RotaryEmbedding
    classes, done = [base], []
    for cls in classes:
        classes.extend(sub for sub in cls.__subclasses__() if sub not in classes)
    for cls in classes:
        if not _takes(getattr(cls, "forward_cuda", None)):
            continue
        for method in METHODS:
            own = vars(cls).get(method)
            if own is None or _takes(own) or getattr(own, "__parity_standin__", False):
                continue
            setattr(cls, method, _taking_the_argument(own))
            done.append(f"{cls.__name__}.{method}")
    return done


def _taking_the_argument(method):
    def forward(self, *args, fused_set_kv_buffer_arg=None, **kwargs):
        if fused_set_kv_buffer_arg is not None:
            raise StandInUsed(f"{type(self).__name__}.{method.__name__} was handed a {ARGUMENT} (a fused write of "
                              "the KV cache, which only the CUDA kernel does), but parity's CPU stand-in takes that "
                              "argument only as None; the real kernel is needed here")
        return method(self, *args, **kwargs)

    forward.__name__, forward.__qualname__ = method.__name__, method.__qualname__
    forward.__parity_standin__ = True
    return forward
