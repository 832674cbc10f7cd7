"""The SGLang 0.5.10 family (0.5.8 - 0.5.10.post1): its adapter.

As the 0.5.12 family (v0_5_12.py: no forward context, the attention backend and KV pool on
the ForwardBatch; the aux ids read by the real `ModelRunner.__init__` under its bare
`except:`; the target's embedding from its own `get_embed_and_head()`), except where
docs/engines-on-cpu.md, 'Runtime set-up per release family', says it differs:
- there is no `ModelRunner.init_aux_hidden_state_capture`: the capture is set by one
  statement near the end of the real `ModelRunner.initialize`
  (`if self.eagle_use_aux_hidden_state: self.model.set_eagle3_layers_to_capture(ids)`), the
  rest of which is the GPU start-up. parity runs exactly that statement of the installed
  method (run_until.run_statement) on a bare runner holding the model and the resolved ids;
- the host KV-cache module (`mem_cache.memory_pool_host`, on the model runner's import path)
  imports `sgl_kernel.kvcacheio` unconditionally on a CPU, so that one module gets parity's
  import-time stand-in (standins.py: any use raises; the package's other modules stay absent,
  so SGLang's own ImportError fallbacks still run);
- the EAGLE-3 draft's one decoder layer is `model.midlayer` (a `layers` list from 0.5.11);
- the rotary embedding's device lookup lives in `rotary_embedding/rope_variant.py` (0.5.10),
  in `layers/rotary_embedding.py` (0.5.9) or nowhere (0.5.8): it answers "cpu" where it is; a
  rope class that defaults its cache's device to the literal "cuda" instead of asking (DeepSeek's
  YaRN rope up to 0.5.8) defaults to "cpu" (accelerator_default_on_cpu): on a CPU-only torch
  that default could only raise;
- (0.5.0rc0-0.5.10.post1, this family's and the older ones that take its `Launch`, whose
  `setup` installs it) the non-CUDA
  MoE method ignores the experts' biases and gpt-oss's clamped SwiGLU: moe_standin.py computes
  the CUDA route for the layers that carry them (any other layer runs the release's own method);
  (0.5.0rc1-0.5.3rc0) gpt-oss hands the rotary op `fused_set_kv_buffer_arg` (None off CUDA),
  which only its CUDA method takes: rope_standin.py lets the non-CUDA method take it as None.

Composed of: its own `Launch` (the kernel stand-in, the rope device lookup, the capture
statement's code path), `Capture` and `Draft` (`midlayer`); v0_5_12.NoForwardContext; the 0.5.14
family's `Launch`, `SchedulerArgs`, `Config`, `DpAttention`, `DefaultBackend` and `Draft`; ahead
of the 0.5.23 adapter. The older families take this file's `Launch` and `Draft`.
"""

from __future__ import annotations

import importlib
import inspect

from packaging.specifiers import SpecifierSet

from . import v0_5_12, v0_5_14, v0_5_23
from .. import moe_standin, rope_standin
from .... import standins
from ....run_until import find_statement, run_statement

RELEASES = SpecifierSet(">=0.5.8,<0.5.11")  # the releases this family's adapter serves
VERIFIED = ("0.5.10",)  # releases whose capture and forward were verified against transformers

CAPTURE_TEST = "self.eagle_use_aux_hidden_state"  # the `if` of ModelRunner.initialize that sets the capture
KERNEL_STANDINS = ("sgl_kernel.kvcacheio",)
ROPE_DEVICE = ("sglang.srt.layers.rotary_embedding.rope_variant", "sglang.srt.layers.rotary_embedding")

CODE_PATHS = {
    **v0_5_14.CODE_PATHS,
    "capture": f"sglang.srt.model_executor.model_runner.ModelRunner.initialize (its `if {CAPTURE_TEST}:` "
               "statement) -> <Model>.set_eagle3_layers_to_capture",
}


