"""The SGLang 0.5.14 family (0.5.13 to 0.5.15): what differs from 0.5.23 (docs/engines-on-cpu.md,
'Runtime set-up per release family'), each concern's variant saying why:
- process `SingleProcess`: no runtime context yet; its draft's `set_embed` calls
  `torch.cuda.synchronize()` unconditionally;
- launch `ArgsForScheduler`: `__post_init__` resolves the launch by assignment (no `resolve_once`),
  the server args published with `set_global_server_args_for_scheduler`;
- capture `IdsReadByRunnerInit`: the ids read inline in `ModelRunner.__init__` under a bare
  `except:` (no `spec_aux_hidden_state` module), the capture by
  `ModelRunner.init_aux_hidden_state_capture`; DFlash (DFLASH, no DSPARK) read the same way;
- target `DpAttentionOnCpuCopy`: `initialize_dp_attention` before a model is built;
- batches `DefaultBackendByServerArgs`; context `ContextWithoutBatch` (`forward_context(...)`
  takes no batch); draft `EmbedAndHeadFromTarget` (`get_embed_and_head()`).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.batches import DefaultBackendByServerArgs
from ..concerns.capture import IdsReadByRunnerInit
from ..concerns.config import Config
from ..concerns.context import ContextWithoutBatch
from ..concerns.draft import EmbedAndHeadFromTarget
from ..concerns.launch import ArgsForScheduler
from ..concerns.process import SingleProcess
from ..concerns.target import DpAttentionOnCpuCopy

RELEASES = SpecifierSet(">=0.5.13,<0.5.16")  # the releases this family's adapter serves
VERIFIED = ("0.5.14",)  # releases whose capture and forward were verified against transformers

CODE_PATHS = {
    "ids": "sglang.srt.model_executor.model_runner.ModelRunner.__init__ "
           "(eagle_config['eagle_aux_hidden_state_layer_ids'] under a bare except:)",
    "capture": "sglang.srt.model_executor.model_runner.ModelRunner.init_aux_hidden_state_capture "
               "-> <Model>.set_eagle3_layers_to_capture",
    "model_class": "sglang.srt.model_loader.utils.get_model_architecture",
    "draft": "sglang.srt.models.llama_eagle3.LlamaForCausalLMEagle3",
}
# The same keys for a DFlash draft (served under DFLASH).
DFLASH_CODE_PATHS = {
    "ids": "sglang.srt.model_executor.model_runner.ModelRunner.__init__ (under is_dflash(): "
           "sglang.srt.speculative.dflash_utils.parse_dflash_draft_config, resolve_target_layer_ids)",
    "capture": "sglang.srt.model_executor.model_runner.ModelRunner.init_aux_hidden_state_capture "
               "-> <Model>.set_dflash_layers_to_capture",
    "model_class": CODE_PATHS["model_class"],
    "draft": "sglang.srt.models.dflash.DFlashDraftModel.project_target_hidden",
}


class Adapter(SingleProcess, ArgsForScheduler, Config, IdsReadByRunnerInit, DpAttentionOnCpuCopy,
              DefaultBackendByServerArgs, ContextWithoutBatch, EmbedAndHeadFromTarget):
    family = "0.5.14"
