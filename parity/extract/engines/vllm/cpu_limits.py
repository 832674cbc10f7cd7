"""When vLLM stops on parity's CPU run where its GPU install would not: limits of parity's CPU
harness (exit 2, "parity cannot run" in the release table), never the engine's refusal. Each is
decided from what the installed code does, read off the exception and its traceback, never from
its message (registered with parity.extract.child.LIMIT_RULES by the probe):

- `cpu_platform_branch`: raised inside vLLM's CPU platform (`vllm/platforms/cpu.py`, the
  `CpuPlatform` parity runs the release on; a GPU install runs `CudaPlatform`): such as its
  `get_attn_backend_cls`'s NotImplementedError for MLA ("MLA is not supported on CPU"), which
  DeepSeek-V3 met on 0.16-0.27 until parity answered that choice (cpu_attention), or for sparse
  attention; and a method of the base `Platform` (`vllm/platforms/interface.py`) the CPU
  platform does not implement, asked of it (NotImplementedError: `num_compute_units`, a GPU's SM
  count, which the GPU's TRITON_MLA impl parity builds asks on 0.22.x, answered there by
  cpu_attention.UncountedUnits; any other consumer is still this limit);
- `cpu_backend_lacks_argument`: vLLM's attention layer builds the impl of the backend its CPU
  platform chose with an argument that impl's constructor does not take, while the impl of the
  GPU's backend a CUDA install would choose for it takes it (TypeError from binding the call in
  the layer's frame, read off the frame's `impl_cls` and `extra_impl_args` and the constructors'
  signatures): gpt-oss's `sinks` on 0.11.0, whose `TorchSDPABackendImpl` takes none (parity
  answers that choice with the GPU's TRITON_ATTN, cpu_attention.install_sinks; were that answer
  missing, the run is this limit, never the engine's refusal);
- `intel_extension_missing`: vLLM's code imports `intel_extension_for_pytorch` (Intel's
  extension, which its CPU and XPU paths use: `attention/backends/torch_sdpa.py`,
  `_ipex_ops.py` up to 0.9, `v1/attention/backends/cpu_attn.py` later) and it is not installed:
  the DeepSeek-V3 dump on 0.8.5-0.9.2; a GPU install takes its CUDA backend and never imports it
  (gpt-oss's fused MoE on 0.10-0.11.x imports it too: parity's stand-in, moe_cpu, runs instead);
- `op_library_not_loaded`: vLLM looks an op up in a `torch.ops` namespace that one of its own
  compiled libraries registers (`vllm/_moe_C.abi3.so` for `torch.ops._moe_C`, built against
  CUDA, which parity's CPU torch does not load), such as `torch.ops._moe_C.topk_softmax` of the
  CUDA fused-MoE route (which gpt-oss on 0.12.0-0.14.1 took while parity left vLLM's platform
  unresolved: platform_first);
- `requirement_left_out`: vLLM's code imports a module its wheel requires (`Requires-Dist`)
  that parity's CPU environment does not install (parity.extract.child.requirement_not_installed):
  `lmformatenforcer`, from lm-format-enforcer, which `vllm serve`'s argument parsing imports on
  0.11.1-0.14.1.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from ...child import innermost, package_roots, requirement_not_installed
from ...run_until import CodePathMoved, installed_spec

IPEX = "intel_extension_for_pytorch"


def _vllm_path(tb) -> str:
    """The frame's file from the vllm package's folder (`vllm/platforms/cpu.py`)."""
    path = Path(tb.tb_frame.f_code.co_filename).resolve()
    for root in package_roots("vllm"):
        if path.is_relative_to(root):
            return f"vllm/{path.relative_to(root).as_posix()}"
    return path.as_posix()


def cpu_platform_branch(exc: BaseException) -> str | None:
    tb, _ = innermost(exc, "vllm")
    if tb is None:
        return None
    where = _vllm_path(tb)
    # the base Platform's NotImplementedError for a method the CPU platform does not implement
    # (0.22's TritonMLAImpl asks `num_compute_units`, a GPU's SM count), asked of CpuPlatform
    asked = tb.tb_frame.f_locals.get("cls")
    unimplemented = (where == "vllm/platforms/interface.py" and isinstance(exc, NotImplementedError)
                     and getattr(asked, "__name__", None) == "CpuPlatform")
    if where != "vllm/platforms/cpu.py" and not unimplemented:
        return None
    text = " ".join(str(exc).split())
    return (f"vLLM's CPU platform, which parity runs it on, has no path for this: {type(exc).__name__}"
            f"{': ' + text if text else ''} (raised by {where}:{tb.tb_lineno} {tb.tb_frame.f_code.co_name}); "
            "a GPU install runs its CUDA platform")


def _takes(cls: type, name: str) -> bool:
    """Whether `cls`'s constructor takes the keyword `name` (by name or through **kwargs)."""
    import inspect

    parameters = inspect.signature(cls.__init__).parameters
    return name in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


