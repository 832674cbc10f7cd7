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
from ..concerns.capture import Capture
from ..concerns.config import Config
from ..concerns.context import AttentionContext
from ..concerns.draft import Draft
from ..concerns.launch import Launch
from ..concerns.process import Process
from ..concerns.target import Target

RELEASES = SpecifierSet("==0.5.23.*")  # the releases this family's adapter serves
VERIFIED = ("0.5.23",)  # releases whose capture and forward were verified against transformers

CODE_PATHS = {
    "ids": "sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state."
           "resolve_spec_aux_hidden_state_config",
    "capture": "sglang.srt.model_executor.model_runner_components.attention_backend_setup."
               "configure_aux_hidden_state_capture -> <Model>.set_eagle3_layers_to_capture",
    "model_class": "sglang.srt.model_loader.utils.get_model_architecture",
    "draft": "sglang.srt.models.llama_eagle3.LlamaForCausalLMEagle3",
}
# The same keys for a DFlash draft (served under DFLASH): the contract records these instead.
DFLASH_CODE_PATHS = {
    "ids": CODE_PATHS["ids"] + " -> _resolve_dflash_aux_hidden_state (sglang.srt.speculative.dflash_utils."
           "parse_dflash_draft_config, build_target_layer_ids)",
    "capture": "sglang.srt.model_executor.model_runner_components.attention_backend_setup."
               "configure_aux_hidden_state_capture -> <Model>.set_dflash_layers_to_capture",
    "model_class": CODE_PATHS["model_class"],
    "draft": "sglang.srt.models.dflash.DFlashDraftModel.project_target_hidden",
}


class Adapter(Process, Launch, Config, Capture, Target, Batches, AttentionContext, Draft):
    family = "0.5.23"
