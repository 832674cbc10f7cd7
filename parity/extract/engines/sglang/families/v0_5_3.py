"""The SGLang 0.5.3 family (0.5.3.post2 - 0.5.3.post3): as the 0.5.7 family, except that
`ServerArgs.__post_init__` has no skip for `model_path="dummy"` (0.5.4 added it): launch
`UnresolvedArgsForScheduler` (the dataclass's declared defaults, `__post_init__` not run;
docs/engines-on-cpu.md, 'Runtime set-up per release family').
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.batches import DefaultBackendByServerArgs
from ..concerns.capture import IdsAndCaptureByInitializeStatement
from ..concerns.config import Config
from ..concerns.context import NoForwardContext
from ..concerns.draft import MidlayerDraft
from ..concerns.launch import UnresolvedArgsForScheduler
from ..concerns.process import SingleProcessWithLayersAsOnGpu
from ..concerns.target import DpAttentionOnCpuCopy

RELEASES = SpecifierSet(">=0.5.3.post2,<0.5.4")  # the releases this family's adapter serves
VERIFIED = ("0.5.3.post3",)  # releases whose capture and forward were verified against transformers

CODE_PATHS = {
    "ids": "sglang.srt.model_executor.model_runner.ModelRunner.initialize (its `if "
           "self.spec_algorithm.is_eagle3() and (not self.is_draft_worker):` statement: "
           "eagle_config['eagle_aux_hidden_state_layer_ids'] under a bare except:)",
    "capture": "sglang.srt.model_executor.model_runner.ModelRunner.initialize (the same statement) "
               "-> <Model>.set_eagle3_layers_to_capture",
    "model_class": "sglang.srt.model_loader.utils.get_model_architecture",
    "draft": "sglang.srt.models.llama_eagle3.LlamaForCausalLMEagle3",
}


class Adapter(SingleProcessWithLayersAsOnGpu, UnresolvedArgsForScheduler, Config, IdsAndCaptureByInitializeStatement,
              DpAttentionOnCpuCopy, DefaultBackendByServerArgs, NoForwardContext, MidlayerDraft):
    family = "0.5.3"
    RUNS_DFLASH = False  # no DFlash in these releases: a DFlash draft is their own refusal
