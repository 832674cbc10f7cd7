"""Import-time stand-ins for `torchvision` and `vllm` (and, for the one release family whose
CPU import path needs it, one module of SGLang's kernel package, `sgl_kernel.kvcacheio`), and
nothing else.

Neither can be installed beside the CPU build of torch. SGLang imports them on
the model-code path parity runs (torchvision from an unrelated multimodal config,
vllm from the rotary-embedding init) but never calls into them there. A stand-in
lets that import succeed; any attribute that reaches real use raises
`StandInUsed`, naming the stand-in, so it can never silently change a result.
Installed only when the real package is not importable.

Beside them, one call of torch for one engine call at a time (`cuda_synchronize_on_cpu`):
`torch.cuda.synchronize()` with no CUDA, which stands for waiting on no device and raises
`StandInUsed` for anything more.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import pkgutil
import sys
import types
from pathlib import Path

# Packages that cannot be installed beside the CPU build of torch, besides the engines: torchvision.
NOT_BESIDE_CPU_TORCH = ("torchvision",)


def standin_packages() -> tuple[str, ...]:
    """The whole packages stood in for where missing: torchvision, and every engine parity has a
    folder for (the registry's; the one running here is installed, another engine's cannot be
    installed beside it: SGLang imports vLLM's rotary code on its model path). The folders are
    listed, not imported: this harness sits below the engines (.importlinter)."""
    engines = Path(__file__).with_name("engines")
    return (*NOT_BESIDE_CPU_TORCH, *sorted(m.name for m in pkgutil.iter_modules([str(engines)]) if m.ispkg))


# Modules of a stood-in package that stay absent (ModuleNotFoundError, as without the stand-in):
# SGLang imports vLLM's quantization methods only to learn whether they exist (up to 0.5.3.post3,
# `try: from vllm.model_executor.layers.quantization... except ImportError: VLLM_AVAILABLE =
# False`), and the truthful answer is that they do not; a stand-in there would switch on
# SGLang's patching of vLLM's MoE methods, which then reads them.
ABSENT_UNDER_STANDIN = ("vllm.model_executor.layers.quantization",)


class StandInUsed(RuntimeError):
    """Code reached into a stand-in module: the path under test needs the real package."""


def _used(what: str) -> StandInUsed:
    return StandInUsed(
        f"{what} was used, but {what.split('.')[0]!r} is parity's import-time stand-in (it "
        "cannot be installed beside CPU torch); the code path under test needs the real package")


class _StandInName:
    """What `from torchvision.io import decode_image` binds: inert until used, then it raises."""

    def __init__(self, qualname: str):
        object.__setattr__(self, "_qualname", qualname)

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        raise _used(f"{self._qualname}.{attr}")

    def __call__(self, *args, **kwargs):
        raise _used(self._qualname)

    def __setattr__(self, attr, value):
        raise _used(f"{self._qualname}.{attr}")

    def __getitem__(self, key):
        raise _used(f"{self._qualname}[...]")

    def __iter__(self):
        raise _used(self._qualname)

    def __bool__(self):
        raise _used(self._qualname)

    def __instancecheck__(self, obj) -> bool:
        return False  # `isinstance(x, VideoReader)`: no object is an instance of a class that is not installed

    def __subclasscheck__(self, cls) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<parity stand-in {self._qualname}>"


class _StandInModule(types.ModuleType):
    __parity_standin__ = True

    def __getattr__(self, attr: str):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return _StandInName(f"{self.__name__}.{attr}")


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if (fullname.split(".")[0] not in _active and fullname not in _exact) or not _called_by_import_statement():
            return None
        if any(fullname == name or fullname.startswith(name + ".") for name in ABSENT_UNDER_STANDIN):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        mod = _StandInModule(spec.name)
        mod.__path__ = []
        return mod

    def exec_module(self, module):
        pass


def _called_by_import_statement() -> bool:
    """True for `import x` / `from x import y`; False for availability probes such as
    `importlib.util.find_spec("torchvision")`, so libraries that check for the package
    (transformers does) still see, truthfully, that it is not installed."""
    frame = sys._getframe(2)  # find_spec <- importlib._bootstrap._find_spec <- caller
    while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        if frame.f_code.co_name == "_find_and_load_unlocked":
            return True
        frame = frame.f_back
    return False


_active: set[str] = set()  # whole packages
_exact: set[str] = set()  # single modules (and their parents) of a package otherwise absent
_finder = _StandInFinder()


def install(*modules: str) -> list[str]:
    """Put stand-ins in place for whichever of `standin_packages()` is missing (each whole
    package), and for exactly the dotted `modules` a release family names (the SGLang 0.5.10
    family: `sgl_kernel.kvcacheio`, which that release imports unconditionally on a CPU) when
    their package is missing: that module and its parents only, so the package's other
    modules still fail to import and code that falls back on ImportError still does.
    Returns the names in place."""
    for name in standin_packages():
        if name in _active or name in sys.modules:
            continue
        if importlib.util.find_spec(name) is None:
            _active.add(name)
    for dotted in modules:
        top = dotted.split(".")[0]
        if top in _active or (top not in _exact and (top in sys.modules or importlib.util.find_spec(top) is not None)):
            continue
        parts = dotted.split(".")
        _exact.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    if (_active or _exact) and _finder not in sys.meta_path:
        sys.meta_path.append(_finder)
    return sorted(_active | _exact)


def is_standin(module: types.ModuleType) -> bool:
    return getattr(module, "__parity_standin__", False) is True


def absent_names(module_name: str, *names: str) -> list[str]:
    """Bind each of `names` that the installed module `module_name` lacks to a stand-in name
    (any use raises StandInUsed), so an engine release that imports a helper a newer release of
    that library removed still imports (SGLang 0.4.9-0.4.10 import triton's cache-directory
    helpers, gone in the triton parity installs, for a cache manager no CPU path runs).
    Returns the names bound."""
    import importlib

    module = importlib.import_module(module_name)
    bound = [name for name in names if not hasattr(module, name)]
    for name in bound:
        setattr(module, name, _StandInName(f"{module_name}.{name}"))
    return bound


class cuda_synchronize_on_cpu:
    """`torch.cuda.synchronize()` where torch has no CUDA (the CPU build), for one call of an
    engine method that ends with it as housekeeping: SGLang's MLA draft class for Kimi-K2.5
    (`Eagle3DeepseekV2ForCausalLM.set_embed` / `set_embed_and_head`, 0.5.12-0.5.23) binds the
    target's embedding and then calls `torch.cuda.empty_cache()` (a no-op without CUDA) and
    `torch.cuda.synchronize()`, which the CPU build refuses (AssertionError: Torch not compiled
    with CUDA enabled). It waits for the kernels queued on a CUDA device; without one, none is
    queued, and waiting for none is what it stands for: returning. Anything more raises
    StandInUsed: a device named, or CUDA present or initialised (then the real one runs: on a
    machine with CUDA, nothing is replaced). Used as a context manager around the one call."""

    def __init__(self):
        self.saved = None

    @staticmethod
    def _synchronize(device=None) -> None:
        import torch

        if device is not None:
            raise StandInUsed(f"torch.cuda.synchronize({device!r}) was used, but it is parity's CPU stand-in: "
                              "it stands for waiting on no device, not on a named one")
        if torch.cuda.is_available() or torch.cuda.is_initialized():
            raise StandInUsed("torch.cuda.synchronize() reached parity's CPU stand-in while CUDA is present: "
                              "the real one must run")

    def __enter__(self):
        import torch

        if not torch.cuda.is_available():
            self.saved = torch.cuda.synchronize
            torch.cuda.synchronize = self._synchronize
        return self

    def __exit__(self, *exc) -> None:
        import torch

        if self.saved is not None:
            torch.cuda.synchronize, self.saved = self.saved, None
