"""The capture concern: where the draft's aux ids are read (under the algorithm served) and how
the target's capture of them is set up, as the engine's model runner does at start-up; the names
a DFlash extraction runs and where it reads the DFlash ids.

- `Capture` (0.5.16 on): the ids resolved by
  `model_runner_components.spec_aux_hidden_state.resolve_spec_aux_hidden_state_config` (from 0.5.19
  it reads the speculative settings through `get_spec()`), the capture configured by
  `attention_backend_setup.configure_aux_hidden_state_capture`. Under DFlash the same resolver
  reads the draft's `target_layer_ids` (its `dflash_config`'s, else the top level, as
  `parse_dflash_draft_config` reads them), else `build_target_layer_ids(N, draft layers)`
  (`_resolve_dflash_aux_hidden_state`), and the capture hands them to the target's
  `set_dflash_layers_to_capture` (`set_dspark_layers_to_capture` under DSPARK); the draft class
  (`DFlashDraftModel`) takes their concatenation in `project_target_hidden`. A release of 0.5.16-0.5.20
  whose resolver or capture lacks a name this runs (`SpeculativeAlgorithm.is_dflash_family`, the
  `is_dspark` argument) says so as a code path moved (parity's limit), never as the release's answer.
- `IdsReadByRunnerInit` (0.5.11-0.5.15): the ids read inline in `ModelRunner.__init__`, under a
  bare `except:` (no `spec_aux_hidden_state` module): the real `__init__` runs on a fresh
  `ModelRunner` and stops right after the statement that reads them (run_until.py), so the
  engine's own reading code, `except:` included, decides the ids; the capture configured by the
  real `ModelRunner.init_aux_hidden_state_capture` on a bare runner holding only the model and the
  ids. DFlash (0.5.12-0.5.15; no DSPARK and no `is_dflash_family()` yet, so whether an algorithm
  is DFlash is its own `is_dflash()`): its ids are read in `__init__` too, a statement after the
  EAGLE-3 one (`parse_dflash_draft_config`, then `resolve_target_layer_ids(N, draft layers)`), and
  the real `init_aux_hidden_state_capture` on a runner holding them hands them to
  `set_dflash_layers_to_capture`.
- `CaptureSetByInitializeStatement` (0.5.8-0.5.10): the ids as `IdsReadByRunnerInit`; there is no
  `ModelRunner.init_aux_hidden_state_capture`: the capture is set by one statement near the end of
  the real `ModelRunner.initialize` (`if self.eagle_use_aux_hidden_state:
  self.model.set_eagle3_layers_to_capture(ids)`), the rest of which is the GPU start-up; exactly
  that statement runs (run_until.run_statement) on a bare runner holding the model and the ids.
- `IdsAndCaptureByInitializeStatement` (0.4.9-0.5.7): the ids are neither read in
  `ModelRunner.__init__` nor kept on the runner: one statement near the end of the real
  `ModelRunner.initialize`, `if self.spec_algorithm.is_eagle3() and not self.is_draft_worker:`,
  builds the draft's ModelConfig from the server args, reads
  `eagle_config["eagle_aux_hidden_state_layer_ids"]` under a bare `except:` (None on any failure)
  and calls `self.model.set_eagle3_layers_to_capture(ids)`. That statement runs alone on a bare
  runner whose `model` records the ids it is handed (the reading is the engine's; nothing else of
  the model is touched), and those ids go to the real model's `set_eagle3_layers_to_capture`, as
  the statement's last line does. So every EAGLE-3 launch captures: there is no "no aux states" path.
- `CaptureWithoutIds` (0.4.4.post2-0.4.8): the draft's aux ids are never read. The same statement
  is one call, `self.model.set_eagle3_layers_to_capture()`, with no ids: the model's own default
  layers (Llama: `[2, N // 2, N - 3]`) are captured whatever the draft's config says. The statement
  runs alone on a runner holding a call recorder (resolve_aux_ids: it must be called with no ids,
  else this variant's reading does not fit) and then on a runner holding the real model
  (configure_capture): any ids a caller asks for are never handed to the model, because the engine
  hands none (so no id list can fix a drift on these releases). Only Llama's model class has
  `set_eagle3_layers_to_capture` there (Qwen3's has none: the statement raises AttributeError on a
  Qwen3 target, as an EAGLE-3 launch of it does).
"""

