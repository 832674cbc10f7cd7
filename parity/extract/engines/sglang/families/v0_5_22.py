"""The SGLang 0.5.22 family: its adapter.

0.5.22 has every name the 0.5.23 adapter runs, but two of them take other arguments
(docs/engines-on-cpu.md, 'Runtime set-up per release family'), so the 0.5.23 adapter would
fail on it with a TypeError:
- `forward_context(ForwardContext(...))` takes no `forward_batch` (0.5.23 added it);
everything else is the 0.5.23 family's: `runtime_context.publish(..., ranks=SpawnRanks(...))`,
`spec_aux_hidden_state`, `attention_backend_setup`, and
`pp_draft_embedding.resolve_target_embed_and_head(target, draft_model=...)`.

DFlash (SpeculativeAlgorithm.DFLASH): as 0.5.23's, by the same code (the base's, run unchanged):
`resolve_spec_aux_hidden_state_config` -> `_resolve_dflash_aux_hidden_state`
(`parse_dflash_draft_config`, `build_target_layer_ids`), `configure_aux_hidden_state_capture` ->
`set_dflash_layers_to_capture`, `DFlashDraftModel.project_target_hidden`.

Composed of: v0_5_14.ForwardContext (the forward context carries the backend only) ahead of
the 0.5.23 adapter.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from . import v0_5_14, v0_5_23

RELEASES = SpecifierSet("==0.5.22.*")  # the releases this family's adapter serves
VERIFIED = ("0.5.22",)  # releases whose capture and forward were verified against transformers

CODE_PATHS = v0_5_23.CODE_PATHS
DFLASH_CODE_PATHS = v0_5_23.DFLASH_CODE_PATHS


def without_keywords(requires: tuple[str, ...], *names: str) -> tuple[str, ...]:
    """`requires` with each of `names` required as a name only, not with the keyword arguments
    the newer family calls it with."""
    return tuple(r.partition("(")[0] if r.partition("(")[0] in names else r for r in requires)


class Adapter(v0_5_14.ForwardContext, v0_5_23.Adapter):
    family = "0.5.22"
    REQUIRES = without_keywords(v0_5_23.Adapter.REQUIRES, "sglang.srt.model_executor.forward_context.forward_context")
