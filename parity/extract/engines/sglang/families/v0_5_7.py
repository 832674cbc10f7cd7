"""The SGLang 0.5.7 family (0.5.4 - 0.5.7): as the 0.5.10 family, except
(docs/engines-on-cpu.md, 'Runtime set-up per release family'):
- capture `IdsAndCaptureByInitializeStatement`: the draft's aux ids are neither read in
  `ModelRunner.__init__` nor kept on the runner: one statement of the real
  `ModelRunner.initialize` reads them and sets the capture;
- process `SingleProcessWithLayersAsOnGpu`: off CUDA, SGLang's activation and norm modules re-bind
  its layers to vLLM's at import time, so they are imported as on a GPU.
No DFlash in these releases: a DFlash draft is their own refusal.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.batches import DefaultBackendByServerArgs
from ..concerns.capture import IdsAndCaptureByInitializeStatement
from ..concerns.config import Config
from ..concerns.context import NoForwardContext
from ..concerns.draft import MidlayerDraft
from ..concerns.launch import ArgsForScheduler
from ..concerns.process import SingleProcessWithLayersAsOnGpu
from ..concerns.target import DpAttentionOnCpuCopy

RELEASES = SpecifierSet(">=0.5.4,<0.5.8")  # the releases this family's adapter serves
VERIFIED = ("0.5.7",)  # releases whose capture and forward were verified against transformers

CODE_PATHS = {
    "ids": "sglang.srt.model_executor.model_runner.ModelRunner.initialize (its `if "
           "self.spec_algorithm.is_eagle3() and (not self.is_draft_worker):` statement: "
           "eagle_config['eagle_aux_hidden_state_layer_ids'] under a bare except:)",
    "capture": "sglang.srt.model_executor.model_runner.ModelRunner.initialize (the same statement) "
               "-> <Model>.set_eagle3_layers_to_capture",
    "model_class": "sglang.srt.model_loader.utils.get_model_architecture",
    "draft": "sglang.srt.models.llama_eagle3.LlamaForCausalLMEagle3",
}


class Adapter(SingleProcessWithLayersAsOnGpu, ArgsForScheduler, Config, IdsAndCaptureByInitializeStatement,
              DpAttentionOnCpuCopy, DefaultBackendByServerArgs, NoForwardContext, MidlayerDraft):
    family = "0.5.7"
    RUNS_DFLASH = False  # no DFlash in these releases: a DFlash draft is their own refusal
