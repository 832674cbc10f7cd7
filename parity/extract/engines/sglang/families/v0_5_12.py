"""The SGLang 0.5.12 family (0.5.11 to 0.5.12): as the 0.5.14 family, except that there is no
`forward_context.py` (docs/engines-on-cpu.md, 'Runtime set-up per release family'): context
`NoForwardContext` (the backend and the KV pool ride on the ForwardBatch, and the code paths say
the module is absent). DFlash (0.5.12 has DFLASH; 0.5.11 is answered by its own
SpeculativeAlgorithm): as the 0.5.14 family's, capture `IdsReadByRunnerInit`.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.batches import DefaultBackendByServerArgs
from ..concerns.capture import IdsReadByRunnerInit
from ..concerns.config import Config
from ..concerns.context import NoForwardContext
from ..concerns.draft import EmbedAndHeadFromTarget
from ..concerns.launch import ArgsForScheduler
from ..concerns.process import SingleProcess
from ..concerns.target import DpAttentionOnCpuCopy

RELEASES = SpecifierSet(">=0.5.11,<0.5.13")  # the releases this family's adapter serves
VERIFIED = ("0.5.12.post1",)  # releases whose capture and forward were verified against transformers

CODE_PATHS = {
    "ids": "sglang.srt.model_executor.model_runner.ModelRunner.__init__ "
           "(eagle_config['eagle_aux_hidden_state_layer_ids'] under a bare except:)",
    "capture": "sglang.srt.model_executor.model_runner.ModelRunner.init_aux_hidden_state_capture "
               "-> <Model>.set_eagle3_layers_to_capture",
    "model_class": "sglang.srt.model_loader.utils.get_model_architecture",
    "draft": "sglang.srt.models.llama_eagle3.LlamaForCausalLMEagle3",
}
DFLASH_CODE_PATHS = {
    "ids": "sglang.srt.model_executor.model_runner.ModelRunner.__init__ (under is_dflash(): "
           "sglang.srt.speculative.dflash_utils.parse_dflash_draft_config, resolve_target_layer_ids)",
    "capture": "sglang.srt.model_executor.model_runner.ModelRunner.init_aux_hidden_state_capture "
               "-> <Model>.set_dflash_layers_to_capture",
    "model_class": CODE_PATHS["model_class"],
    "draft": "sglang.srt.models.dflash.DFlashDraftModel.project_target_hidden",
}


class Adapter(SingleProcess, ArgsForScheduler, Config, IdsReadByRunnerInit, DpAttentionOnCpuCopy,
              DefaultBackendByServerArgs, NoForwardContext, EmbedAndHeadFromTarget):
    family = "0.5.12"
