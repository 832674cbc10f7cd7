"""The attention pieces a release's CPU platform lacks: MLA (vLLM 0.16-0.28) and attention
sinks (0.11.0).

vLLM's attention layers ask the platform for a backend while the model is built
(`current_platform.get_attn_backend_cls`), then build its impl; parity replaces the layers'
forward bodies (kernels.attention_forward, kernels.mla_forward), so the backend's kernels never
run, but the layer is only built where the platform names a backend that takes the layer.
For MLA (DeepSeek-V3, Kimi-K2.5) 0.16-0.27's `CpuPlatform.get_attn_backend_cls` raises
NotImplementedError("MLA is not supported on CPU."), before parity's MLA stand-in is reached;
0.28 on have a CPU MLA backend (`AttentionBackendEnum.CPU_MLA`, which the 0.33 family runs
under the same stand-in). A GPU's `CudaPlatform` ends its MLA priorities, on every compute
capability, with `TRITON_MLA` (the portable one): parity answers a dense MLA layer with it.
Every other question goes to the release's own method unchanged. The chosen backend is only
built (its impl's constructor, the layer's `process_weights_after_loading`: vLLM's own code); its
kernel bodies (the impl's `forward`, `forward_mqa`, `forward_mha`) are replaced by bodies that
raise KernelStandInError, so nothing can read a value from them. The MLA layer also needs, on
0.22-0.28, a prefill backend (`get_mla_prefill_backend`, called by `MLAAttention.__init__` by its
imported name), which on a device without a compute capability is FlashAttention's, whose module
imports what `fa_utils` defines only for CUDA, XPU and ROCm (ImportError:
compile_flash_attn_varlen_func_from_specs; 0.29 on have a CPU one, `MLAPrefillBackendEnum.CPU`):
on the CPU platform parity gives a subclass of the
release's `MLAPrefillBackend` (its constructor and `clone` vLLM's) whose prefill kernels raise;
and on 0.16-0.21 `MLACommonImpl.__init__` requires `mla_attention.flash_attn_varlen_func`, None
because `vllm.vllm_flash_attn` (a CUDA extension) does not load on a CPU: a function that raises
if called goes there (the constructor only stores it). On 0.22 (0.22.0, 0.22.1) the TRITON_MLA
impl's constructor asks the platform for the GPU's SM count (`self._sm_count =
current_platform.num_compute_units()`), which that CPU platform does not implement (the base
`Platform`'s NotImplementedError; 0.23's CPU platform answers its thread count); the only reader
of `_sm_count` is the impl's `forward_mqa` (the split count of its decode kernel's launch), a
kernel body parity replaced: while that constructor runs, the platform answers `UncountedUnits`,
a value that raises KernelStandInError on any use (arithmetic, comparison, conversion), so nothing
parity computes can depend on it. What the layers then compute is checked the way every
extraction checks it (each captured state named against transformers;
tests/test_vllm_cpu_attention.py).

Attention sinks (gpt-oss: one learned logit per head): 0.11.0's CPU platform answers every
dense layer with `TorchSDPABackend`, whose impl's constructor takes no `sinks` (TypeError:
TorchSDPABackendImpl.__init__() got an unexpected keyword argument 'sinks'), so the layer is
not built; a GPU install (CudaPlatform, capability 8.0 on) gives such a layer a backend that
takes them, `TRITON_ATTN` below capability 9.0 (FLASH_ATTN from 9.0, FlashInfer on 10.0).
0.11.1's CPU backend (CPU_ATTN, `CPUAttentionBackendImpl`) takes `sinks`, and its platform is
asked without `use_v1`. Where the CPU platform is asked 0.11's question (`has_sink` among its
parameters) and its own backend's impl takes none, parity answers a layer with sinks with the
GPU's `TRITON_ATTN`, built only as above (`install_sinks`); parity's `Attention.forward` honours
the layer's sinks (kernels._windowed_with_sinks). That impl's constructor checks the head size
its Triton kernel takes (`TritonAttentionBackend.validate_head_size`: 32 and up; real gpt-oss
has 64); a family may name head sizes that check also accepts (the tiny target's, shrink.TINY's
16), since the kernel it guards never runs here; every other size gets the release's own check.
"""

from __future__ import annotations

