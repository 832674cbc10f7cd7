"""The SGLang 0.5.21 family: its adapter.

As the 0.5.22 family (v0_5_22.py), and one more call whose arguments differ from 0.5.23's
(docs/engines-on-cpu.md, 'Runtime set-up per release family'): the EAGLE-3 worker resolves the
target's embedding and head with `pp_draft_embedding.resolve_target_embed_and_head(target)`,
which takes no `draft_model` yet.

CPU shim: its `sglang.srt.configs` registers image processors with transformers 5.12's
`AutoImageProcessor`, which refuses unless torchvision is installed; torchvision cannot be
installed beside CPU torch, so the stand-in is imported first (as 0.5.16-0.5.20's
`utils.common` does itself), and transformers, asked afterwards, finds it. No text-model path
reads it (a stand-in raises if anything does).

DFlash: as 0.5.22's (v0_5_22.py), the base's code run unchanged.

Composed of: its own `Launch` (the torchvision stand-in) and `Draft` (the embedding and head
resolved without `draft_model`), v0_5_14.ForwardContext (as 0.5.22), ahead of the 0.5.23 adapter.
"""

from __future__ import annotations

from typing import Any

from packaging.specifiers import SpecifierSet

from . import v0_5_14, v0_5_22, v0_5_23

RELEASES = SpecifierSet("==0.5.21.*")  # the releases this family's adapter serves
VERIFIED = ("0.5.21",)  # releases whose capture and forward were verified against transformers

CODE_PATHS = v0_5_22.CODE_PATHS
DFLASH_CODE_PATHS = v0_5_22.DFLASH_CODE_PATHS


class Launch:
    """The torchvision stand-in imported before the engine's configs register image processors."""

    def check_code_paths(self) -> None:
        v0_5_23.import_standin_torchvision()
        super().check_code_paths()

    def setup(self, port: int, draft_dir: str | None, device: str = "cpu") -> None:
        v0_5_23.import_standin_torchvision()
        super().setup(port, draft_dir, device)


class Draft:
    """The target's embedding and head resolved without `draft_model`."""

    def target_embed_and_head(self, target, draft) -> tuple[Any, Any]:
        from sglang.srt.speculative.pp_draft_embedding import resolve_target_embed_and_head

        return resolve_target_embed_and_head(target)


class Adapter(Launch, Draft, v0_5_14.ForwardContext, v0_5_23.Adapter):
    family = "0.5.21"
    REQUIRES = v0_5_22.without_keywords(v0_5_22.Adapter.REQUIRES,
                                        "sglang.srt.speculative.pp_draft_embedding.resolve_target_embed_and_head")
