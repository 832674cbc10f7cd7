"""The SGLang 0.4.8 family (0.4.4.post2 - 0.4.8.post1): as the 0.5.3.post1 family, except where
docs/engines-on-cpu.md, 'Runtime set-up per release family', says it differs, each found by
running the releases:
- capture `CaptureWithoutIds`: the draft's aux ids are never read; the capture statement hands the
  model no ids, so the model's own default layers are captured whatever the draft's config says;
- config `ConfigFromTpWorkerStatement`: the ModelConfig built by one statement of
  `TpModelWorker.__init__` (no `ModelConfig.from_server_args` up to 0.4.6.post2);
- launch `UnresolvedArgsWithMultimodalStatement`: `enable_multimodal` set by `__post_init__` in
  0.4.5.post1-0.4.5.post3;
- batches `ForwardBatchWithoutSeqLensCpu`: no `seq_lens_cpu` field in 0.4.4.post2-0.4.4.post3.
Beside the adapter:
- 0.4.5.post3-0.4.6.post4's `ServerArgs.__post_init__` computes with the GPU's memory
  (`gpu_mem = get_device_memory_capacity(self.device)`, None off a GPU, then `gpu_mem <= 81920`):
  the launch resolution (launch.py, any family) answers that query as 24, 80 and 141 GB cards
  would, resolving once per card, and reports the launch only when every card gives the same one
  (gpu_memory.py; else parity's limit naming what the memory decided). The seed resolves there as
  on 0.4.8: 16 draft tokens asked, 2 run, set by `__post_init__` (measured on 0.4.5.post3 and
  0.4.6.post4). The extraction never meets the query (its server args skip `__post_init__`);
- 0.4.4.post4-0.4.5.post1 import `decord` (a CPU video reader) at module level in `utils.py`,
  on the model runner's import path; it installs on a CPU, so it is the real package (the wheels
  require it in `runtime-common`; on-demand builds add it as they add fastapi), not a stand-in;
- the wheels declare fastapi (imported by the `sglang` package itself) and compressed-tensors
  only in their `runtime-common` extra, the latter unpinned; the compressed-tensors of parity's
  template (0.18.0) imports `transformers.masking_utils` (4.53+) while these releases pin
  transformers 4.50-4.52, so their environments take the compressed-tensors published by their
  own release day (parity.ondemand: 0.9.3 for 0.4.4.post4, 0.10.2 for 0.4.8.post1).
No DFlash in these releases: a DFlash draft is their own refusal.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from ..concerns.batches import ForwardBatchWithoutSeqLensCpu
from ..concerns.capture import CaptureWithoutIds
from ..concerns.config import ConfigFromTpWorkerStatement
from ..concerns.context import NoForwardContext
from ..concerns.draft import MidlayerDraft
from ..concerns.launch import UnresolvedArgsWithMultimodalStatement
from ..concerns.process import SingleProcessWithOldTorchNames
from ..concerns.target import RunnerGlobalsBeforeBuild

RELEASES = SpecifierSet(">=0.4.4.post2,<0.4.9")  # the releases this family's adapter serves
VERIFIED = ("0.4.8.post1",)  # releases whose capture and forward were verified against transformers

CODE_PATHS = {
    "ids": "none read: sglang.srt.model_executor.model_runner.ModelRunner.initialize (its `if "
           "self.spec_algorithm.is_eagle3() and (not self.is_draft_worker):` statement) calls "
           "set_eagle3_layers_to_capture() with no ids",
    "capture": "sglang.srt.model_executor.model_runner.ModelRunner.initialize (the same statement) "
               "-> <Model>.set_eagle3_layers_to_capture() (the model's default layers)",
    "model_class": "sglang.srt.model_loader.utils.get_model_architecture",
    "draft": "sglang.srt.models.llama_eagle3.LlamaForCausalLMEagle3",
    "server_args": "sglang.srt.model_executor.model_runner.ModelRunner.__init__ (its "
                   "`global_server_args_dict.update(...)` statement: managers.schedule_batch.global_server_args_dict)",
    "model_config": "sglang.srt.managers.tp_worker.TpModelWorker.__init__ (its `self.model_config = ...` statement)",
}


class Adapter(SingleProcessWithOldTorchNames, UnresolvedArgsWithMultimodalStatement, ConfigFromTpWorkerStatement,
              CaptureWithoutIds, RunnerGlobalsBeforeBuild, ForwardBatchWithoutSeqLensCpu, NoForwardContext,
              MidlayerDraft):
    family = "0.4.8"
    RUNS_DFLASH = False  # no DFlash in these releases: a DFlash draft is their own refusal
