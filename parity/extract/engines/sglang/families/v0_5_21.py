"""The SGLang 0.5.21 family: as the 0.5.22 family (context: `ContextWithoutBatch`), and
(docs/engines-on-cpu.md, 'Runtime set-up per release family'):
- draft: `EmbedAndHeadWithoutDraftModel`: the EAGLE-3 worker resolves the target's embedding and
  head with `pp_draft_embedding.resolve_target_embed_and_head(target)`, which takes no
  `draft_model` yet;
- process: `ProcessWithTorchvisionStandin`: its `sglang.srt.configs` registers image processors
  with transformers 5.12's `AutoImageProcessor`, which refuses unless torchvision is installed, so
  the stand-in is imported first.
DFlash: as 0.5.22's, the base's code run unchanged.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.batches import Batches
from ..concerns import capture
from ..concerns.capture import Capture
from ..concerns.config import Config
from ..concerns.context import ContextWithoutBatch
from ..concerns.draft import EmbedAndHeadWithoutDraftModel
from ..concerns.launch import Launch
from ..concerns.process import ProcessWithTorchvisionStandin
from ..concerns.target import Target

RELEASES = SpecifierSet("==0.5.21.*")  # the releases this family's adapter serves
VERIFIED = ("0.5.21",)  # releases whose capture and forward were verified against transformers

CODE_PATHS, DFLASH_CODE_PATHS = capture.CODE_PATHS, capture.DFLASH_CODE_PATHS  # its capture's (Capture)


class Adapter(ProcessWithTorchvisionStandin, Launch, Config, Capture, Target, Batches, ContextWithoutBatch,
              EmbedAndHeadWithoutDraftModel):
    family = "0.5.21"
