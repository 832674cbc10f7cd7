"""The SGLang 0.4.8 family (0.4.4.post2 - 0.4.8.post1): its adapter.

As the 0.5.3.post1 family (v0_5_3_post1.py: the process-wide server args in
`global_server_args_dict`, filled by the real `ModelRunner.__init__` stopped after its
`update(...)` statement; the runner's own `initialize_dp_attention(...)` statement; the capture
set by one statement of the real `ModelRunner.initialize`), except where docs/engines-on-cpu.md,
'Runtime set-up per release family', says it differs, each found by running the releases:
- the draft's aux ids are never read. The statement of `ModelRunner.initialize` that sets the
  capture, `if self.spec_algorithm.is_eagle3() and not self.is_draft_worker:`, is one call,
  `self.model.set_eagle3_layers_to_capture()`, with no ids: the model's own default layers
  (Llama: `[2, N // 2, N - 3]`) are captured whatever the draft's config says. parity runs that
  statement alone on a runner holding an id recorder (resolve_aux_ids: it must be called with
  no ids, else this family's reading does not fit) and then on a runner holding the real model
  (configure_capture): any ids a caller asks for are never handed to the model, because the
  engine hands none (so no id list can fix a drift on these releases);
- only Llama's model class has `set_eagle3_layers_to_capture` (Qwen3's has none: the statement
  raises AttributeError on a Qwen3 target, as an EAGLE-3 launch of it does);
- the ModelConfig is built by one statement of the real `TpModelWorker.__init__` (`self.model_config
  = ...`), run alone (run_until.run_assignment) with the server args naming the model's
  directory: `ModelConfig(path, trust_remote_code=..., ...)` up to 0.4.6.post2, which have no
  `ModelConfig.from_server_args`, and `ModelConfig.from_server_args(server_args, model_path=...,
  is_draft_model=...)` from 0.4.6.post3, whichever the release has;
- 0.4.5.post1 alone imports `decord` (a video reader) at module level on the model runner's import
  path (`utils.py`), for multimodal inputs no text path reads: a stand-in module that raises when
  used (standins.install);
- the wheels declare fastapi (imported by the `sglang` package itself) and compressed-tensors
  only in their `runtime-common` extra, the latter unpinned; the compressed-tensors of parity's
  template (0.18.0) imports `transformers.masking_utils` (4.53+) while these releases pin
  transformers 4.50-4.52, so their environments take the compressed-tensors published by their
  own release day (parity.ondemand: 0.9.3 for 0.4.4.post4, 0.10.2 for 0.4.8.post1).
"""

from __future__ import annotations

import copy
from typing import Any

from packaging.specifiers import SpecifierSet

from . import v0_5_3_post1, v0_5_7
from .... import standins
from ....run_until import CodePathMoved, require, run_assignment, run_statement

RELEASES = SpecifierSet(">=0.4.4.post2,<0.4.9")  # the releases this family's adapter serves
VERIFIED = ("0.4.8.post1",)  # releases whose capture and forward were verified against transformers

CONFIG_STATEMENT = "model_config"  # the statement of TpModelWorker.__init__ assigning self.model_config
MODULE_STANDINS = ("decord",)  # 0.4.5.post1's `utils.py` imports it at module level (a video reader)

CODE_PATHS = {
    **v0_5_3_post1.CODE_PATHS,
    "ids": "none read: sglang.srt.model_executor.model_runner.ModelRunner.initialize (its "
           f"`if {v0_5_7.READ_AND_CAPTURE}:` statement) calls set_eagle3_layers_to_capture() with no ids",
    "capture": "sglang.srt.model_executor.model_runner.ModelRunner.initialize (the same statement) "
               "-> <Model>.set_eagle3_layers_to_capture() (the model's default layers)",
    "model_config": "sglang.srt.managers.tp_worker.TpModelWorker.__init__ (its `self.model_config = ...` statement)",
}


class _Called:
    """The runner's `model` while the capture statement runs with it: it keeps the arguments
    of each `set_eagle3_layers_to_capture` call; anything else asked of it raises."""

    def __init__(self):
        self.calls: list[tuple[tuple, dict]] = []

    def set_eagle3_layers_to_capture(self, *args, **kwargs):
        self.calls.append((args, kwargs))

    def __getattr__(self, name):
        raise AttributeError(f"parity's call recorder: the engine's capture statement asked the model for "
                             f"{name!r}, which this family's adapter does not expect")


class Adapter(v0_5_3_post1.Adapter):
    family = "0.4.8"
    REQUIRES = tuple(name for name in v0_5_3_post1.Adapter.REQUIRES
                     if not name.endswith("ModelConfig.from_server_args")) + (
        "sglang.srt.managers.tp_worker.TpModelWorker.__init__",
    )

    def before_engine_imports(self) -> None:
        standins.install(*MODULE_STANDINS)
        super().before_engine_imports()

    def check_code_paths(self) -> None:
        self.before_engine_imports()
        require("sglang.srt.speculative.spec_info.SpeculativeAlgorithm.EAGLE3")
        super().check_code_paths()

    def ids_never_read(self, version: str) -> str | None:
        return (f"sglang {version}'s ModelRunner.initialize calls set_eagle3_layers_to_capture() with no ids, "
                "so every draft is fed the model's default layers whatever its config says")

    # -- config reading -------------------------------------------------------------

    def model_config(self, model_dir: str, is_draft: bool = False):
        """The statement of the real `TpModelWorker.__init__` that builds its ModelConfig, run alone
        with server args naming `model_dir` (the draft's path when `is_draft`)."""
        from sglang.srt.managers.tp_worker import TpModelWorker

        args = copy.copy(self.server_args)
        if is_draft:
            args.speculative_draft_model_path = model_dir
        else:
            args.model_path = model_dir
        worker = TpModelWorker.__new__(TpModelWorker)
        run_assignment(TpModelWorker.__init__, CONFIG_STATEMENT, worker, server_args=args, is_draft_worker=is_draft)
        return worker.model_config

    def _capture_statement(self, model) -> None:
        from sglang.srt.model_executor.model_runner import ModelRunner
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        runner = ModelRunner.__new__(ModelRunner)
        runner.model = model
        runner.spec_algorithm = SpeculativeAlgorithm.from_string(self.server_args.speculative_algorithm)
        runner.is_draft_worker = False
        runner.server_args = self.server_args
        run_statement(ModelRunner.initialize, v0_5_7.READ_AND_CAPTURE, runner, server_args=self.server_args)

    def resolve_aux_ids(self, target_config) -> tuple[bool, Any]:
        """The capture statement of the real `ModelRunner.initialize`, run alone on a call recorder:
        (True, None) when it calls `set_eagle3_layers_to_capture()` with no ids, as this family does."""
        recorder = _Called()
        self._capture_statement(recorder)
        if not recorder.calls:
            return False, None
        args, kwargs = recorder.calls[-1]
        if args or kwargs:
            raise CodePathMoved(f"ModelRunner.initialize hands set_eagle3_layers_to_capture {args or kwargs}; "
                                "the 0.4.8-family adapter assumes it hands no ids")
        return True, None

    def configure_capture(self, model, use_aux: bool, ids) -> None:
        """The same statement on a runner holding the real model: `ids` are never handed to it
        (the engine hands none), so every id list captures the model's default layers."""
        if use_aux:
            self._capture_statement(model)
