"""The SGLang 0.5.14 family: its adapter.

Same methods as the 0.5.23 family's adapter (v0_5_23.py); what differs in this family
(docs/engines-on-cpu.md, 'Runtime set-up per release family'):
- launch arguments are resolved by `ServerArgs.__post_init__` assigning the fields (no
  `resolve_once`): the launch contract records each assignment and the function that made it;
- the process-wide server args are published with
  `server_args.set_global_server_args_for_scheduler(...)` (no runtime_context yet), and
  `dp_attention.initialize_dp_attention(...)` must run before a model is built;
- the draft's aux ids are read inline in `ModelRunner.__init__`, under a bare `except:`
  (no `spec_aux_hidden_state` module). The adapter runs that real `__init__` on a fresh
  `ModelRunner` and stops right after the statement that reads them (run_until.py), so
  the engine's own reading code, `except:` included, decides the ids;
- the capture is configured by the real `ModelRunner.init_aux_hidden_state_capture`, run
  on a bare `ModelRunner` holding only the model and the resolved ids;
- attention layers find their backend through `forward_context` (as in 0.5.23), whose
  `forward_context(...)` takes no batch;
- the EAGLE-3 worker fetches the target's embedding and head with the target's own
  `get_embed_and_head()` (0.5.23 resolves them through `pp_draft_embedding`);
- the default GPU attention backend is chosen by `ServerArgs._get_default_attn_backend`.

CPU shims, each the smallest that lets the real code run:
- transformers 5.6-5.8 build a PIL -> torchvision interpolation table at import time when
  they believe torchvision is installed, which the torchvision stand-in (needed by this
  release's `sglang.srt.utils.common`, which imports `torchvision.io` at module level)
  makes them believe. The stand-in's `transforms` module gets an inert
  `InterpolationMode` enum for that table; no text-model path reads it;
- the rotary-embedding module's device lookup answers "cpu";
- `torch.cuda.synchronize` is a no-op when there is no CUDA device (the draft's
  `set_embed` calls it unconditionally in this family);
- attention by parity's prefill SDPA backend (sdpa_backend.py); no layer is stubbed.

DFlash: 0.5.12-0.5.15 have it (SpeculativeAlgorithm.DFLASH; no DSPARK and no
`is_dflash_family()` yet, so whether an algorithm is DFlash is its own `is_dflash()`, which the
base's `dflash_question` finds in the installed class), 0.5.10 and
older do not (a DFlash draft is their own refusal, typed engine_lacks). Under DFLASH the ids are
read in `ModelRunner.__init__` too, a statement after the EAGLE-3 one (`parse_dflash_draft_config`,
then `resolve_target_layer_ids(N, draft layers)`, no `spec_aux_hidden_state` module): the adapter
runs the real `__init__` until after the statement that sets `dflash_target_layer_ids`, and the
real `init_aux_hidden_state_capture` on a runner holding them hands them to
`set_dflash_layers_to_capture`. The draft class is `DFlashDraftModel` (`project_target_hidden`).

Composed of its own parts, each shared with the older families that take it from here:
`Launch` (traced launch; set-up without a runtime context; code paths), `SchedulerArgs`
(`set_global_server_args_for_scheduler`), `Config` (ids read by `ModelRunner.__init__`),
`DpAttention`, `Capture` (`init_aux_hidden_state_capture`), `ForwardContext` (no batch),
`DefaultBackend` (`ServerArgs._get_default_attn_backend`) and `Draft` (`get_embed_and_head()`),
ahead of the 0.5.23 adapter.
"""

from __future__ import annotations

import ast
import copy
from typing import Any

import torch
from packaging.specifiers import SpecifierSet

from . import v0_5_23
from .. import launch
from ....run_until import CodePathMoved, find_statement, require, run_until_after, stop_line

FORWARD_CONTEXT = "sglang.srt.model_executor.forward_context"
# where __init__ reads the DFlash ids (its test as ast.unparse spells it, as find_statement compares)
DFLASH_READ = "self.spec_algorithm.is_dflash() and (not self.is_draft_worker)"

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
    "draft": v0_5_23.DFLASH_CODE_PATHS["draft"],
}

give_standin_interpolation_modes = v0_5_23.give_standin_interpolation_modes  # moved to the base


