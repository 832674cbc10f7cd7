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

from pathlib import Path

from ...child import innermost, package_roots, requirement_not_installed

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


RULES = (cpu_platform_branch, intel_extension_missing, op_library_not_loaded, requirement_left_out)