from __future__ import annotations

import ast
from typing import Any

from ....run_until import CodePathMoved, find_statement, run_statement, run_until_after, stop_line

# where __init__ reads the DFlash ids (its test as ast.unparse spells it, as find_statement compares)
DFLASH_READ = "self.spec_algorithm.is_dflash() and (not self.is_draft_worker)"
CAPTURE_TEST = "self.eagle_use_aux_hidden_state"  # the `if` of ModelRunner.initialize that sets the capture
READ_AND_CAPTURE = "self.spec_algorithm.is_eagle3() and (not self.is_draft_worker)"  # its `if`, as ast writes it
CAPTURE_CALL = "self.model.set_eagle3_layers_to_capture"  # the capture statement's one call (CaptureWithoutIds)

# What the families whose capture is `Capture` (0.5.16 on) record it ran, by role (their CODE_PATHS
# and DFLASH_CODE_PATHS, in every contract they write).
CODE_PATHS = {
    "ids": "sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state."
           "resolve_spec_aux_hidden_state_config",
    "capture": "sglang.srt.model_executor.model_runner_components.attention_backend_setup."
               "configure_aux_hidden_state_capture -> <Model>.set_eagle3_layers_to_capture",
    "model_class": "sglang.srt.model_loader.utils.get_model_architecture",
    "draft": "sglang.srt.models.llama_eagle3.LlamaForCausalLMEagle3",
}
DFLASH_CODE_PATHS = {
    "ids": CODE_PATHS["ids"] + " -> _resolve_dflash_aux_hidden_state (sglang.srt.speculative.dflash_utils."
           "parse_dflash_draft_config, build_target_layer_ids)",
    "capture": "sglang.srt.model_executor.model_runner_components.attention_backend_setup."
               "configure_aux_hidden_state_capture -> <Model>.set_dflash_layers_to_capture",
    "model_class": CODE_PATHS["model_class"],
    "draft": "sglang.srt.models.dflash.DFlashDraftModel.project_target_hidden",
}

_INITIALIZE = "sglang.srt.model_executor.model_runner.ModelRunner.initialize"


class Capture:
    """The ids resolved by `resolve_spec_aux_hidden_state_config`, the capture configured by
    `configure_aux_hidden_state_capture`, under the algorithm served."""

    CAPTURE_PATHS: tuple[str, ...] = (
        "sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state."
        "resolve_spec_aux_hidden_state_config",
        "sglang.srt.model_executor.model_runner_components.attention_backend_setup."
        "configure_aux_hidden_state_capture",
    )
    # What a DFlash extraction runs beside the code paths: kept apart, so that a release without
    # DFlash keeps its EAGLE-3 placement and answers a DFlash draft with its own refusal.
    REQUIRES_DFLASH: tuple[str, ...] = (
        "sglang.srt.speculative.dflash_utils.parse_dflash_draft_config",
        "sglang.srt.speculative.dflash_utils.build_target_layer_ids",
        "sglang.srt.models.dflash.DFlashDraftModel.project_target_hidden",
        "sglang.srt.speculative.spec_info.SpeculativeAlgorithm.is_dflash_family",
        "sglang.srt.model_executor.model_runner_components.attention_backend_setup."
        "configure_aux_hidden_state_capture(is_dspark)",
    )

    def resolve_aux_ids(self, target_config) -> tuple[bool, Any]:
        """The draft's aux ids exactly as the engine resolves them at start-up, under the
        algorithm served (DFlash's: `dflash_target_layer_ids`, and whether it is DSpark)."""
        from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import \
            resolve_spec_aux_hidden_state_config
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        resolved = resolve_spec_aux_hidden_state_config(
            server_args=self.server_args, model_config=target_config,
            spec_algorithm=SpeculativeAlgorithm.from_string(self.algorithm), is_draft_worker=False)
        if self.is_dflash():
            self.is_dspark = bool(getattr(resolved, "is_dspark", False))
            return resolved.dflash_use_aux_hidden_state, resolved.dflash_target_layer_ids
        return resolved.eagle_use_aux_hidden_state, resolved.eagle_aux_hidden_state_layer_ids

    def configure_capture(self, model, use_aux: bool, ids) -> None:
        """The capture set-up the model runner does at start-up, for the algorithm served."""
        from sglang.srt.model_executor.model_runner_components.attention_backend_setup import \
            configure_aux_hidden_state_capture

        dflash = self.is_dflash()
        configure_aux_hidden_state_capture(
            model=model, eagle_use_aux_hidden_state=use_aux and not dflash,
            eagle_aux_hidden_state_layer_ids=None if dflash else ids,
            dflash_use_aux_hidden_state=use_aux and dflash, dflash_target_layer_ids=ids if dflash else None,
            is_dspark=dflash and getattr(self, "is_dspark", False))

    def ids_never_read(self, version: str) -> str | None:
        """Why this release never reads aux ids from any draft config (its reports say so where
        the ids resolve to None), or None: this release reads them."""
        return None

    def check_capture_paths(self) -> None:
        """The statements this capture runs alone are where it looks: none here."""

    def check_dflash_paths(self) -> None:
        """Where the DFlash ids are read is where this capture looks: the resolver, a code path."""


