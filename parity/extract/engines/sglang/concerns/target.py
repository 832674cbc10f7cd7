"""The target concern: the target's model class, its build (after whatever the engine's model
runner does before any model, target or draft, is built), its weights and its decoder.

- `Target` (0.5.21 on): nothing runs before a model is built.
- `DpAttentionOnCpuCopy` (0.4.4.post2-0.5.15): `dp_attention.initialize_dp_attention(server_args,
  model_config)` must run before a model is built; it sizes a gathered buffer on
  `torch.device(server_args.device)`, and the published args keep device=None (device="cpu"
  breaks DeepSeek rope), so this call alone sees a copy that names the CPU.
- `DpAttentionOnArgsBuiltAnew` (0.5.16-0.5.20): the same, on args built anew (from 0.5.19
  resolved args are read-only), published for that call only.
- `RunnerGlobalsBeforeBuild` (0.4.4.post2-0.5.3.post1): the process-wide server args are the
  dict `managers.schedule_batch.global_server_args_dict`, filled by one statement of the real
  `ModelRunner.__init__` (`global_server_args_dict.update({k: getattr(server_args, k) for k in
  GLOBAL_SERVER_ARGS_KEYS} | {"use_mla_backend": ..., "speculative_algorithm": ...})`), which model
  code reads when it is built and run: that `__init__` runs on a fresh runner for the model's
  config and stops right after that statement (run_until.run_until_after_call), before a model is
  built. `dp_attention.initialize_dp_attention` takes the runner's parallel sizes up to 0.5.0rc1
  and the server args and model config from 0.5.0rc2: the runner's own call of it (the one
  statement of `ModelRunner.init_torch_distributed`, run_until.run_call) runs on a runner holding
  them, whichever the release's signature.
  An MLA model (DeepSeek): `ModelRunner.model_specific_adjustment`, run by that `__init__`,
  refuses it under any attention backend outside its MLA list off a "cpu" device ("Invalid
  attention backend for MLA: torch_native"; 0.5.4 dropped the check). torch_native is parity's
  choice, so for an MLA model the runner is handed MLA_BACKEND (triton: what that method's own
  default selection names for an MLA model on a CUDA GPU that is neither Hopper nor Blackwell);
  DeepSeek's prefill dispatch takes the same MHA path either way, answered by parity's prefill
  SDPA backend (runner_args_for; where the args leave `page_size` unset, as `__post_init__` would
  resolve it, since 0.5.0rc0-0.5.2's method compares it for an MLA model). Its dispatch reads
  `global_server_args_dict["prefill_attention_backend"]`, which the runner's
  `_get_attention_backend` publishes in one statement: run alone, with the statements setting the
  two backends before it, where the release has it (publish_phase_backends). DeepSeek's model
  class then has no `set_eagle3_layers_to_capture` in these releases: the engine's own verdict
  (probe.no_capture_hook).
"""

from __future__ import annotations

import copy

import torch

from ....run_until import (CodePathMoved, call_stop_line, run_assignment, run_call, run_statement,
                          run_until_after_call)

GLOBALS = "global_server_args_dict.update"  # the statement of ModelRunner.__init__ that publishes them
MLA_BACKEND = "triton"  # the attention backend an MLA model's runner is handed (runner_args_for)

_DP_ATTENTION = "sglang.srt.layers.dp_attention.initialize_dp_attention"


def resolve_page_size(args) -> None:
    """`args.page_size` as the release's own `ServerArgs.__post_init__` resolves an unset one
    (parity's server args are unresolved: launch.unresolved): its `_handle_page_size()` where it
    has one (0.5.3), else its `if self.page_size is None:` statement, run alone (0.5.0rc0)."""
    from sglang.srt.server_args import ServerArgs

    if hasattr(ServerArgs, "_handle_page_size"):
        ServerArgs._handle_page_size(args)
    else:
        run_statement(ServerArgs.__post_init__, "self.page_size is None", args)


