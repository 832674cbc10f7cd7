"""The SGLang 0.5.23 family: every concern's base variant (concerns/), the release the bases
describe. It is the family that runs the capture on several ranks (a parallel layout) and runs
DFlash: the ids are the draft's `target_layer_ids` by the same start-up resolver
(`resolve_spec_aux_hidden_state_config` -> `_resolve_dflash_aux_hidden_state`), handed to the
target's `set_dflash_layers_to_capture` (`set_dspark_layers_to_capture` under DSPARK).

- process: `Process` (the runtime context, SGLang's own groups, one rank of a tp x pp layout);
- launch: `Launch` (`resolve_once`, `runtime_context.publish(..., ranks=...)`);
- config: `Config`; capture: `Capture` (`spec_aux_hidden_state`, `attention_backend_setup`);
- target: `Target`; batches: `Batches`;
- context: `AttentionContext` (`forward_context(..., forward_batch=batch)`: 0.5.23 added the batch);
- draft: `Draft` (`pp_draft_embedding.resolve_target_embed_and_head(target, draft_model=...)`).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.batches import Batches
from ..concerns import capture
from ..concerns.capture import Capture
from ..concerns.config import Config
from ..concerns.context import AttentionContext
from ..concerns.draft import Draft
from ..concerns.launch import Launch
from ..concerns.process import Process
from ..concerns.target import Target

RELEASES = SpecifierSet("==0.5.23.*")  # the releases this family's adapter serves
VERIFIED = ("0.5.23",)  # releases whose capture and forward were verified against transformers

CODE_PATHS, DFLASH_CODE_PATHS = capture.CODE_PATHS, capture.DFLASH_CODE_PATHS  # its capture's (Capture)


class Adapter(Process, Launch, Config, Capture, Target, Batches, AttentionContext, Draft):
    family = "0.5.23"
