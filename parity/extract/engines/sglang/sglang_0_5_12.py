"""SGLang 0.5.12.post1 (the 0.5.12 family): the per-release adapter.

As the 0.5.13-0.5.14 family (sglang_0_5_14.py: global server args for the scheduler,
dp_attention initialised before a model is built, the aux ids read by the real
`ModelRunner.__init__` under its bare `except:`, the capture configured by the real
`ModelRunner.init_aux_hidden_state_capture`), except where docs/engines-on-cpu.md,
'Runtime set-up per release family', says it differs:
there is no `forward_context.py`. Attention layers take their backend from
`forward_batch.attn_backend`, so a forward needs nothing but the ForwardBatch, which
already carries parity's prefill SDPA backend (and its write-only KV pool, which the
model code of this release reaches through `forward_batch.token_to_kv_pool`).
"""

from __future__ import annotations

import torch

from . import sglang_0_5_14, sglang_0_5_23
from ...run_until import CodePathMoved

CODE_PATHS = dict(sglang_0_5_14.CODE_PATHS)


class Adapter(sglang_0_5_14.Adapter):
    family = "0.5.12"

    def check_code_paths(self) -> None:
        try:
            super().check_code_paths()
        except CodePathMoved as exc:
            if "forward_context" not in str(exc):
                raise
        else:
            raise CodePathMoved("this release has sglang.srt.model_executor.forward_context, which the "
                                "0.5.12 adapter assumes absent (attention backend on the ForwardBatch)")

    @torch.no_grad()
    def forward(self, model, input_ids: torch.Tensor, spec_hidden: torch.Tensor | None = None):
        """One EXTEND forward with full hidden capture; the backend rides on the ForwardBatch."""
        batch = self._batch(input_ids)
        # In this release the model code writes its KV/latent cache through the batch's pool
        # (later releases ask the forward context): the backend's write-only pool, whose
        # reads raise, so a path that would read stale cache is loud.
        batch.token_to_kv_pool = batch.attn_backend.token_to_kv_pool
        if spec_hidden is not None:
            batch.spec_info = sglang_0_5_23._SpecInfo(spec_hidden)
        return model.forward(input_ids, batch.positions, batch)
