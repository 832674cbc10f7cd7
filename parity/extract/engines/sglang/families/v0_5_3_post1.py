"""The SGLang 0.5.3.post1 family (0.4.9 - 0.5.3.post1): its adapter.

As the 0.5.3 family (v0_5_3.py: the aux ids read and the capture set by one statement of the
real `ModelRunner.initialize`; server args with their declared defaults, unresolved; SGLang's
own RMSNorm and SiluAndMul kept as on a GPU), except where docs/engines-on-cpu.md, 'Runtime
set-up per release family', says it differs: there is no `set_global_server_args_for_scheduler`.
The process-wide server args are the dict `managers.schedule_batch.global_server_args_dict`,
filled by one statement of the real `ModelRunner.__init__`
(`global_server_args_dict.update({k: getattr(server_args, k) for k in GLOBAL_SERVER_ARGS_KEYS}
| {"use_mla_backend": ..., "speculative_algorithm": ...})`), which model code reads when it is
built and run. parity runs that `__init__` on a fresh runner for the target's config and stops
right after that statement (run_until.run_until_after_call), before a model is built.
`dp_attention.initialize_dp_attention` takes the runner's parallel sizes up to 0.5.0rc1 and the
server args and model config from 0.5.0rc2: parity runs the runner's own call of it (the one
statement of `ModelRunner.init_torch_distributed`, run_until.run_call) on a runner holding
them, whichever the release's signature.

An MLA model (DeepSeek): `ModelRunner.model_specific_adjustment`, run by that `__init__`, refuses
it under any attention backend outside its MLA list off a "cpu" device ("Invalid attention
backend for MLA: torch_native"; 0.5.4 dropped the check). torch_native is parity's choice, so
for an MLA model the runner is handed MLA_BACKEND (triton: what that method's own default
selection names for an MLA model on a CUDA GPU that is neither Hopper nor Blackwell); DeepSeek's
prefill dispatch takes the same MHA path either way, answered by parity's prefill SDPA backend
(runner_args_for; where the args leave `page_size` unset, as `__post_init__` would resolve it,
since 0.5.0rc0-0.5.2's method compares it for an MLA model). Its dispatch reads
`global_server_args_dict["prefill_attention_backend"]`, which the runner's
`_get_attention_backend` publishes in one statement: run alone, with the statements setting the
two backends before it, where the release has it (publish_phase_backends). DeepSeek's model class then has no
`set_eagle3_layers_to_capture` in these releases: the engine's own verdict (probe.no_capture_hook).

CPU shims:
- 0.4.9-0.4.10 import `default_cache_dir`, `default_dump_dir` and `default_override_dir` from
  `triton.runtime.cache` for a triton cache manager no CPU path runs; the triton parity
  installs no longer has them, so each absent one is a stand-in name that raises when used
  (standins.absent_names);
- up to 0.5.2, `utils.cpu_has_amx_support()` (run at import) calls
  `torch._C._cpu._is_amx_tile_supported()`, which torch 2.13 keeps as
  `torch.cpu._is_amx_tile_supported`: the same function is aliased under the old name where
  absent (as the vLLM 0.17 family does). The answer is `... and is_intel_amx_backend_available`
  (SGLang's CPU kernels, never installed beside parity), so it is False whatever the CPU: SGLang
  stays on its CPU-native forwards, as on every other release parity runs.

Composed of: its own `Launch` (the CPU shims before the engine's import; publishing deferred
to `publish_globals`) and `Globals` (both also taken by the 0.4.8 family), v0_5_3.UnresolvedArgs,
v0_5_7.Launch and .Capture, v0_5_10.Launch and .Draft, v0_5_12.NoForwardContext, the 0.5.14
family's `Launch`, `DpAttention`, `DefaultBackend` and `Draft`, ahead of the 0.5.23 adapter.
"""

from __future__ import annotations

import copy

from packaging.specifiers import SpecifierSet

from . import v0_5_3, v0_5_7, v0_5_10, v0_5_12, v0_5_14, v0_5_23
from .... import standins
from ....run_until import (CodePathMoved, call_stop_line, require, run_assignment, run_call, run_statement,
                          run_until_after_call)

