"""The platform concern: everything before any vLLM model code runs (torch's compiler modules,
vLLM's cache in this process's private TMPDIR, the CPU platform and its non-AMX path, the
registry's model inspection in this process), the same steps in every release but how the CPU
platform is selected.

- `Platform` (0.28 on): the CPU platform selected by `VLLM_TARGET_DEVICE`, which these releases
  read before vLLM is imported. vLLM 0.33 is built against torch 2.14; on the CPU torch 2.13,
  releasing the caching allocator (`torch.accelerator.empty_cache`, called around weight loading)
  raises when no accelerator exists: there is no cache to release on a CPU, so it is a no-op,
  nothing computed. `platform_first.cpu_platform_unless_chosen` also covers an older wheel tried
  here first when a release outside every range is placed (0.12-0.15).
- `PlatformSetByHand` (0.8.5-0.15, 0.22-0.27): the CPU platform is not detected for the
  official (CUDA) wheel (`cpu_platform_plugin` looks for a CPU build or macOS only), so it is set
  by hand (`vllm.platforms._current_platform = CpuPlatform()`), before any model code runs.
- `PlatformSetByHandOnOlderTorch` (0.16-0.21): as `PlatformSetByHand`, after torch's
  CPU-capability queries are aliased under the private names these releases call: vLLM 0.17 is
  built against an older torch, whose `torch._C._cpu._is_avx512_supported` (called by
  `CpuPlatform.import_kernels`) and `_is_amx_tile_supported` are `torch.cpu`'s in torch 2.13. The
  same functions, aliased where absent; nothing is computed by parity.
"""

from __future__ import annotations

import os

from .. import platform_first
from ....run_until import require
from .....workspace import engine_cache

# The registry's out-of-process model inspection (every release's; replaced by an in-process call).
INSPECTION = "vllm.model_executor.models.registry._run_in_subprocess"


def _never_called(x):
    raise AssertionError("parity only applies torch.compile's decorator to this function, never calls it")


def compiler_first() -> None:
    """torch's compiler modules imported before vLLM. Without Triton, vLLM 0.8.5 puts a
    placeholder module under `sys.modules['triton']` (only `jit`, `autotune`, `heuristics`,
    `language`); the `@torch.compile` decorators its layers apply at import
    (`vocab_parallel_embedding.get_masked_input_and_mask`) make torch 2.13 import its inductor
    runtime, which imports `Config` from whatever `triton` is there and fails on the placeholder
    (torch 2.6, which 0.8.5 pins, did not get that far). Imported first, torch finds no Triton,
    as it does under 0.9 on. Every family does it (vLLM imports the same modules anyway), so a
    release placed by its code paths is judged on them, whichever family looks first. Nothing
    is compiled."""
    import torch

    torch.compile(_never_called, dynamic=True, backend="inductor")  # imports what the decorator does


def private_cache() -> None:
    """vLLM's cache root (`VLLM_CACHE_ROOT`, by default ~/.cache/vllm: the registry's
    `modelinfos/`, any compile cache) in this process's private temp dir. Its `envs` reads the
    variable at each access (until a serving engine, never started here, freezes them)."""
    engine_cache("VLLM_CACHE_ROOT", "vllm-cache")


def without_amx() -> None:
    """vLLM's CPU path as on a CPU without AMX, on every machine. On an AMX CPU (Sapphire Rapids
    and later) vLLM chooses its AMX MLA backend, whose weight preparation packs the
    decompression weights with `torch.ops._C.convert_weight_packed`, a CPU kernel the CUDA
    wheel parity installs does not have (the DeepSeek-V3 / Kimi-K2.5 cases ended in exit 2 on
    such a machine and passed on one without AMX). parity replaces the attention and MoE bodies
    with its own stand-ins either way (kernels.py), and every captured state is identified
    numerically, so the choice changes no state parity names; it makes the run the same on
    every CPU. Every family asks `torch.cpu._is_amx_tile_supported()` at the point of choice."""
    import torch

    torch.cpu._is_amx_tile_supported = lambda: False  # noqa: SLF001 - the one question vLLM asks


def inspect_in_process() -> None:
    """vLLM's registry inspects a model class it has not cached (`_LazyRegisteredModel.
    inspect_model_cls`) by running `_ModelInfo.from_model_cls(load_model_cls())` in a fresh Python
    process, so that a GPU process does not initialise CUDA early; that process imports vLLM again
    (about 15 s per architecture on 2 cores). On the CPU there is no CUDA to keep uninitialised:
    the same function is called here, in this process, and returns the same `_ModelInfo`. The
    probe imports the model's module for `get_model` anyway. Every family (0.11-0.33) has the
    same `registry._run_in_subprocess(fn)`; a release without it is CodePathMoved."""
    require(INSPECTION)
    from vllm.model_executor.models import registry

    registry._run_in_subprocess = _call


def _call(fn):
    return fn()


class Platform:
    """The CPU platform selected by `VLLM_TARGET_DEVICE`, before any vLLM model code runs."""

    def platform(self) -> None:
        """Everything before any vLLM model code runs: torch's compiler modules, vLLM's cache in
        this process's private TMPDIR, the CPU platform (its non-AMX path, on every CPU), and the
        registry's model inspection in this process."""
        compiler_first()
        private_cache()
        self.cpu_platform()
        without_amx()
        inspect_in_process()

    def cpu_platform(self) -> None:
        """Select the CPU platform before vLLM is imported (0.33 reads the variable)."""
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        import torch

        if not torch.accelerator.is_available():  # torch 2.13 raises releasing a cache a CPU has not
            torch.accelerator.empty_cache = lambda: None
        platform_first.cpu_platform_unless_chosen()  # also for an older wheel tried here first (0.12-0.15)


class PlatformSetByHand(Platform):
    """The CPU platform set by hand: the CUDA wheel detects none."""

    def cpu_platform(self) -> None:
        import vllm.platforms as platforms
        from vllm.platforms.cpu import CpuPlatform

        platforms._current_platform = CpuPlatform()  # the CUDA wheel detects no CPU platform


class PlatformSetByHandOnOlderTorch(PlatformSetByHand):
    """torch's CPU-capability queries under the private names these releases call, then the CPU
    platform set by hand."""

    def cpu_platform(self) -> None:
        """The CPU platform set by hand, and torch's CPU-capability queries under the private
        names these releases call (aliased where absent; nothing is computed by parity)."""
        import torch

        for name in ("_is_avx512_supported", "_is_amx_tile_supported"):
            if not hasattr(torch._C._cpu, name):
                setattr(torch._C._cpu, name, getattr(torch.cpu, name))
        super().cpu_platform()
