"""The SGLang 0.5.22 family: 0.5.22 has every name the 0.5.23 adapter runs, but one takes other
arguments (docs/engines-on-cpu.md, 'Runtime set-up per release family'), so the 0.5.23 adapter
would fail on it with a TypeError: `forward_context(ForwardContext(...))` takes no
`forward_batch` (context: `ContextWithoutBatch`). Every other concern is the base's
(`runtime_context.publish(..., ranks=SpawnRanks(...))`, `spec_aux_hidden_state`,
`attention_backend_setup`, `pp_draft_embedding.resolve_target_embed_and_head(target,
draft_model=...)`), DFlash included, run unchanged.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.batches import Batches
from ..concerns import capture
from ..concerns.capture import Capture
from ..concerns.config import Config
from ..concerns.context import ContextWithoutBatch
from ..concerns.draft import Draft
from ..concerns.launch import Launch
from ..concerns.process import Process
from ..concerns.target import Target

RELEASES = SpecifierSet("==0.5.22.*")  # the releases this family's adapter serves
VERIFIED = ("0.5.22",)  # releases whose capture and forward were verified against transformers

CODE_PATHS, DFLASH_CODE_PATHS = capture.CODE_PATHS, capture.DFLASH_CODE_PATHS  # its capture's (Capture)


class Adapter(Process, Launch, Config, Capture, Target, Batches, ContextWithoutBatch, Draft):
    family = "0.5.22"
