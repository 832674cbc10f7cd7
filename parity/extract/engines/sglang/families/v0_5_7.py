"""The SGLang 0.5.7 family (0.5.4 - 0.5.7): its adapter.

As the 0.5.10 family (v0_5_10.py: no forward context, the `sgl_kernel.kvcacheio` stand-in,
the draft's one decoder layer `model.midlayer`, the rotary embedding's device lookup in
`layers/rotary_embedding.py` or nowhere), except where docs/engines-on-cpu.md, 'Runtime set-up
per release family', says it differs:
- the draft's aux ids are neither read in `ModelRunner.__init__` nor kept on the runner: one
  statement near the end of the real `ModelRunner.initialize`,
  `if self.spec_algorithm.is_eagle3() and not self.is_draft_worker:`, builds the draft's
  ModelConfig from the server args, reads `eagle_config["eagle_aux_hidden_state_layer_ids"]`
  under a bare `except:` (None on any failure) and calls
  `self.model.set_eagle3_layers_to_capture(ids)`. parity runs exactly that statement of the
  installed method (run_until.run_statement) on a bare runner whose `model` records the ids it
  is handed (the reading is the engine's; nothing else of the model is touched), then hands
  those ids to the real model's `set_eagle3_layers_to_capture`, as the statement's last line
  does. So every EAGLE-3 launch captures: there is no "no aux states" path in this family;
- off CUDA, `layers/activation.py` and `layers/layernorm.py` re-bind `SiluAndMul`, `GeluAndMul`,
  `RMSNorm` and `GemmaRMSNorm` to vLLM's classes at import time (a top-level
  `if not (_is_cuda or ...): from vllm... import ...`). A GPU launch keeps SGLang's own, so
  parity imports those two modules without that one statement (run_until.import_as_on_gpu);
  the classes' own dispatch then picks their CPU-native forward, as for every other layer.

Composed of: its own `Launch` (the on-GPU imports; its code paths) and `Capture` (ids read and
capture set by the `initialize` statement), then v0_5_10.Launch and .Draft,
v0_5_12.NoForwardContext, the 0.5.14 family's `Launch`, `SchedulerArgs`, `DpAttention`,
`DefaultBackend` and `Draft`, ahead of the 0.5.23 adapter. The older families take this file's parts.
"""

from __future__ import annotations

from typing import Any

from packaging.specifiers import SpecifierSet

from . import v0_5_10, v0_5_12, v0_5_14, v0_5_23
from .... import standins
from ....run_until import find_statement, import_as_on_gpu, require, run_statement

RELEASES = SpecifierSet(">=0.5.4,<0.5.8")  # the releases this family's adapter serves
VERIFIED = ("0.5.7",)  # releases whose capture and forward were verified against transformers

ON_GPU = ("sglang.srt.layers.activation", "sglang.srt.layers.layernorm")  # their vLLM fallback left out
READ_AND_CAPTURE = "self.spec_algorithm.is_eagle3() and (not self.is_draft_worker)"  # its `if`, as ast writes it

CODE_PATHS = {
    **v0_5_10.CODE_PATHS,
    "ids": "sglang.srt.model_executor.model_runner.ModelRunner.initialize (its "
           f"`if {READ_AND_CAPTURE}:` statement: eagle_config['eagle_aux_hidden_state_layer_ids'] "
           "under a bare except:)",
    "capture": "sglang.srt.model_executor.model_runner.ModelRunner.initialize (the same statement) "
               "-> <Model>.set_eagle3_layers_to_capture",
}


class _HandedIds:
    """The runner's `model` while the reading statement runs: it keeps what the statement
    hands `set_eagle3_layers_to_capture`. Anything else asked of it raises, so a statement
    that came to use the model for more than that is loud."""

    def __init__(self):
        self.calls: list[Any] = []

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.calls.append(layer_ids)

    def __getattr__(self, name):
        raise AttributeError(f"parity's id recorder: the engine's reading statement asked the model for "
                             f"{name!r}, which this family's adapter does not expect")


class Launch:
    """The modules whose off-CUDA fallback re-binds SGLang's layers to vLLM's imported as on a GPU,
    before anything imports a model; the code paths (this family's own list: the reading statement)."""

    def check_code_paths(self) -> None:
        self.before_engine_imports()
        v0_5_14.give_standin_interpolation_modes()
        from sglang.srt.model_executor.model_runner import ModelRunner

        require(*self.REQUIRES)
        find_statement(ModelRunner.initialize, READ_AND_CAPTURE)

    def before_engine_imports(self) -> None:
        """The kernel-module stand-in, then the modules whose off-CUDA fallback re-binds SGLang's
        layers to vLLM's imported without it: before anything imports a model or layer module."""
        standins.install(*v0_5_10.KERNEL_STANDINS)
        for name in ON_GPU:
            import_as_on_gpu(name, package="vllm")

    def setup(self, port: int, draft_dir: str | None, device: str = "cpu") -> None:
        self.before_engine_imports()
        super().setup(port, draft_dir, device)


class Capture:
    """The aux ids read, and the capture set, by one statement of the real `ModelRunner.initialize`."""

    def resolve_aux_ids(self, target_config) -> tuple[bool, Any]:
        """The reading statement of the real `ModelRunner.initialize`, run alone."""
        from sglang.srt.model_executor.model_runner import ModelRunner
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        runner = ModelRunner.__new__(ModelRunner)
        runner.model = recorder = _HandedIds()
        runner.spec_algorithm = SpeculativeAlgorithm.from_string(self.server_args.speculative_algorithm)
        runner.is_draft_worker = False
        runner.server_args = self.server_args
        run_statement(ModelRunner.initialize, READ_AND_CAPTURE, runner, server_args=self.server_args)
        if not recorder.calls:
            return False, None
        return True, recorder.calls[-1]

    def configure_capture(self, model, use_aux: bool, ids) -> None:
        """The statement's last line, `self.model.set_eagle3_layers_to_capture(ids)`, on the real model."""
        if use_aux:
            model.set_eagle3_layers_to_capture(ids)


class Adapter(Launch, Capture, v0_5_10.Launch, v0_5_10.Draft, v0_5_12.NoForwardContext, v0_5_14.Launch,
              v0_5_14.SchedulerArgs, v0_5_14.DpAttention, v0_5_14.DefaultBackend, v0_5_14.Draft, v0_5_23.Adapter):
    family = "0.5.7"
    RUNS_DFLASH = False  # no DFlash in these releases: a DFlash draft is their own refusal (v0_5_14.py)
    REQUIRES = v0_5_10.Adapter.REQUIRES