def accelerator_default_on_cpu(module) -> list[str]:
    """Every class of `module` whose `__init__` defaults `device` to the literal "cuda" (the
    accelerator of a GPU launch) defaults it to "cpu", parity's accelerator, instead; an
    explicit device is untouched. Returns the classes changed."""
    changed = []
    for obj in vars(module).values():
        init = vars(obj).get("__init__") if isinstance(obj, type) and obj.__module__ == module.__name__ else None
        if init is None:
            continue
        kw = init.__kwdefaults__ or {}
        if kw.get("device") == "cuda":  # keyword-only (DeepSeek's YaRN rope)
            init.__kwdefaults__ = {**kw, "device": "cpu"}
            changed.append(obj.__name__)
            continue
        defaulted = [p.name for p in inspect.signature(init).parameters.values()
                     if p.kind is p.POSITIONAL_OR_KEYWORD and p.default is not p.empty]  # __defaults__'s order
        defaults = list(init.__defaults__ or ())
        if "device" in defaulted and defaults[defaulted.index("device")] == "cuda":
            defaults[defaulted.index("device")] = "cpu"
            init.__defaults__ = tuple(defaults)
            changed.append(obj.__name__)
    return changed


class Launch:
    """The `sgl_kernel.kvcacheio` stand-in installed before the model runner is imported; the rotary
    embedding's device lookup wherever this release keeps it; the capture statement in the code paths."""

    def setup(self, port: int, draft_dir: str | None, device: str = "cpu") -> None:
        standins.install(*KERNEL_STANDINS)  # before anything imports the model runner
        super().setup(port, draft_dir, device)
        if not device.startswith("cuda"):
            moe_standin.install()  # before the model is built (its ops bind their method then)
            rope_standin.install()

    def check_code_paths(self) -> None:
        standins.install(*KERNEL_STANDINS)
        super().check_code_paths()
        from sglang.srt.model_executor.model_runner import ModelRunner

        find_statement(ModelRunner.initialize, CAPTURE_TEST)

    def rope_on_cpu(self) -> None:
        for name in ROPE_DEVICE:
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError:  # 0.5.9 and older: no rope_variant module
                continue
            if hasattr(module, "get_device"):
                module.get_device = lambda device_id=None: "cpu"
            # A rope class that builds its cache on a device of its own may name the GPU
            # launch's accelerator as its default instead of asking (DeepSeek's YaRN rope up to 0.5.8).
            accelerator_default_on_cpu(module)


class Capture:
    """The capture set by one statement of the real `ModelRunner.initialize`."""

    def configure_capture(self, model, use_aux: bool, ids) -> None:
        """The capture statement of the real `ModelRunner.initialize`, on a runner holding the model."""
        from sglang.srt.model_executor.model_runner import ModelRunner

        runner = ModelRunner.__new__(ModelRunner)
        runner.model = model
        runner.eagle_use_aux_hidden_state = use_aux
        runner.eagle_aux_hidden_state_layer_ids = ids
        run_statement(ModelRunner.initialize, CAPTURE_TEST, runner)


class Draft:
    """The EAGLE-3 draft's one decoder layer, `model.midlayer`."""

    def draft_layers(self, draft) -> list:
        """This family's EAGLE-3 draft has one decoder layer, `model.midlayer`."""
        return [draft.model.midlayer]


class Adapter(Launch, Capture, Draft, v0_5_12.NoForwardContext, v0_5_14.Launch, v0_5_14.SchedulerArgs, v0_5_14.Config,
              v0_5_14.DpAttention, v0_5_14.DefaultBackend, v0_5_14.Draft, v0_5_23.Adapter):
    family = "0.5.10"
    RUNS_DFLASH = False  # no DFlash in these releases: a DFlash draft is their own refusal (v0_5_14.py)
    REQUIRES = tuple(name for name in v0_5_12.Adapter.REQUIRES
                     if not name.endswith(("ModelRunner.init_aux_hidden_state_capture", "rope_variant.get_device"))) + (
        "sglang.srt.model_executor.model_runner.ModelRunner.initialize",
    )
