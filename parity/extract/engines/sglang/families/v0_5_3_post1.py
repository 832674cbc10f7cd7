"""The SGLang 0.5.3.post1 family (0.4.9 - 0.5.3.post1): as the 0.5.3 family, except
(docs/engines-on-cpu.md, 'Runtime set-up per release family'):
- launch `UnresolvedArgsInRunnerGlobals` and target `RunnerGlobalsBeforeBuild`: there is no
  `set_global_server_args_for_scheduler`; the process-wide server args are the dict
  `global_server_args_dict`, filled by the real `ModelRunner.__init__` before a model is built
  (with, for an MLA model, the runner's MLA backend and the phase backends it publishes);
- process `SingleProcessWithOldTorchNames`: the torch and triton names these releases import that
  parity's torch and triton renamed or removed.
No DFlash in these releases: a DFlash draft is their own refusal.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.batches import DefaultBackendByServerArgs
from ..concerns.capture import IdsAndCaptureByInitializeStatement
from ..concerns.config import Config
from ..concerns.context import NoForwardContext
from ..concerns.draft import MidlayerDraft
from ..concerns.launch import UnresolvedArgsInRunnerGlobals
from ..concerns.process import SingleProcessWithOldTorchNames
from ..concerns.target import RunnerGlobalsBeforeBuild

RELEASES = SpecifierSet(">=0.4.9,<0.5.3.post2")  # the releases this family's adapter serves
VERIFIED = ("0.5.3.post1",)  # releases whose capture and forward were verified against transformers

CODE_PATHS = {
    "ids": "sglang.srt.model_executor.model_runner.ModelRunner.initialize (its `if "
           "self.spec_algorithm.is_eagle3() and (not self.is_draft_worker):` statement: "
           "eagle_config['eagle_aux_hidden_state_layer_ids'] under a bare except:)",
    "capture": "sglang.srt.model_executor.model_runner.ModelRunner.initialize (the same statement) "
               "-> <Model>.set_eagle3_layers_to_capture",
    "model_class": "sglang.srt.model_loader.utils.get_model_architecture",
    "draft": "sglang.srt.models.llama_eagle3.LlamaForCausalLMEagle3",
    "server_args": "sglang.srt.model_executor.model_runner.ModelRunner.__init__ (its "
                   "`global_server_args_dict.update(...)` statement: managers.schedule_batch.global_server_args_dict)",
}


class Adapter(SingleProcessWithOldTorchNames, UnresolvedArgsInRunnerGlobals, Config,
              IdsAndCaptureByInitializeStatement, RunnerGlobalsBeforeBuild, DefaultBackendByServerArgs,
              NoForwardContext, MidlayerDraft):
    family = "0.5.3.post1"
    RUNS_DFLASH = False  # no DFlash in these releases: a DFlash draft is their own refusal
