"""The SGLang 0.5.16 family (0.5.16 to 0.5.20): between the 0.5.14 and 0.5.23 families
(docs/engines-on-cpu.md, 'Runtime set-up per release family'), taking from each what its code has:
- as 0.5.23: process `ProcessWithInterpolationModes` (the runtime context; the torchvision stand-in's
  InterpolationMode first: its `utils.common` imports `torchvision.io` at module level) and
  capture `Capture` (`spec_aux_hidden_state`, `attention_backend_setup`, the same signatures);
- as 0.5.14: launch `ArgsForScheduler` (`__post_init__`'s assignments, no `resolve_once`;
  `set_global_server_args_for_scheduler`), context `ContextWithoutBatch` and draft
  `EmbedAndHeadFromTarget` (`get_embed_and_head()`: no `pp_draft_embedding` yet);
- its own: target `DpAttentionOnArgsBuiltAnew` (`initialize_dp_attention` before a build; from 0.5.19
  resolved args are read-only) and batches `DefaultBackendByResolverOrServerArgs` (the default
  GPU backend's resolver moved in 0.5.19).
DFlash (0.5.18 also has DSPARK): as 0.5.23's, by the same resolver and capture.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.batches import DefaultBackendByResolverOrServerArgs
from ..concerns import capture
from ..concerns.capture import Capture
from ..concerns.config import Config
from ..concerns.context import ContextWithoutBatch
from ..concerns.draft import EmbedAndHeadFromTarget
from ..concerns.launch import ArgsForScheduler
from ..concerns.process import ProcessWithInterpolationModes
from ..concerns.target import DpAttentionOnArgsBuiltAnew

RELEASES = SpecifierSet(">=0.5.16,<0.5.21")  # the releases this family's adapter serves
VERIFIED = ("0.5.18",)  # releases whose capture and forward were verified against transformers

CODE_PATHS, DFLASH_CODE_PATHS = capture.CODE_PATHS, capture.DFLASH_CODE_PATHS  # its capture's (Capture)


class Adapter(ProcessWithInterpolationModes, ArgsForScheduler, Config, Capture, DpAttentionOnArgsBuiltAnew,
              DefaultBackendByResolverOrServerArgs, ContextWithoutBatch, EmbedAndHeadFromTarget):
    family = "0.5.16"