import importlib
import inspect

from .kernels import KernelStandInError

MLA_FALLBACK = "TRITON_MLA"  # CudaPlatform's last MLA choice on every compute capability
KERNEL_BODIES = ("forward", "forward_mqa", "forward_mha")  # an impl's kernels
PREFILL_KERNELS = ("run_prefill_new_tokens", "run_prefill_context_chunk")


def _never_run(name: str):
    def body(self, *args, **kwargs):
        raise KernelStandInError(f"{type(self).__name__}.{name}: parity chose this GPU backend only so that "
                                 "vLLM builds the layer on a CPU; its kernel does not run here (the layer's "
                                 "forward is parity's stand-in)")
    body.__parity_standin__ = True
    return body


def _never_run_function(name: str):
    def kernel(*args, **kwargs):
        raise KernelStandInError(f"{name}: the wheel's CUDA kernel does not load on a CPU; parity put this "
                                 "in its place only so that vLLM builds the MLA layer (MLAAttention.forward "
                                 "is parity's stand-in)")
    kernel.__parity_standin__ = True
    return kernel


class UncountedUnits:
    """The GPU's SM count a built-only impl's constructor stores and only its (replaced) kernel
    reads: any use of the value raises KernelStandInError."""

    def __init__(self, asker: str):
        self.asker = asker

    def __repr__(self) -> str:
        return f"UncountedUnits({self.asker})"

    def _used(self, *args, **kwargs):
        raise KernelStandInError(f"{self.asker}: the GPU's compute-unit count has no value on parity's CPU "
                                 "run (the constructor only stores it for its kernel, which parity replaced); "
                                 "something relied on it")


for _name in ("__int__", "__index__", "__float__", "__bool__", "__str__", "__format__", "__hash__",
              "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__neg__", "__pos__", "__abs__",
              *(f"__{op}__" for base in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift",
                                         "rshift", "and", "or", "xor", "matmul")
                for op in (base, f"r{base}"))):
    setattr(UncountedUnits, _name, UncountedUnits._used)
del _name


def _asks_uncounted_units(impl: type) -> bool:
    """Whether `impl`'s own constructor asks the platform for `num_compute_units` (read from its
    code object's names) and the CPU platform leaves that to the base Platform, which raises
    (0.22's TRITON_MLA; 0.23 on, the CPU platform answers it; 0.16-0.21's impl does not ask)."""
    from vllm.platforms.cpu import CpuPlatform
    from vllm.platforms.interface import Platform

    init = vars(impl).get("__init__")
    if getattr(init, "__parity_standin__", False):  # answered already
        return True
    code = getattr(init, "__code__", None)
    own = getattr(Platform, "num_compute_units", None)
    return (code is not None and "num_compute_units" in code.co_names and own is not None
            and getattr(CpuPlatform.num_compute_units, "__func__", None) is own.__func__)


def _compute_units_uncounted(impl: type) -> None:
    """`impl`'s constructor run with the CPU platform's `num_compute_units` answering
    UncountedUnits (where it asks and the CPU platform lacks it): the count its replaced kernel
    would read."""
    init = impl.__init__
    if getattr(init, "__parity_standin__", False) or not _asks_uncounted_units(impl):
        return  # answered already, or not asked
    from vllm.platforms.cpu import CpuPlatform

    asker = f"{impl.__name__}.__init__ (num_compute_units)"

    def __init__(self, *args, **kwargs):
        CpuPlatform.num_compute_units = classmethod(lambda cls, device_id=0: UncountedUnits(asker))
        try:
            init(self, *args, **kwargs)
        finally:
            del CpuPlatform.num_compute_units  # the base Platform's again

    __init__.__parity_standin__ = True
    impl.__init__ = __init__