class Target:
    """The target: its model class, build, weights and decoder; nothing runs before a build."""

    TARGET_PATHS: tuple[str, ...] = ("sglang.srt.model_loader.utils.get_model_architecture",)

    def model_class(self, model_config) -> type:
        from sglang.srt.model_loader.utils import get_model_architecture

        return get_model_architecture(model_config)[0]

    def build_target(self, target_config) -> torch.nn.Module:
        self.before_target_build(target_config)
        cls = self.model_class(target_config)
        return cls(config=target_config.hf_config, quant_config=None).eval()

    def before_target_build(self, target_config) -> None:
        """What the model runner does before the target is built: nothing in this release."""

    def before_draft_build(self, draft_dir: str) -> None:
        """What the model runner does before the draft is built: nothing in this release."""

    def load_weights(self, model: torch.nn.Module, state_dict: dict[str, torch.Tensor]) -> None:
        model.load_weights(list(state_dict.items()))
        post = getattr(model, "post_load_weights", None)
        if post is not None:
            post()

    def text_layers(self, model_config) -> int:
        """N as the engine reads it: its text config (a wrapper's `text_config`)."""
        return model_config.hf_text_config.num_hidden_layers

    def decoder(self, model) -> torch.nn.Module:
        """The module holding the decoder layers, the token embedding and the capture list:
        `model.model` of a causal LM; in a multimodal wrapper (KimiK25ForConditionalGeneration,
        Llama4ForConditionalGeneration), that of the text model it keeps as `language_model`
        and hands `set_eagle3_layers_to_capture` to."""
        for path in (("model",), ("language_model", "model"), ("model", "model")):
            obj = model
            for attr in path:
                obj = getattr(obj, attr, None)
            if obj is not None and hasattr(obj, "layers"):
                return obj
        raise AttributeError(f"{type(model).__name__}: no decoder module (looked for .model.layers and "
                             ".language_model.model.layers)")

    def capture_indices(self, model) -> list[int] | None:
        ids = getattr(self.decoder(model), "layers_to_capture", None)
        return list(ids) if ids is not None else None

    def num_layers(self, model) -> int:
        return len(self.decoder(model).layers)

    def check_target_paths(self) -> None:
        """The statements this concern runs alone are where it looks: none here."""


class DpAttentionOnCpuCopy(Target):
    """`initialize_dp_attention` run before a target or draft is built, on a copy of the args naming the CPU."""

    TARGET_PATHS: tuple[str, ...] = (*Target.TARGET_PATHS, _DP_ATTENTION)
    _dp_ready = False  # whether it ran in this process

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
        """`dp_attention.initialize_dp_attention(server_args, model_config)`, this variant's signature."""
        from sglang.srt.layers import dp_attention

        dp_attention.initialize_dp_attention(server_args, model_config)

    def before_target_build(self, target_config) -> None:
        self._init_dp_attention(target_config)

    def before_draft_build(self, draft_dir: str) -> None:
        self._init_dp_attention(self.model_config(draft_dir, is_draft=True))


class DpAttentionOnArgsBuiltAnew(Target):
    """`initialize_dp_attention` run before a target or draft is built, on args built anew (from
    0.5.19 resolved args are read-only)."""

    TARGET_PATHS: tuple[str, ...] = (*Target.TARGET_PATHS, _DP_ATTENTION)
    _dp_ready = False  # whether it ran in this process

    def _init_dp_attention(self, model_config) -> None:
        """`initialize_dp_attention` sizes a gathered buffer on the device the runtime context
        names; the published args keep device=None (device="cpu" breaks DeepSeek rope), so they
        name the CPU for this call only, and are published as they were right after."""
        if not self._dp_ready:
            from sglang.srt.layers import dp_attention
            from sglang.srt.server_args import set_global_server_args_for_scheduler

            published = self.server_args  # from 0.5.19 resolved args are read-only: built anew
            on_cpu = self._server_args(*self._published, device="cpu")
            set_global_server_args_for_scheduler(on_cpu)
            try:
                dp_attention.initialize_dp_attention(on_cpu, model_config)
            finally:
                set_global_server_args_for_scheduler(published)
            self._dp_ready = True

    def before_target_build(self, target_config) -> None:
        self._init_dp_attention(target_config)

    def before_draft_build(self, draft_dir: str) -> None:
        self._init_dp_attention(self.model_config(draft_dir, is_draft=True))


class RunnerGlobalsBeforeBuild(DpAttentionOnCpuCopy):
    """`global_server_args_dict` filled by the real `ModelRunner.__init__` before a model is built
    (with the MLA runner's arguments and the phase backends), and the runner's own
    `initialize_dp_attention(...)` statement."""

    TARGET_PATHS: tuple[str, ...] = (
        *DpAttentionOnCpuCopy.TARGET_PATHS, "sglang.srt.managers.schedule_batch.global_server_args_dict",
        "sglang.srt.model_executor.model_runner.ModelRunner.__init__",
        "sglang.srt.model_executor.model_runner.ModelRunner.init_torch_distributed")
    _globals_for = None  # the model config the dict was last filled for (None: not since the last publish)

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

    def before_target_build(self, target_config) -> None:
        self.publish_globals(target_config)
        super().before_target_build(target_config)

    def before_draft_build(self, draft_dir: str) -> None:
        if self._globals_for is None:  # a draft built on its own: the dict still needs filling
            self.publish_globals(self.model_config(draft_dir, is_draft=True))
        super().before_draft_build(draft_dir)

    def check_target_paths(self) -> None:
        """`ModelRunner.__init__` holds the statement that fills the dict."""
        from sglang.srt.model_executor.model_runner import ModelRunner

        call_stop_line(ModelRunner.__init__, GLOBALS)
