"""The SGLang 0.5.10 family (0.5.8 - 0.5.10.post1): as the 0.5.12 family, except
(docs/engines-on-cpu.md, 'Runtime set-up per release family'):
- capture `CaptureSetByInitializeStatement`: no `ModelRunner.init_aux_hidden_state_capture`; the
  capture is set by one statement of the real `ModelRunner.initialize`;
- process `SingleProcessWithKvCacheStandin`: the host KV-cache module imports
  `sgl_kernel.kvcacheio` on a CPU; the rotary embedding's device lookup moves between releases;
  the MoE and rope stand-ins (0.5.0rc0-0.5.10.post1);
- draft `MidlayerDraft`: the EAGLE-3 draft's one decoder layer is `model.midlayer`.
No DFlash in these releases: a DFlash draft is their own refusal.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.batches import DefaultBackendByServerArgs
from ..concerns.capture import CaptureSetByInitializeStatement
from ..concerns.config import Config
from ..concerns.context import NoForwardContext
from ..concerns.draft import MidlayerDraft
from ..concerns.launch import ArgsForScheduler
from ..concerns.process import SingleProcessWithKvCacheStandin
from ..concerns.target import DpAttentionOnCpuCopy

RELEASES = SpecifierSet(">=0.5.8,<0.5.11")  # the releases this family's adapter serves
VERIFIED = ("0.5.10",)  # releases whose capture and forward were verified against transformers

CODE_PATHS = {
    "ids": "sglang.srt.model_executor.model_runner.ModelRunner.__init__ "
           "(eagle_config['eagle_aux_hidden_state_layer_ids'] under a bare except:)",
    "capture": "sglang.srt.model_executor.model_runner.ModelRunner.initialize (its `if "
               "self.eagle_use_aux_hidden_state:` statement) -> <Model>.set_eagle3_layers_to_capture",
    "model_class": "sglang.srt.model_loader.utils.get_model_architecture",
    "draft": "sglang.srt.models.llama_eagle3.LlamaForCausalLMEagle3",
}


class Adapter(SingleProcessWithKvCacheStandin, ArgsForScheduler, Config, CaptureSetByInitializeStatement,
              DpAttentionOnCpuCopy, DefaultBackendByServerArgs, NoForwardContext, MidlayerDraft):
    family = "0.5.10"
    RUNS_DFLASH = False  # no DFlash in these releases: a DFlash draft is their own refusal
