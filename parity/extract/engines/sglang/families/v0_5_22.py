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
from ..concerns.capture import Capture
from ..concerns.config import Config
from ..concerns.context import ContextWithoutBatch
from ..concerns.draft import Draft
from ..concerns.launch import Launch
from ..concerns.process import Process
from ..concerns.target import Target

RELEASES = SpecifierSet("==0.5.22.*")  # the releases this family's adapter serves
VERIFIED = ("0.5.22",)  # releases whose capture and forward were verified against transformers

CODE_PATHS = {
    "ids": "sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state."
           "resolve_spec_aux_hidden_state_config",
    "capture": "sglang.srt.model_executor.model_runner_components.attention_backend_setup."
               "configure_aux_hidden_state_capture -> <Model>.set_eagle3_layers_to_capture",
    "model_class": "sglang.srt.model_loader.utils.get_model_architecture",
    "draft": "sglang.srt.models.llama_eagle3.LlamaForCausalLMEagle3",
}
DFLASH_CODE_PATHS = {
    "ids": CODE_PATHS["ids"] + " -> _resolve_dflash_aux_hidden_state (sglang.srt.speculative.dflash_utils."
           "parse_dflash_draft_config, build_target_layer_ids)",
    "capture": "sglang.srt.model_executor.model_runner_components.attention_backend_setup."
               "configure_aux_hidden_state_capture -> <Model>.set_dflash_layers_to_capture",
    "model_class": CODE_PATHS["model_class"],
    "draft": "sglang.srt.models.dflash.DFlashDraftModel.project_target_hidden",
}


class Adapter(Process, Launch, Config, Capture, Target, Batches, ContextWithoutBatch, Draft):
    family = "0.5.22"
