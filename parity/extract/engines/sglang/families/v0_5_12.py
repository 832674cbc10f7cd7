"""The SGLang 0.5.12 family: its adapter.

As the 0.5.14 family (v0_5_14.py: global server args for the scheduler, dp_attention
initialised before a model is built, the aux ids read by the real `ModelRunner.__init__`
under its bare `except:`, the capture configured by the real
`ModelRunner.init_aux_hidden_state_capture`, the target's embedding fetched by its own
`get_embed_and_head()`), except where docs/engines-on-cpu.md, 'Runtime set-up per release
family', says it differs: there is no `forward_context.py`. Attention layers take their
backend from `forward_batch.attn_backend`, so a forward needs nothing but the ForwardBatch,
which carries the backend, and the KV pool the model code of this release reaches through
`forward_batch.token_to_kv_pool` (for parity's prefill SDPA backend, its write-only pool).

DFlash (0.5.12 has DFLASH; 0.5.11 is answered by its own SpeculativeAlgorithm): as the 0.5.14
family's (v0_5_14.py), read by the real `ModelRunner.__init__` and `init_aux_hidden_state_capture`.

Composed of: its own `NoForwardContext` (also taken by the older families), then the 0.5.14
family's `Launch`, `SchedulerArgs`, `Config`, `DpAttention`, `Capture`, `DefaultBackend` and
`Draft`, ahead of the 0.5.23 adapter.
"""

from __future__ import annotations

import importlib.util
from contextlib import nullcontext

from packaging.specifiers import SpecifierSet

from . import v0_5_14, v0_5_23
from ....run_until import CodePathMoved

RELEASES = SpecifierSet(">=0.5.11,<0.5.13")  # the releases this family's adapter serves
VERIFIED = ("0.5.12.post1",)  # releases whose capture and forward were verified against transformers

CODE_PATHS = dict(v0_5_14.CODE_PATHS)
DFLASH_CODE_PATHS = v0_5_14.DFLASH_CODE_PATHS


class NoForwardContext:
    """No forward context: the attention backend and the KV pool ride on the ForwardBatch (and the
    code paths say the module is absent)."""

    def check_code_paths(self) -> None:
        super().check_code_paths()
        if importlib.util.find_spec(v0_5_14.FORWARD_CONTEXT) is not None:
            raise CodePathMoved("this release has sglang.srt.model_executor.forward_context, which the "
                                "0.5.12 adapter assumes absent (attention backend on the ForwardBatch)")

    def attention_context(self, batch, backend):
        """No forward context: the backend rides on the ForwardBatch. The model code writes
        its KV/latent cache through the batch's pool (later releases ask the forward context);
        with parity's prefill backend that is the backend's write-only pool, whose reads
        raise, so a path that would read stale cache is loud."""
        if getattr(batch, "token_to_kv_pool", None) is None:
            batch.token_to_kv_pool = backend.token_to_kv_pool
        return nullcontext()


class Adapter(NoForwardContext, v0_5_14.Launch, v0_5_14.SchedulerArgs, v0_5_14.Config, v0_5_14.DpAttention,
              v0_5_14.Capture, v0_5_14.DefaultBackend, v0_5_14.Draft, v0_5_23.Adapter):
    family = "0.5.12"
    REQUIRES = tuple(name for name in v0_5_14.Adapter.REQUIRES
                     if not name.startswith(v0_5_14.FORWARD_CONTEXT + "."))