class Launch:
    """Launch arguments resolved by `__post_init__`'s assignments (launch.traced); the set-up
    without a runtime context (gloo groups, the rotary embedding's device lookup, the
    `torch.cuda.synchronize` no-op); the code paths, the ids' reading statement included;
    DFlash as `ModelRunner` runs it (no DFlash family yet: DFLASH alone)."""

    LAUNCH = staticmethod(launch.traced)  # no resolve_once yet: __post_init__ resolves by assignment
    REQUIRES_DFLASH: tuple[str, ...] = (
        "sglang.srt.speculative.dflash_utils.parse_dflash_draft_config",
        "sglang.srt.speculative.dflash_utils.build_target_layer_ids",
        "sglang.srt.models.dflash.DFlashDraftModel.project_target_hidden",
        "sglang.srt.speculative.spec_info.SpeculativeAlgorithm.is_dflash",
        "sglang.srt.model_executor.model_runner.ModelRunner.init_aux_hidden_state_capture",
    )

    def dflash_refusal(self, version: str) -> tuple[str, bool] | None:
        """As the base's, and `ModelRunner.__init__` must read the DFlash ids in its
        `if self.spec_algorithm.is_dflash() ...:` statement (where the run stops after), else
        the stop would fall short of it: a code path moved, parity's limit."""
        refused = super().dflash_refusal(version)
        if refused is None:
            from sglang.srt.model_executor.model_runner import ModelRunner

            try:
                block = find_statement(ModelRunner.__init__, DFLASH_READ)
                if "self.dflash_target_layer_ids =" not in ast.unparse(block):
                    raise CodePathMoved(f"ModelRunner.__init__'s `if {DFLASH_READ}:` no longer sets "
                                        "self.dflash_target_layer_ids")
            except LookupError as exc:
                return (f"a DFlash code path parity runs moved: {exc}", False)
        return refused

    def setup(self, port: int, draft_dir: str | None, device: str = "cpu") -> None:
        give_standin_interpolation_modes()
        from sglang.srt.distributed import parallel_state as ps

        self.device = device

        if not device.startswith("cuda"):
            self.rope_on_cpu()
        if not torch.cuda.is_available():
            # The draft's set_embed ends with torch.cuda.synchronize() (0.5.23 asks the platform
            # layer instead); with no CUDA device there is nothing to wait for.
            torch.cuda.synchronize = lambda device=None: None
        self.port = port
        self.publish(draft_dir)
        ps.init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                        distributed_init_method=f"tcp://127.0.0.1:{port}")
        ps.initialize_model_parallel(backend="gloo")
        self._dp_ready = False
        self.check_code_paths()

    def rope_on_cpu(self) -> None:
        """The rotary-embedding module's device lookup answers "cpu"."""
        import sglang.srt.layers.rotary_embedding.rope_variant as rope_variant

        rope_variant.get_device = lambda device_id=None: "cpu"

    def check_code_paths(self) -> None:
        """Fail the whole extraction (a loud "cannot extract") when the code this adapter runs
        is not where it looks, before any of it could be mistaken for a finding."""
        give_standin_interpolation_modes()  # before transformers is imported through the engine
        require(*self.REQUIRES)
        from sglang.srt.model_executor.model_runner import ModelRunner

        stop_line(ModelRunner.__init__, "eagle_aux_hidden_state_layer_ids")


class SchedulerArgs:
    """The process-wide server args published with `set_global_server_args_for_scheduler`."""

    def publish(self, draft_dir: str | None, backend: str = "torch_native") -> None:
        """(Re-)publish the process-wide server args naming this draft (no runtime_context yet)."""
        from sglang.srt.server_args import set_global_server_args_for_scheduler

        self.server_args = self._server_args(draft_dir, backend)
        set_global_server_args_for_scheduler(self.server_args)


class Config:
    """The aux ids read by the real `ModelRunner.__init__`, stopped after the reading statement
    (under DFLASH, the one that sets `dflash_target_layer_ids`)."""

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


class DpAttention:
    """`initialize_dp_attention` run before a target or draft is built."""

    def _init_dp_attention(self, model_config) -> None:
        if not self._dp_ready:
            # It sizes a gathered-buffer on torch.device(server_args.device); the published
            # args keep device=None (device="cpu" breaks DeepSeek rope), so this call alone
            # sees a copy that names the CPU.
            on_cpu = copy.copy(self.server_args)
            on_cpu.device = "cpu"
            self.initialize_dp_attention(on_cpu, model_config)
            self._dp_ready = True

    def initialize_dp_attention(self, server_args, model_config) -> None:
        """`dp_attention.initialize_dp_attention(server_args, model_config)`, this family's signature."""
        from sglang.srt.layers import dp_attention

        dp_attention.initialize_dp_attention(server_args, model_config)

    def build_target(self, target_config) -> torch.nn.Module:
        self._init_dp_attention(target_config)
        return super().build_target(target_config)

    def build_draft(self, draft_dir: str):
        config = self.model_config(draft_dir, is_draft=True)
        self._init_dp_attention(config)
        return super().build_draft(draft_dir)


class Capture:
    """The capture configured by the real `ModelRunner.init_aux_hidden_state_capture`."""

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


class ForwardContext:
    """A forward context that carries the attention backend only (`forward_context(...)` takes no
    batch)."""

    def attention_context(self, batch, backend):
        """This release's forward context carries the backend only."""
        from sglang.srt.model_executor.forward_context import ForwardContext, forward_context

        return forward_context(ForwardContext(attn_backend=backend))


class DefaultBackend:
    """The default GPU attention backend by `ServerArgs._get_default_attn_backend`."""

    def default_gpu_attention_backend(self, model_config) -> str:
        return self.server_args._get_default_attn_backend(False, model_config)


class Draft:
    """The target's embedding and head from its own `get_embed_and_head()`."""

    def target_embed_and_head(self, target, draft) -> tuple[Any, Any]:
        """As this family's EAGLE-3 worker: the target's own `get_embed_and_head()`."""
        return target.get_embed_and_head()


class Adapter(Launch, SchedulerArgs, Config, DpAttention, Capture, ForwardContext, DefaultBackend, Draft,
              v0_5_23.Adapter):
    family = "0.5.14"
    REQUIRES = v0_5_23._COMMON + (
        "sglang.srt.server_args.set_global_server_args_for_scheduler",
        "sglang.srt.layers.dp_attention.initialize_dp_attention",
        "sglang.srt.model_executor.model_runner.ModelRunner.init_aux_hidden_state_capture",
        "sglang.srt.model_executor.forward_context.ForwardContext",
        "sglang.srt.model_executor.forward_context.forward_context",
    )
