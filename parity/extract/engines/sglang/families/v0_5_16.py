"""The SGLang 0.5.16 family (0.5.16 to 0.5.20): its adapter.

Launch arguments: resolved by `ServerArgs.__post_init__`'s assignments, as in the 0.5.14 family
(`resolve_once` and its declared resolutions arrive in 0.5.21).

Between the 0.5.14 and 0.5.23 families (docs/engines-on-cpu.md, 'Runtime set-up per release
family'), taking from each what this family's code has:
- as 0.5.23: the draft's aux ids are resolved by
  `model_runner_components.spec_aux_hidden_state.resolve_spec_aux_hidden_state_config` and the
  capture configured by `attention_backend_setup.configure_aux_hidden_state_capture` (the same
  signatures; from 0.5.19 the resolver reads the speculative settings through `get_spec()`);
- as 0.5.14: the process-wide server args are published with
  `server_args.set_global_server_args_for_scheduler(...)` (which, in this family, hands them to
  the runtime context: 0.5.16 has no `runtime_context.publish`, 0.5.17-0.5.20's takes no
  `ranks`), `dp_attention.initialize_dp_attention(server_args, model_config)` runs before a model
  is built, `forward_context(...)` takes no batch, and the EAGLE-3 worker fetches the target's
  embedding and head with `get_embed_and_head()` (no `pp_draft_embedding` yet);
- the default GPU attention backend: `ServerArgs._get_default_attn_backend` up to 0.5.18,
  `arg_groups.model_override_base.get_default_attn_backend` from 0.5.19 (whichever the
  installed release defines; both are the engine's own resolver).

CPU shims as in the 0.5.14 family: the torchvision stand-in's inert InterpolationMode (this
family's `sglang.srt.utils.common` imports `torchvision.io` at module level) and the rotary
embedding's device lookup answering "cpu". The draft's `set_embed` asks the platform layer to
synchronize, as in 0.5.23: no torch.cuda shim.

DFlash (SpeculativeAlgorithm.DFLASH; 0.5.18 also has DSPARK): as 0.5.23's, by the same resolver and
capture (the base's, run unchanged: `_resolve_dflash_aux_hidden_state`,
`configure_aux_hidden_state_capture(..., is_dspark)` -> `set_dflash_layers_to_capture`,
`DFlashDraftModel.project_target_hidden`). A release of the range whose resolver or capture lacks
a name the base runs (`SpeculativeAlgorithm.is_dflash_family`, the `is_dspark` argument) says so as
a code path moved (parity's limit), never as the release's answer.

Composed of: its own `Launch` (the InterpolationMode shim), `DpAttention` (args built anew)
and `DefaultBackend`; from the 0.5.14 family `SchedulerArgs`, `ForwardContext` and `Draft`
(`get_embed_and_head()`); ahead of the 0.5.23 adapter.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from . import v0_5_14, v0_5_23
from .. import launch

RELEASES = SpecifierSet(">=0.5.16,<0.5.21")  # the releases this family's adapter serves
VERIFIED = ("0.5.18",)  # releases whose capture and forward were verified against transformers

CODE_PATHS = v0_5_23.CODE_PATHS
DFLASH_CODE_PATHS = v0_5_23.DFLASH_CODE_PATHS


class Launch:
    """The torchvision stand-in's InterpolationMode given before the engine is imported; the
    base's set-up otherwise."""

    def check_code_paths(self) -> None:
        v0_5_23.give_standin_interpolation_modes()  # before transformers is imported through the engine
        super().check_code_paths()

    def setup(self, port: int, draft_dir: str | None, device: str = "cpu") -> None:
        v0_5_23.give_standin_interpolation_modes()
        self._dp_ready = False
        super().setup(port, draft_dir, device)


class DpAttention:
    """`initialize_dp_attention` run before a target or draft is built, on args built anew (from
    0.5.19 resolved args are read-only)."""

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

    def build_target(self, target_config):
        self._init_dp_attention(target_config)
        return super().build_target(target_config)

    def build_draft(self, draft_dir: str):
        self._init_dp_attention(self.model_config(draft_dir, is_draft=True))
        return super().build_draft(draft_dir)


class DefaultBackend:
    """The default GPU attention backend: the base's resolver from 0.5.19, `ServerArgs`' own before."""

    def default_gpu_attention_backend(self, model_config) -> str:
        try:
            return super().default_gpu_attention_backend(model_config)  # 0.5.19 on
        except ImportError:
            return self.server_args._get_default_attn_backend(False, model_config)


class Adapter(Launch, v0_5_14.SchedulerArgs, DpAttention, v0_5_14.ForwardContext, DefaultBackend, v0_5_14.Draft,
              v0_5_23.Adapter):
    family = "0.5.16"
    LAUNCH = staticmethod(launch.traced)  # no resolve_once yet: __post_init__ resolves by assignment
    REQUIRES = v0_5_23._COMMON + (
        "sglang.srt.runtime_context.reset_context",
        "sglang.srt.server_args.set_global_server_args_for_scheduler",
        "sglang.srt.layers.dp_attention.initialize_dp_attention",
        "sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state."
        "resolve_spec_aux_hidden_state_config",
        "sglang.srt.model_executor.model_runner_components.attention_backend_setup."
        "configure_aux_hidden_state_capture",
        "sglang.srt.model_executor.forward_context.ForwardContext",
        "sglang.srt.model_executor.forward_context.forward_context",
    )