RELEASES = SpecifierSet(">=0.4.9,<0.5.3.post2")  # the releases this family's adapter serves
VERIFIED = ("0.5.3.post1",)  # releases whose capture and forward were verified against transformers

TRITON_CACHE_HELPERS = ("default_cache_dir", "default_dump_dir", "default_override_dir")
GLOBALS = "global_server_args_dict.update"  # the statement of ModelRunner.__init__ that publishes them
MLA_BACKEND = "triton"  # the attention backend an MLA model's runner is handed (Adapter.runner_args_for)

CODE_PATHS = {
    **v0_5_3.CODE_PATHS,
    "server_args": f"sglang.srt.model_executor.model_runner.ModelRunner.__init__ (its `{GLOBALS}(...)` "
                   "statement: managers.schedule_batch.global_server_args_dict)",
}


def resolve_page_size(args) -> None:
    """`args.page_size` as the release's own `ServerArgs.__post_init__` resolves an unset one
    (parity's server args are unresolved: v0_5_3.unresolved): its `_handle_page_size()` where it
    has one (0.5.3), else its `if self.page_size is None:` statement, run alone (0.5.0rc0)."""
    from sglang.srt.server_args import ServerArgs

    if hasattr(ServerArgs, "_handle_page_size"):
        ServerArgs._handle_page_size(args)
    else:
        run_statement(ServerArgs.__post_init__, "self.page_size is None", args)


class Launch:
    """The CPU shims needed before the engine is imported (the AMX probe's old name, triton's absent
    cache helpers); server args published by `publish_globals`, not here; its code paths."""

    def before_engine_imports(self) -> None:
        import torch

        if not hasattr(torch._C._cpu, "_is_amx_tile_supported"):
            torch._C._cpu._is_amx_tile_supported = torch.cpu._is_amx_tile_supported
        standins.absent_names("triton.runtime.cache", *TRITON_CACHE_HELPERS)
        super().before_engine_imports()

    def check_code_paths(self) -> None:
        super().check_code_paths()
        from sglang.srt.model_executor.model_runner import ModelRunner

        call_stop_line(ModelRunner.__init__, GLOBALS)
        require("sglang.srt.model_executor.model_runner.ModelRunner.init_torch_distributed")

    def publish(self, draft_dir: str | None, backend: str = "torch_native") -> None:
        """The server args naming this draft; the process-wide dict is filled by `publish_globals`
        once a model config is known (the engine fills it from its model runner)."""
        self.server_args = self._server_args(draft_dir, backend)
        self._globals_for = None


