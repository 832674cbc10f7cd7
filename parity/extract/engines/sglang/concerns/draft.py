"""The draft concern: the draft as the engine builds it, its decoder layers, the target's
embedding (and head) bound into it as the EAGLE-3 worker binds them, and its logits rows.

- `Draft` (0.5.22 on): the worker resolves the target's embedding and head with
  `pp_draft_embedding.resolve_target_embed_and_head(target, draft_model=...)`. On a CPU the
  binding (`set_embed`, `set_embed_and_head`) runs under parity's `torch.cuda.synchronize`
  stand-in (on_cpu_embedding_binding): the MLA draft class for Kimi-K2.5
  (`Eagle3DeepseekV2ForCausalLM`) ends both with it.
- `EmbedAndHeadWithoutDraftModel` (0.5.21): `resolve_target_embed_and_head(target)`, which takes no
  `draft_model` yet.
- `EmbedAndHeadFromTarget` (0.4.4.post2-0.5.20): the worker fetches them with the target's own
  `get_embed_and_head()` (no `pp_draft_embedding` yet).
- `MidlayerDraft` (0.4.4.post2-0.5.10): as `EmbedAndHeadFromTarget`, and the EAGLE-3 draft's one
  decoder layer is `model.midlayer` (a `layers` list from 0.5.11).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .... import standins

_EMBED_AND_HEAD = "sglang.srt.speculative.pp_draft_embedding.resolve_target_embed_and_head"
_DRAFT = ("sglang.srt.layers.logits_processor.LogitsMetadata", "sglang.srt.models.llama_eagle3.LlamaForCausalLMEagle3")


def on_cpu_embedding_binding(draft) -> None:
    """The draft's `set_embed` and `set_embed_and_head` (what the EAGLE-3 worker calls to bind
    the target's embedding and head) run under parity's `torch.cuda.synchronize` stand-in on a
    CPU (standins.cuda_synchronize_on_cpu): the MLA draft class for Kimi-K2.5
    (`Eagle3DeepseekV2ForCausalLM`, kimi_k25_eagle3.py) ends both with `torch.cuda.empty_cache()`
    and `torch.cuda.synchronize()`, housekeeping after the binding, which the CPU build of torch
    refuses. The binding itself runs unchanged; a class that calls neither is unaffected."""
    for name in ("set_embed", "set_embed_and_head"):
        method = getattr(draft, name, None)
        if method is None:
            continue

        def bound(*args, _method=method, **kwargs):
            with standins.cuda_synchronize_on_cpu():
                return _method(*args, **kwargs)

        setattr(draft, name, bound)


class Draft:
    """The built draft: its build, decoder layers, embedding binding and logits rows."""

    DRAFT_PATHS: tuple[str, ...] = (*_DRAFT, f"{_EMBED_AND_HEAD}(draft_model)")

    def build_draft(self, draft_dir: str):
        """The draft as the engine builds it (after what its model runner does before any model is
        built: the target concern's `before_draft_build`): its config reader, its model class."""
        self.before_draft_build(draft_dir)
        from sglang.srt.model_loader.utils import get_model_architecture

        config = self.model_config(draft_dir, is_draft=True)
        cls, _ = get_model_architecture(config)
        draft = cls(config=config.hf_config, quant_config=None).eval()
        if not getattr(self, "device", "cpu").startswith("cuda"):
            on_cpu_embedding_binding(draft)
        return draft

    def draft_layers(self, draft) -> list:
        """The draft's decoder layers, in order (its `model.layers`; the MLA draft class for
        Kimi-K2.5, `Eagle3DeepseekV2ForCausalLM`, has one, `model.midlayer`)."""
        layers = getattr(draft.model, "layers", None)
        return list(layers) if layers is not None else [draft.model.midlayer]

    def target_embed_and_head(self, target, draft) -> tuple[Any, Any]:
        """The target's embedding and head as the EAGLE-3 worker fetches them for the draft."""
        from sglang.srt.speculative.pp_draft_embedding import resolve_target_embed_and_head

        return resolve_target_embed_and_head(target, draft_model=draft)

    def bind_target_embedding(self, target, draft) -> str:
        """Bind the target's embedding (and head) into the draft as SGLang's EAGLE-3 worker does:
        `set_embed_and_head` when the draft takes its head from the target, else `set_embed`.
        Returns whose embedding the draft now holds ("target" or "draft")."""
        embed, head = self.target_embed_and_head(target, draft)
        before = draft.model.embed_tokens.weight
        if getattr(draft, "load_lm_head_from_target", False):
            draft.set_embed_and_head(embed, head)
        else:
            draft.set_embed(embed)
        return "target" if draft.model.embed_tokens.weight is not before else "draft"

    def keep_all_rows(self, draft) -> None:
        """Make the draft's LogitsProcessor keep every row of a prefill: its batch metadata is
        marked DECODE, which keeps every row through the same `lm_head` code path."""
        from sglang.srt.layers.logits_processor import LogitsMetadata
        from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode

        processor = draft.logits_processor
        original = processor.forward

        def forward(input_ids, hidden_states, lm_head, logits_metadata, *args, **kwargs):
            if isinstance(logits_metadata, ForwardBatch):
                logits_metadata = LogitsMetadata.from_forward_batch(logits_metadata)
            if logits_metadata.forward_mode.is_extend():
                logits_metadata = dataclasses.replace(logits_metadata, forward_mode=ForwardMode.DECODE)
            return original(input_ids, hidden_states, lm_head, logits_metadata, *args, **kwargs)

        processor.forward = forward


class EmbedAndHeadWithoutDraftModel(Draft):
    """The target's embedding and head resolved without `draft_model`."""

    DRAFT_PATHS: tuple[str, ...] = (*_DRAFT, _EMBED_AND_HEAD)

    def target_embed_and_head(self, target, draft) -> tuple[Any, Any]:
        from sglang.srt.speculative.pp_draft_embedding import resolve_target_embed_and_head

        return resolve_target_embed_and_head(target)


class EmbedAndHeadFromTarget(Draft):
    """The target's embedding and head from its own `get_embed_and_head()`."""

    DRAFT_PATHS: tuple[str, ...] = _DRAFT

    def target_embed_and_head(self, target, draft) -> tuple[Any, Any]:
        """As this release's EAGLE-3 worker: the target's own `get_embed_and_head()`."""
        return target.get_embed_and_head()


class MidlayerDraft(EmbedAndHeadFromTarget):
    """The EAGLE-3 draft's one decoder layer, `model.midlayer`."""

    def draft_layers(self, draft) -> list:
        """This release's EAGLE-3 draft has one decoder layer, `model.midlayer`."""
        return [draft.model.midlayer]
