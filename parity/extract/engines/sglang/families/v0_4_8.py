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
- in 0.4.5.post1-0.4.5.post3 `ServerArgs.enable_multimodal`, which `TpModelWorker.__init__`'s
  statement reads, is no dataclass field but set by one statement of `__post_init__` (from
  `enable_llama4_multimodal`), which parity's unresolved server args do not run: that statement
  alone is run (run_until.run_assignment);
- 0.4.5.post3-0.4.6.post4's `ServerArgs.__post_init__` computes with the GPU's memory
  (`gpu_mem = get_device_memory_capacity(self.device)`, None off a GPU, then `gpu_mem <= 81920`):
  the launch resolution (launch.py, any family) answers that query as 24, 80 and 141 GB cards
  would, resolving once per card, and reports the launch only when every card gives the same one
  (gpu_memory.py; else parity's limit naming what the memory decided). The seed resolves there as
  on 0.4.8: 16 draft tokens asked, 2 run, set by `__post_init__` (measured on 0.4.5.post3 and
  0.4.6.post4). The extraction never meets the query (its server args skip `__post_init__`);
- `ForwardBatch` has no `seq_lens_cpu` field in 0.4.4.post2-0.4.4.post3 (added in 0.4.4.post4;
  nothing on the CPU path reads it there): a batch is built without it where the dataclass
  does not declare it;
- the ModelConfig is built by one statement of the real `TpModelWorker.__init__` (`self.model_config
  = ...`), run alone (run_until.run_assignment) with the server args naming the model's
  directory: `ModelConfig(path, trust_remote_code=..., ...)` up to 0.4.6.post2, which have no
  `ModelConfig.from_server_args`, and `ModelConfig.from_server_args(server_args, model_path=...,
  is_draft_model=...)` from 0.4.6.post3, whichever the release has;
- 0.4.4.post4-0.4.5.post1 import `decord` (a CPU video reader) at module level in `utils.py`,
  on the model runner's import path; it installs on a CPU, so it is the real package (the wheels
  require it in `runtime-common`; on-demand builds add it as they add fastapi), not a stand-in;
- the wheels declare fastapi (imported by the `sglang` package itself) and compressed-tensors
  only in their `runtime-common` extra, the latter unpinned; the compressed-tensors of parity's
  template (0.18.0) imports `transformers.masking_utils` (4.53+) while these releases pin
  transformers 4.50-4.52, so their environments take the compressed-tensors published by their
  own release day (parity.ondemand: 0.9.3 for 0.4.4.post4, 0.10.2 for 0.4.8.post1).

Composed of: its own `Launch` (its code paths, `enable_multimodal`), `Config` (the
`TpModelWorker` statement), `Capture` (no ids) and `Batches` (`seq_lens_cpu`), then the
0.5.3.post1 family's `Launch` and `Globals`, v0_5_3.UnresolvedArgs, v0_5_7.Launch, v0_5_10.Launch
and .Draft, v0_5_12.NoForwardContext, the 0.5.14 family's `Launch`, `DpAttention`,
`DefaultBackend` and `Draft`, ahead of the 0.5.23 adapter.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
from typing import Any

from packaging.specifiers import SpecifierSet

from . import v0_5_3, v0_5_3_post1, v0_5_7, v0_5_10, v0_5_12, v0_5_14, v0_5_23
from ....run_until import CodePathMoved, find_statement, require, run_assignment, run_statement

RELEASES = SpecifierSet(">=0.4.4.post2,<0.4.9")  # the releases this family's adapter serves
VERIFIED = ("0.4.8.post1",)  # releases whose capture and forward were verified against transformers

CAPTURE_CALL = "self.model.set_eagle3_layers_to_capture"  # the capture statement's one call
CONFIG_STATEMENT = "model_config"  # the statement of TpModelWorker.__init__ assigning self.model_config

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


class Launch:
    """The code paths (the capture statement hands no ids) and the server args' `enable_multimodal`."""

    def check_code_paths(self) -> None:
        """As the 0.5.3.post1 family's, and: the capture statement's one call of
        `self.model.set_eagle3_layers_to_capture` hands it nothing (a release whose statement
        hands ids, as 0.4.9's does, reads them and does not fit this family)."""
        self.before_engine_imports()
        require("sglang.srt.speculative.spec_info.SpeculativeAlgorithm.EAGLE3")
        super().check_code_paths()
        from sglang.srt.model_executor.model_runner import ModelRunner

        statement = find_statement(ModelRunner.initialize, v0_5_7.READ_AND_CAPTURE)
        calls = [node for node in ast.walk(statement)
                 if isinstance(node, ast.Call) and ast.unparse(node.func) == CAPTURE_CALL]
        if len(calls) != 1 or calls[0].args or calls[0].keywords:
            raise CodePathMoved(f"the `if {v0_5_7.READ_AND_CAPTURE}:` statement of ModelRunner.initialize makes "
                                f"{[ast.unparse(c) for c in calls]}; the 0.4.8-family adapter assumes one "
                                f"{CAPTURE_CALL}() that hands no ids")

    def _server_args(self, draft_dir: str | None, backend: str, device: str | None = None):
        """As the 0.5.3 family's (declared defaults, `__post_init__` not run), and: where
        `enable_multimodal` is no field but set by `__post_init__` (0.4.5.post1-0.4.5.post3:
        `self.enable_multimodal = self.enable_llama4_multimodal`, which `TpModelWorker.__init__`
        reads), that one statement of the real `__post_init__`, run alone."""
        from sglang.srt.server_args import ServerArgs

        args = super()._server_args(draft_dir, backend, device)
        if "enable_multimodal" not in {f.name for f in dataclasses.fields(ServerArgs)}:
            try:
                run_assignment(ServerArgs.__post_init__, "enable_multimodal", args)
            except CodePathMoved:  # not set there either: nothing this release runs reads it
                pass
        return args


class Config:
    """The ModelConfig built by one statement of the real `TpModelWorker.__init__`."""

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


class Capture:
    """No ids read: the capture statement of the real `ModelRunner.initialize` hands none."""

    def ids_never_read(self, version: str) -> str | None:
        return (f"sglang {version}'s ModelRunner.initialize calls set_eagle3_layers_to_capture() with no ids, "
                "so every draft is fed the model's default layers whatever its config says")

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


class Batches:
    """`seq_lens_cpu` only where this release's ForwardBatch declares it."""

    def batch_fields(self, **fields) -> dict:
        """`seq_lens_cpu` only where this release's ForwardBatch declares it (0.4.4.post4 on)."""
        from sglang.srt.model_executor.forward_batch_info import ForwardBatch

        declared = {f.name for f in dataclasses.fields(ForwardBatch)}
        if "seq_lens_cpu" not in declared:
            fields.pop("seq_lens_cpu", None)
        return fields


class Adapter(Launch, Config, Capture, Batches, v0_5_3_post1.Launch, v0_5_3_post1.Globals, v0_5_3.UnresolvedArgs,
              v0_5_7.Launch, v0_5_10.Launch, v0_5_10.Draft, v0_5_12.NoForwardContext, v0_5_14.Launch,
              v0_5_14.DpAttention, v0_5_14.DefaultBackend, v0_5_14.Draft, v0_5_23.Adapter):
    family = "0.4.8"
    RUNS_DFLASH = False  # no DFlash in these releases: a DFlash draft is their own refusal (v0_5_14.py)
    REQUIRES = tuple(name for name in v0_5_3_post1.Adapter.REQUIRES
                     if not name.endswith("ModelConfig.from_server_args")) + (
        "sglang.srt.managers.tp_worker.TpModelWorker.__init__",
    )