class Globals:
    """`global_server_args_dict` filled by the real `ModelRunner.__init__` before a model is built
    (with the MLA runner's arguments and the phase backends), and the runner's own
    `initialize_dp_attention(...)` statement."""

    def publish_globals(self, model_config) -> None:
        """The real `ModelRunner.__init__` for `model_config`, stopped after it fills
        `global_server_args_dict`. For an MLA model (DeepSeek-V2/V3) the runner is handed the
        server args with no attention backend named (runner_args_for)."""
        from sglang.srt.model_executor.model_runner import ModelRunner

        runner = ModelRunner.__new__(ModelRunner)
        run_until_after_call(
            ModelRunner.__init__, GLOBALS, runner,
            model_config=model_config, mem_fraction_static=0.1, gpu_id=0, tp_rank=0, tp_size=1,
            moe_ep_rank=0, moe_ep_size=1, pp_rank=0, pp_size=1, nccl_port=self.port,
            server_args=self.runner_args_for(model_config), is_draft_worker=False)
        self.publish_phase_backends(runner)
        self._globals_for = model_config

    def publish_phase_backends(self, runner) -> None:
        """Where this release's `ModelRunner._get_attention_backend` publishes the prefill and
        decode backends (`global_server_args_dict.update({"decode_attention_backend": ...,
        "prefill_attention_backend": ...})`, which DeepSeek's attention dispatch reads), the
        statements of the real method that set them and that one, run alone on the runner
        `__init__` left (the rest of the method builds a GPU backend): each backend's own
        assignment (0.5.0rc0), or the one statement assigning both from
        `server_args.get_attention_backends()` (0.5.3.post1; a tuple target, run as written). A
        release without that statement publishes neither (up to 0.4.8 the dispatch reads
        `attention_backend`)."""
        from sglang.srt.model_executor.model_runner import ModelRunner

        method = getattr(ModelRunner, "_get_attention_backend", None)
        if method is None:  # no such method (0.4.4.post2-0.4.6.post5)
            return
        try:
            call_stop_line(method, GLOBALS)
        except CodePathMoved:  # no such statement in it
            return
        try:
            for attr in ("decode_attention_backend_str", "prefill_attention_backend_str"):
                run_assignment(method, attr, runner)
        except CodePathMoved:  # one statement assigns both
            runner.prefill_attention_backend_str, runner.decode_attention_backend_str = (
                runner.server_args.get_attention_backends())
        run_call(method, GLOBALS, runner)

    def runner_args_for(self, model_config):
        """The server args `ModelRunner.__init__` is handed for `model_config`. Its
        `model_specific_adjustment` refuses an MLA model under an attention backend outside its
        MLA list unless the device is "cpu" (`ValueError: Invalid attention backend for MLA:
        torch_native`; 0.5.4 dropped the check), and torch_native is parity's choice for its
        CPU harness, not the deployment's. So for an MLA model the runner gets a copy naming
        MLA_BACKEND, what that same method's default selection names for an MLA model on a CUDA
        GPU that is neither Hopper nor Blackwell (its selection itself asks the GPU, which a CPU
        run cannot: 0.4.8's `is_sm100_supported` asserts CUDA). The model's attention dispatch
        then takes, for a prefill, the same MHA path it takes under torch_native (the triton
        branch, which torch_native falls back to), and parity's prefill SDPA backend answers
        it, as in the later families: every captured state is matched against transformers."""
        if not self.is_mla(model_config):
            return self.server_args
        args = copy.copy(self.server_args)
        args.attention_backend = MLA_BACKEND
        if args.page_size is None:  # the same method compares it for an MLA model (0.5.0rc0-0.5.2)
            resolve_page_size(args)
        return args

    def initialize_dp_attention(self, server_args, model_config) -> None:
        """The runner's own `initialize_dp_attention(...)` statement, whichever its signature."""
        from sglang.srt.model_executor.model_runner import ModelRunner

        runner = ModelRunner.__new__(ModelRunner)
        runner.__dict__.update(server_args=server_args, model_config=model_config, tp_rank=0, tp_size=1,
                               pp_size=1, moe_ep_size=1, is_draft_worker=False)
        run_call(ModelRunner.init_torch_distributed, "initialize_dp_attention", runner)

    def build_target(self, target_config):
        self.publish_globals(target_config)
        return super().build_target(target_config)

    def build_draft(self, draft_dir: str):
        if self._globals_for is None:  # a draft built on its own: the dict still needs filling
            self.publish_globals(self.model_config(draft_dir, is_draft=True))
        return super().build_draft(draft_dir)


class Adapter(Launch, Globals, v0_5_3.UnresolvedArgs, v0_5_7.Launch, v0_5_7.Capture, v0_5_10.Launch, v0_5_10.Draft,
              v0_5_12.NoForwardContext, v0_5_14.Launch, v0_5_14.DpAttention, v0_5_14.DefaultBackend, v0_5_14.Draft,
              v0_5_23.Adapter):
    family = "0.5.3.post1"
    RUNS_DFLASH = False  # no DFlash in these releases: a DFlash draft is their own refusal (v0_5_14.py)
    REQUIRES = tuple(name for name in v0_5_3.Adapter.REQUIRES
                     if not name.endswith("set_global_server_args_for_scheduler")) + (
        "sglang.srt.managers.schedule_batch.global_server_args_dict",
        "sglang.srt.model_executor.model_runner.ModelRunner.__init__",
    )