def _resolve(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _built_only(path: str) -> str:
    """The backend at `path`, its impl's kernel bodies raising; returns `path`."""
    impl = _resolve(path).get_impl_cls()
    for name in KERNEL_BODIES:
        if name in vars(impl) or hasattr(impl, name):
            setattr(impl, name, _never_run(name))
    _compute_units_uncounted(impl)
    return path


def _has_mla_layer() -> bool:
    """Whether the release has the MLA layer parity's MLA stand-in replaces (0.16 on)."""
    import importlib.util

    return importlib.util.find_spec("vllm.model_executor.layers.attention") is not None and \
        importlib.util.find_spec("vllm.model_executor.layers.attention.mla_attention") is not None


SINK_FALLBACK = "vllm.v1.attention.backends.triton_attn.TritonAttentionBackend"  # CudaPlatform's TRITON_ATTN (0.11)
# 0.11's question to the platform, for a gpt-oss layer (real head size): its parameters exactly
SINK_QUESTION = {"selected_backend": None, "head_size": 64, "kv_cache_dtype": None, "block_size": 16,
                 "use_v1": True, "use_mla": False, "has_sink": True, "use_sparse": False}


def _takes(cls: type, name: str) -> bool:
    """Whether `cls`'s constructor takes the keyword `name` (by name or through **kwargs)."""
    parameters = inspect.signature(cls.__init__).parameters
    return name in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


def _head_sizes_waived(backend: type, head_sizes: tuple[int, ...]) -> list[str]:
    """`backend.validate_head_size` (a limit of its kernel) accepting `head_sizes` too; every
    other size gets the release's own check. Returns the line saying so ([] if none was waived)."""
    own = backend.validate_head_size
    waived = tuple(size for size in head_sizes if not getattr(own, "__parity_standin__", False)
                   and _refused(own, size))
    if not waived:
        return []

    def validate_head_size(cls, head_size: int) -> None:
        if head_size not in waived:
            own(head_size)

    validate_head_size.__parity_standin__ = True
    backend.validate_head_size = classmethod(validate_head_size)
    return [f"{backend.__name__}.validate_head_size (its kernel's sizes) -> also {', '.join(map(str, waived))}, "
            "the tiny target's (the kernel never runs here)"]


def _refused(validate, head_size: int) -> bool:
    try:
        validate(head_size)
    except ValueError:
        return True
    return False


def install_sinks(head_sizes: tuple[int, ...] = ()) -> list[str]:
    """Where the CPU platform is asked 0.11's question (SINK_QUESTION's parameters, `has_sink`
    among them) and its own backend's impl takes no sinks (0.11.0's TorchSDPA): a layer with
    sinks gets the GPU's TRITON_ATTN, built only (its kernels raise), its head-size check also
    accepting `head_sizes`. Returns the family's lines for what it answered ([] where the
    release's own answer stands)."""
    from vllm.platforms.cpu import CpuPlatform

    current = CpuPlatform.get_attn_backend_cls
    own = getattr(current, "__parity_own__", None) or current.__func__
    signature = inspect.signature(own)
    if set(list(signature.parameters)[1:]) != {*SINK_QUESTION, "dtype"}:
        return []  # not 0.11's question (0.10 has no `use_sparse`): the release's own answer
    import torch

    cpu_backend = own(CpuPlatform, dtype=torch.get_default_dtype(), **SINK_QUESTION)
    if _takes(_resolve(cpu_backend).get_impl_cls(), "sinks"):
        return []  # a CPU backend that takes sinks: the release's own answer
    if not getattr(current, "__parity_standin__", False):
        def get_attn_backend_cls(cls, *args, **kwargs):
            if signature.bind(cls, *args, **kwargs).arguments.get("has_sink"):
                return _built_only(SINK_FALLBACK)
            return own(cls, *args, **kwargs)

        get_attn_backend_cls.__parity_standin__ = True
        get_attn_backend_cls.__parity_own__ = own
        CpuPlatform.get_attn_backend_cls = classmethod(get_attn_backend_cls)
    return [f"vllm.platforms.cpu.CpuPlatform.get_attn_backend_cls (its {cpu_backend.rpartition('.')[2]}"
            " takes no sinks) -> the GPU's TRITON_ATTN for a layer with sinks, built only (its kernels raise if "
            "called)", *_head_sizes_waived(_resolve(SINK_FALLBACK), head_sizes)]


def install() -> list[str]:
    """Where the release has the MLA layer: with no CPU MLA backend, its CPU platform answers a
    dense MLA layer with the GPU's TRITON_MLA, built only; the layer's FlashAttention prefill
    pieces, where its CPU has none, stand-ins that raise. Returns the family's lines for what it
    answered ([] when nothing was)."""
    if not _has_mla_layer():
        return []
    return [*_mla_choice(), *_prefill_never_run(), *_varlen_never_run()]


def _mla_choice() -> list[str]:
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    if hasattr(AttentionBackendEnum, "CPU_MLA"):  # 0.28 on: the release's own
        return []
    from vllm.platforms.cpu import CpuPlatform

    current = CpuPlatform.get_attn_backend_cls
    if not getattr(current, "__parity_standin__", False):
        own = current.__func__
        signature = inspect.signature(own)

        def get_attn_backend_cls(cls, *args, **kwargs):
            config = signature.bind(cls, *args, **kwargs).arguments["attn_selector_config"]
            if config.use_mla and not config.use_sparse:
                return _built_only(getattr(AttentionBackendEnum, MLA_FALLBACK).get_path())
            return own(cls, *args, **kwargs)

        get_attn_backend_cls.__parity_standin__ = True
        CpuPlatform.get_attn_backend_cls = classmethod(get_attn_backend_cls)
    lines = [f"vllm.platforms.cpu.CpuPlatform.get_attn_backend_cls (raises for MLA) -> the GPU's {MLA_FALLBACK} "
             "for a dense MLA layer, built only (its kernels raise if called)"]
    if _asks_uncounted_units(getattr(AttentionBackendEnum, MLA_FALLBACK).get_class().get_impl_cls()):
        lines.append(f"vllm.platforms.cpu.CpuPlatform.num_compute_units (not implemented), asked by the "
                     f"{MLA_FALLBACK} impl's constructor for its kernel -> UncountedUnits, which raises if used")
    return lines


def _prefill_never_run() -> list[str]:
    """Where `MLAAttention.__init__` builds a prefill backend (0.22 on) and the release's prefill
    registry has no CPU one (0.22-0.28; `MLAPrefillBackendEnum.CPU` from 0.29): on the CPU
    platform, a subclass of the release's `MLAPrefillBackend` whose prefill kernels raise."""
    from vllm.model_executor.layers.attention import mla_attention

    choose = getattr(mla_attention, "get_mla_prefill_backend", None)
    if choose is None:
        return []
    from vllm.v1.attention.backends.mla.prefill.registry import MLAPrefillBackendEnum

    if hasattr(MLAPrefillBackendEnum, "CPU"):
        return []
    if not getattr(choose, "__parity_standin__", False):
        from vllm.platforms import current_platform
        from vllm.v1.attention.backends.mla.prefill.base import MLAPrefillBackend

        standin = type("PrefillNeverRun", (MLAPrefillBackend,), {
            "__doc__": "parity's stand-in: built by vLLM's own constructor; its prefill kernels raise.",
            "get_name": staticmethod(lambda: "PARITY_PREFILL_NEVER_RUN"),
            **{name: _never_run(name) for name in PREFILL_KERNELS}})

        def get_mla_prefill_backend(vllm_config, *args, **kwargs):
            if current_platform.is_cpu():
                return standin
            return choose(vllm_config, *args, **kwargs)

        get_mla_prefill_backend.__parity_standin__ = True
        mla_attention.get_mla_prefill_backend = get_mla_prefill_backend
    return ["vllm.model_executor.layers.attention.mla_attention.get_mla_prefill_backend (FlashAttention's, "
            "CUDA-only imports) -> a prefill backend built by the release's MLAPrefillBackend, its kernels raise"]


def _varlen_never_run() -> list[str]:
    """Where the installed `mla_attention` found no FlashAttention (`flash_attn_varlen_func` None;
    0.16-0.21, whose MLA impl's constructor requires one): one that raises if called."""
    from vllm.model_executor.layers.attention import mla_attention

    if "flash_attn_varlen_func" not in vars(mla_attention):
        return []
    if mla_attention.flash_attn_varlen_func is None:
        mla_attention.flash_attn_varlen_func = _never_run_function("flash_attn_varlen_func")
    if not getattr(mla_attention.flash_attn_varlen_func, "__parity_standin__", False):
        return []  # a FlashAttention the release loaded: its own
    return ["vllm.model_executor.layers.attention.mla_attention.flash_attn_varlen_func (vllm_flash_attn, "
            "a CUDA extension) -> raises if called (stored by the MLA impl's constructor, never called)"]