def cpu_backend_lacks_argument(exc: BaseException) -> str | None:
    if not isinstance(exc, TypeError) or exc.__traceback__ is None:
        return None
    tb = exc.__traceback__
    while tb.tb_next is not None:  # the call's binding failed in this frame (no frame of the constructor)
        tb = tb.tb_next
    impl, passed = tb.tb_frame.f_locals.get("impl_cls"), tb.tb_frame.f_locals.get("extra_impl_args")
    if not isinstance(impl, type) or not isinstance(passed, dict) or not _vllm_path(tb).startswith("vllm/"):
        return None
    missing = [name for name in passed if not _takes(impl, name)]
    from vllm.platforms import current_platform

    if not missing or type(current_platform).__name__ != "CpuPlatform":
        return None
    from .cpu_attention import SINK_FALLBACK  # deferred: imports torch

    module, _, name = SINK_FALLBACK.rpartition(".")
    try:
        found = installed_spec(module)
    except CodePathMoved:  # there, but not importable here: not decided here either
        found = None
    if found is None:
        return None  # a release that keeps its GPU backends elsewhere: not decided here
    gpu = getattr(importlib.import_module(module), name).get_impl_cls()
    if not all(_takes(gpu, argument) for argument in missing):
        return None  # no GPU backend parity knows takes it either: the engine's own answer
    return (f"the attention backend vLLM's CPU platform, which parity runs it on, chose for this layer "
            f"({impl.__name__}, at {_vllm_path(tb)}:{tb.tb_lineno}) takes no {', '.join(missing)}; "
            f"a GPU install chooses a CUDA backend that takes it ({gpu.__name__})")


def intel_extension_missing(exc: BaseException) -> str | None:
    if not isinstance(exc, ModuleNotFoundError) or (exc.name or "").split(".")[0] != IPEX:
        return None
    tb, _ = innermost(exc, "vllm")
    if tb is None:
        return None
    return (f"vLLM's CPU path imports {IPEX} (at {_vllm_path(tb)}:{tb.tb_lineno}), Intel's extension, which parity's "
            "CPU environment does not install; a GPU install takes its CUDA backend and never imports it")


def op_library_not_loaded(exc: BaseException) -> str | None:
    if not isinstance(exc, AttributeError):
        return None
    tb, lookup = exc.__traceback__, None
    while tb is not None:  # the innermost frame of torch's op lookup, `_OpNamespace.__getattr__`
        if tb.tb_frame.f_code.co_name == "__getattr__" and type(tb.tb_frame.f_locals.get("self")).__name__ == "_OpNamespace":
            lookup = tb.tb_frame
        tb = tb.tb_next
    if lookup is None:
        return None
    name, op = getattr(lookup.f_locals["self"], "name", None), lookup.f_locals.get("op_name", "?")
    libraries = [lib for root in package_roots("vllm") for lib in sorted(root.glob(f"{name}.*"))
                 if lib.suffix in (".so", ".pyd")] if name else []
    if not libraries:
        return None  # no library of vLLM registers it: not a library parity's CPU torch leaves unloaded
    caller, _ = innermost(exc, "vllm")
    where = f" (looked up at {_vllm_path(caller)}:{caller.tb_lineno})" if caller is not None else ""
    return (f"vLLM looks up torch.ops.{name}.{op}{where}, an op of its compiled library "
            f"vllm/{libraries[0].name}, built for CUDA, which parity's CPU torch does not load; a GPU install loads it")


def requirement_left_out(exc: BaseException) -> str | None:
    from importlib import metadata

    try:
        version, requires = metadata.version("vllm"), metadata.requires("vllm") or []
    except metadata.PackageNotFoundError:
        return None
    return requirement_not_installed(exc, "vllm", version, requires)


RULES = (cpu_platform_branch, cpu_backend_lacks_argument, intel_extension_missing, op_library_not_loaded,
         requirement_left_out)