class IdsReadByRunnerInit(Capture):
    """The ids read by the real `ModelRunner.__init__`, stopped after the reading statement (under
    DFLASH, the one that sets `dflash_target_layer_ids`); the capture configured by the real
    `ModelRunner.init_aux_hidden_state_capture`."""

    CAPTURE_PATHS: tuple[str, ...] = ("sglang.srt.model_executor.model_runner.ModelRunner.init_aux_hidden_state_capture",)
    REQUIRES_DFLASH: tuple[str, ...] = (
        "sglang.srt.speculative.dflash_utils.parse_dflash_draft_config",
        "sglang.srt.speculative.dflash_utils.build_target_layer_ids",
        "sglang.srt.models.dflash.DFlashDraftModel.project_target_hidden",
        "sglang.srt.speculative.spec_info.SpeculativeAlgorithm.is_dflash",
        "sglang.srt.model_executor.model_runner.ModelRunner.init_aux_hidden_state_capture",
    )

    def resolve_aux_ids(self, target_config) -> tuple[bool, Any]:
        """The real `ModelRunner.__init__`, stopped after the statement that reads the ids."""
        from sglang.srt.model_executor.model_runner import ModelRunner

        runner = ModelRunner.__new__(ModelRunner)
        dflash = self.is_dflash()
        run_until_after(
            ModelRunner.__init__, "dflash_target_layer_ids" if dflash else "eagle_aux_hidden_state_layer_ids", runner,
            model_config=target_config, mem_fraction_static=0.1, gpu_id=0, tp_rank=0, tp_size=1,
            moe_ep_rank=0, moe_ep_size=1, pp_rank=0, pp_size=1, nccl_port=self.port,
            server_args=self.server_args, is_draft_worker=False)
        if dflash:
            return runner.dflash_use_aux_hidden_state, runner.dflash_target_layer_ids
        if not hasattr(runner, "eagle_use_aux_hidden_state"):
            raise CodePathMoved("ModelRunner.__init__ no longer sets eagle_use_aux_hidden_state")
        return runner.eagle_use_aux_hidden_state, getattr(runner, "eagle_aux_hidden_state_layer_ids", None)

    def configure_capture(self, model, use_aux: bool, ids) -> None:
        """The real `ModelRunner.init_aux_hidden_state_capture` on a runner holding the model and
        the ids, as `__init__` left them for the algorithm served (EAGLE-3's or DFlash's)."""
        from sglang.srt.model_executor.model_runner import ModelRunner

        runner = ModelRunner.__new__(ModelRunner)
        runner.model = model
        dflash = self.is_dflash()
        runner.eagle_use_aux_hidden_state = use_aux and not dflash
        runner.eagle_aux_hidden_state_layer_ids = None if dflash else ids
        runner.dflash_use_aux_hidden_state = use_aux and dflash
        runner.dflash_target_layer_ids = ids if dflash else None
        ModelRunner.init_aux_hidden_state_capture(runner)

    def check_capture_paths(self) -> None:
        """`ModelRunner.__init__` assigns the ids (where the run stops after)."""
        from sglang.srt.model_executor.model_runner import ModelRunner

        stop_line(ModelRunner.__init__, "eagle_aux_hidden_state_layer_ids")

    def check_dflash_paths(self) -> None:
        """`ModelRunner.__init__` must read the DFlash ids in its `if self.spec_algorithm.is_dflash()
        ...:` statement (where the run stops after), else the stop would fall short of it."""
        from sglang.srt.model_executor.model_runner import ModelRunner

        block = find_statement(ModelRunner.__init__, DFLASH_READ)
        if "self.dflash_target_layer_ids =" not in ast.unparse(block):
            raise CodePathMoved(f"ModelRunner.__init__'s `if {DFLASH_READ}:` no longer sets "
                                "self.dflash_target_layer_ids")


