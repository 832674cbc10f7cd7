"""The context concern: where the attention layers find their backend during a forward.

- `AttentionContext` (0.5.23): the forward context, `forward_context(ForwardContext(attn_backend=...),
  forward_batch=batch)`, which also carries the batch.
- `ContextWithoutBatch` (0.5.13-0.5.22): the forward context carries the backend only:
  `forward_context(...)` takes no `forward_batch` (0.5.23 added it).
- `NoForwardContext` (0.4.4.post2-0.5.12): there is no `forward_context.py`. Attention layers take
  their backend from `forward_batch.attn_backend`, so a forward needs nothing but the ForwardBatch,
  which carries the backend, and the KV pool the model code reaches through
  `forward_batch.token_to_kv_pool` (for parity's prefill SDPA backend, its write-only pool); the
  code paths say the module is absent.
"""

from __future__ import annotations

import importlib.util
from contextlib import nullcontext

from ....run_until import CodePathMoved

FORWARD_CONTEXT = "sglang.srt.model_executor.forward_context"


class AttentionContext:
    """The forward context carrying the backend and the batch."""

    CONTEXT_PATHS: tuple[str, ...] = (f"{FORWARD_CONTEXT}.ForwardContext",
                                      f"{FORWARD_CONTEXT}.forward_context(forward_batch)")

    def attention_context(self, batch, backend):
        """What the attention layers read their backend from during one forward: this release
        asks the forward context (which also carries the batch)."""
        from sglang.srt.model_executor.forward_context import ForwardContext, forward_context

        return forward_context(ForwardContext(attn_backend=backend), forward_batch=batch)

    def check_context_paths(self) -> None:
        """Nothing beyond its names: the forward context is a code path."""


class ContextWithoutBatch(AttentionContext):
    """A forward context that carries the attention backend only (`forward_context(...)` takes no batch)."""

    CONTEXT_PATHS: tuple[str, ...] = (f"{FORWARD_CONTEXT}.ForwardContext", f"{FORWARD_CONTEXT}.forward_context")

    def attention_context(self, batch, backend):
        """This release's forward context carries the backend only."""
        from sglang.srt.model_executor.forward_context import ForwardContext, forward_context

        return forward_context(ForwardContext(attn_backend=backend))


class NoForwardContext(AttentionContext):
    """No forward context: the attention backend and the KV pool ride on the ForwardBatch (and the
    code paths say the module is absent)."""

    CONTEXT_PATHS: tuple[str, ...] = ()

    def attention_context(self, batch, backend):
        """No forward context: the backend rides on the ForwardBatch. The model code writes
        its KV/latent cache through the batch's pool (later releases ask the forward context);
        with parity's prefill backend that is the backend's write-only pool, whose reads
        raise, so a path that would read stale cache is loud."""
        if getattr(batch, "token_to_kv_pool", None) is None:
            batch.token_to_kv_pool = backend.token_to_kv_pool
        return nullcontext()

    def check_context_paths(self) -> None:
        if importlib.util.find_spec(FORWARD_CONTEXT) is not None:
            raise CodePathMoved("this release has sglang.srt.model_executor.forward_context, which the "
                                "0.5.12 adapter assumes absent (attention backend on the ForwardBatch)")