class CaptureSetByInitializeStatement(IdsReadByRunnerInit):
    """The ids as `IdsReadByRunnerInit`; the capture set by one statement of the real
    `ModelRunner.initialize`."""

    CAPTURE_PATHS: tuple[str, ...] = (_INITIALIZE,)

    def configure_capture(self, model, use_aux: bool, ids) -> None:
        """The capture statement of the real `ModelRunner.initialize`, on a runner holding the model."""
        from sglang.srt.model_executor.model_runner import ModelRunner

        runner = ModelRunner.__new__(ModelRunner)
        runner.model = model
        runner.eagle_use_aux_hidden_state = use_aux
        runner.eagle_aux_hidden_state_layer_ids = ids
        run_statement(ModelRunner.initialize, CAPTURE_TEST, runner)

    def check_capture_paths(self) -> None:
        """As `IdsReadByRunnerInit`'s, and `ModelRunner.initialize` holds the capture statement."""
        from sglang.srt.model_executor.model_runner import ModelRunner

        super().check_capture_paths()
        find_statement(ModelRunner.initialize, CAPTURE_TEST)


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


class IdsAndCaptureByInitializeStatement(Capture):
    """The aux ids read, and the capture set, by one statement of the real `ModelRunner.initialize`."""

    CAPTURE_PATHS: tuple[str, ...] = (_INITIALIZE,)

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

    def check_capture_paths(self) -> None:
        """`ModelRunner.initialize` holds the reading statement."""
        from sglang.srt.model_executor.model_runner import ModelRunner

        find_statement(ModelRunner.initialize, READ_AND_CAPTURE)


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


class CaptureWithoutIds(Capture):
    """No ids read: the capture statement of the real `ModelRunner.initialize` hands none."""

    CAPTURE_PATHS: tuple[str, ...] = (_INITIALIZE, "sglang.srt.speculative.spec_info.SpeculativeAlgorithm.EAGLE3")

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
        run_statement(ModelRunner.initialize, READ_AND_CAPTURE, runner, server_args=self.server_args)

    def resolve_aux_ids(self, target_config) -> tuple[bool, Any]:
        """The capture statement of the real `ModelRunner.initialize`, run alone on a call recorder:
        (True, None) when it calls `set_eagle3_layers_to_capture()` with no ids, as this variant's do."""
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

    def check_capture_paths(self) -> None:
        """The capture statement's one call of `self.model.set_eagle3_layers_to_capture` hands it
        nothing (a release whose statement hands ids, as 0.4.9's does, reads them and does not fit)."""
        from sglang.srt.model_executor.model_runner import ModelRunner

        statement = find_statement(ModelRunner.initialize, READ_AND_CAPTURE)
        calls = [node for node in ast.walk(statement)
                 if isinstance(node, ast.Call) and ast.unparse(node.func) == CAPTURE_CALL]
        if len(calls) != 1 or calls[0].args or calls[0].keywords:
            raise CodePathMoved(f"the `if {READ_AND_CAPTURE}:` statement of ModelRunner.initialize makes "
                                f"{[ast.unparse(c) for c in calls]}; the 0.4.8-family adapter assumes one "
                                f"{CAPTURE_CALL}() that hands no ids")
