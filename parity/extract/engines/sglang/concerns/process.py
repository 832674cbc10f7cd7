"""The process concern: how the extraction's process is set up to run a release (its CPU
stand-ins, the rotary embedding's device, its groups), and the check that every engine name the
adapter runs is in the installed source (`check_code_paths`, one for every family: the engine
names each concern's variant declares, then each concern's own statement checks).

- `Process` (0.5.16 on): the runtime context reset and the gloo groups made by SGLang's own
  `initialize_model_parallel`, one process or one rank of a tp x pp layout (`setup_rank`); off a
  GPU the rotary-embedding device lookup answers "cpu" and a hybrid target's (Qwen3-Next)
  Triton-only GDN kernels and shared-expert gate get CPU stand-ins for their bodies
  (gdn_standin.py, shared_gate_standin.py). Nothing runs before the engine is imported.
- `ProcessWithTorchvisionStandin` (0.5.21): the torchvision stand-in imported first
  (import_standin_torchvision).
- `ProcessWithInterpolationModes` (0.5.16-0.5.20): the stand-in's inert InterpolationMode given
  first (give_standin_interpolation_modes: their `sglang.srt.utils.common` imports `torchvision.io`).
- `SingleProcess` (0.5.11-0.5.15): no runtime context; one process's gloo groups; off CUDA the
  draft's `set_embed` ends with `torch.cuda.synchronize()` (0.5.16 on asks the platform layer), so
  with no CUDA device it is a no-op; the code paths are checked at the end of the set-up.
- `SingleProcessWithKvCacheStandin` (0.5.8-0.5.10), `SingleProcessWithLayersAsOnGpu` (0.4.9-0.5.7)
  and `SingleProcessWithOldTorchNames` (0.4.4.post2-0.5.3.post1): as `SingleProcess`, with the
  stand-ins those releases need before their engine is imported and once it is (each says which),
  and the rotary embedding's device lookup wherever the release keeps it (rope_device_on_cpu).
"""

from __future__ import annotations

import enum
import importlib
import inspect
import sys

import torch

from .... import standins
from ....run_until import import_as_on_gpu, require
from .. import gdn_standin, moe_standin, rope_standin, shared_gate_standin

# The attributes each concern names the engine code its variant runs in (the adapter's code
# paths, `requires`), and the order `check_code_paths` requires them in.
CODE_PATH_ATTRS = ("PROCESS_PATHS", "LAUNCH_PATHS", "CONFIG_PATHS", "CAPTURE_PATHS", "TARGET_PATHS",
                   "BATCHES_PATHS", "CONTEXT_PATHS", "DRAFT_PATHS")

INTERPOLATION_MODES = "NEAREST NEAREST_EXACT BILINEAR BICUBIC BOX HAMMING LANCZOS"
KERNEL_STANDINS = ("sgl_kernel.kvcacheio",)
ROPE_DEVICE = ("sglang.srt.layers.rotary_embedding.rope_variant", "sglang.srt.layers.rotary_embedding")
ON_GPU = ("sglang.srt.layers.activation", "sglang.srt.layers.layernorm")  # their vLLM fallback left out
TRITON_CACHE_HELPERS = ("default_cache_dir", "default_dump_dir", "default_override_dir")

_GROUPS = ("sglang.srt.distributed.parallel_state.init_distributed_environment",
           "sglang.srt.distributed.parallel_state.initialize_model_parallel")
_ROPE_VARIANT = "sglang.srt.layers.rotary_embedding.rope_variant.get_device"


def give_standin_interpolation_modes() -> None:
    """An inert InterpolationMode on the torchvision stand-in: transformers 5.6-5.12 build a
    PIL -> torchvision interpolation table at import time when they believe torchvision is
    installed, which the stand-in (needed by releases whose `sglang.srt.utils.common` imports
    `torchvision.io` at module level) makes them believe. No text-model path reads it.
    transformers 5.12 also compares torchvision's version at import time
    (`is_torchvision_greater_or_equal`, picking image processors' PIL defaults): the stand-in
    says `0.0.0+parity.standin`, which parses and is older than every real release."""
    if "torchvision" not in standins._active:  # a real torchvision is installed: nothing to do
        return
    transforms = importlib.import_module("torchvision.transforms")
    if standins.is_standin(transforms) and "InterpolationMode" not in vars(transforms):
        transforms.InterpolationMode = enum.Enum("InterpolationMode", INTERPOLATION_MODES)
    top = sys.modules["torchvision"]
    if standins.is_standin(top) and "__version__" not in vars(top):
        top.__version__ = "0.0.0+parity.standin"


def import_standin_torchvision() -> None:
    """Import the torchvision stand-in (when no real torchvision is installed), as the releases
    whose `utils.common` imports `torchvision.io` do at module level, before transformers is
    asked whether torchvision exists, and give it the inert InterpolationMode and version
    (give_standin_interpolation_modes). SGLang 0.5.21's `sglang.srt.configs` registers image
    processors with transformers 5.12's `AutoImageProcessor`, which refuses unless torchvision is
    installed; torchvision cannot be installed beside CPU torch, so the stand-in is imported
    first (as 0.5.16-0.5.20's `utils.common` does itself), and transformers, asked afterwards,
    finds it. No text-model path reads it (a stand-in raises if anything does)."""
    if "torchvision" in standins._active:
        importlib.import_module("torchvision")
        give_standin_interpolation_modes()


def import_layers_as_on_gpu() -> None:
    """Off CUDA, SGLang up to 0.5.7's `layers/activation.py` and `layers/layernorm.py` re-bind
    `SiluAndMul`, `GeluAndMul`, `RMSNorm` and `GemmaRMSNorm` to vLLM's classes at import time (a
    top-level `if not (_is_cuda or ...): from vllm... import ...`). A GPU launch keeps SGLang's
    own, so those two modules are imported without that one statement (run_until.import_as_on_gpu),
    before anything imports a model or layer module; the classes' own dispatch then picks their
    CPU-native forward, as for every other layer."""
    for name in ON_GPU:
        import_as_on_gpu(name, package="vllm")


def old_torch_and_triton_names() -> None:
    """What SGLang 0.4.4.post2-0.5.3.post1 import that parity's torch and triton renamed or removed:
    - up to 0.5.2, `utils.cpu_has_amx_support()` (run at import) calls
      `torch._C._cpu._is_amx_tile_supported()`, which torch 2.13 keeps as
      `torch.cpu._is_amx_tile_supported`: the same function is aliased under the old name where
      absent (as the vLLM 0.17 family does). The answer is `... and is_intel_amx_backend_available`
      (SGLang's CPU kernels, never installed beside parity), so it is False whatever the CPU:
      SGLang stays on its CPU-native forwards, as on every other release parity runs;
    - 0.4.9-0.4.10 import `default_cache_dir`, `default_dump_dir` and `default_override_dir` from
      `triton.runtime.cache` for a triton cache manager no CPU path runs; the triton parity
      installs no longer has them, so each absent one is a stand-in name that raises when used
      (standins.absent_names)."""
    if not hasattr(torch._C._cpu, "_is_amx_tile_supported"):
        torch._C._cpu._is_amx_tile_supported = torch.cpu._is_amx_tile_supported
    standins.absent_names("triton.runtime.cache", *TRITON_CACHE_HELPERS)


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


def rope_device_on_cpu() -> None:
    """The rotary embedding's device lookup answers "cpu" wherever the release keeps it:
    `rotary_embedding/rope_variant.py` (0.5.10), `layers/rotary_embedding.py` (0.5.9) or nowhere
    (0.5.8 and older). A rope class that builds its cache on a device of its own may name the GPU
    launch's accelerator as its default instead of asking (DeepSeek's YaRN rope up to 0.5.8): it
    defaults to "cpu" (accelerator_default_on_cpu), since on a CPU-only torch that default could
    only raise."""
    for name in ROPE_DEVICE:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:  # 0.5.9 and older: no rope_variant module
            continue
        if hasattr(module, "get_device"):
            module.get_device = lambda device_id=None: "cpu"
        accelerator_default_on_cpu(module)


def install_moe_and_rope_standins() -> None:
    """Before the model is built (its ops bind their method then), on SGLang 0.5.0rc0-0.5.10.post1:
    the non-CUDA MoE method ignores the experts' biases and gpt-oss's clamped SwiGLU, so
    moe_standin.py computes the CUDA route for the layers that carry them (any other layer runs
    the release's own method); on 0.5.0rc1-0.5.3rc0 gpt-oss hands the rotary op
    `fused_set_kv_buffer_arg` (None off CUDA), which only its CUDA method takes: rope_standin.py
    lets the non-CUDA method take it as None."""
    moe_standin.install()
    rope_standin.install()


class Process:
    """The runtime context and SGLang's own groups, one process or one rank of a layout; the code
    paths checked."""

    PROCESS_PATHS: tuple[str, ...] = (*_GROUPS, _ROPE_VARIANT, "sglang.srt.runtime_context.reset_context")

    # The families whose adapter runs the capture on several ranks (the parallel layout: parity's
    # multi-process capture, ranks.py); under any other, a layout of more than one rank is
    # parity's limit, said (docs/launch.md, "The parallel layout").
    RANK_FAMILIES: tuple[str, ...] = ("0.5.23",)
    rank, tp, pp = 0, 1, 1  # this process's place in the layout (setup_rank)
    dist_timeout: int | None = None  # seconds a collective waits for a peer (setup_rank), else the engine's

    def runs_ranks(self) -> bool:
        return getattr(self, "family", None) in self.RANK_FAMILIES

    def setup_rank(self, port: int, draft_dir: str | None, rank: int, tp: int, pp: int, timeout: int) -> None:
        """`setup` as rank `rank` of a layout of `tp` x `pp` ranks (a family that `runs_ranks`)."""
        self.rank, self.tp, self.pp, self.dist_timeout = rank, tp, pp, timeout
        self.setup(port, draft_dir)

    def setup(self, port: int, draft_dir: str | None, device: str = "cpu") -> None:
        """Publish the server args for `draft_dir` and start the gloo groups on `port`: one process,
        or (`setup_rank`) one rank of a layout of tp x pp ranks, numbered as SGLang's launcher
        numbers them (`distributed.bootstrap._init_parallel_groups`: world tp*pp, rank
        tp*pp_rank + tp_rank), the widths published in the server args and the groups made by its
        own `initialize_model_parallel`. Off a GPU, the rotary embedding's device and the model
        stand-ins first."""
        self.before_engine_imports()
        from sglang.srt import runtime_context as rc
        from sglang.srt.distributed import parallel_state as ps

        self.device = device
        if not device.startswith("cuda"):
            self.rope_on_cpu()
            self.install_model_standins()
        rc.reset_context()
        self.publish(draft_dir)
        ps.init_distributed_environment(world_size=self.tp * self.pp, rank=self.rank, local_rank=0, backend="gloo",
                                        distributed_init_method=f"tcp://127.0.0.1:{port}", timeout=self.dist_timeout)
        ps.initialize_model_parallel(backend="gloo")

    def before_engine_imports(self) -> None:
        """What must be in place before the engine is imported: nothing in this release."""

    def rope_on_cpu(self) -> None:
        """The rotary-embedding module's device lookup answers "cpu" (it asks for an accelerator)."""
        import sglang.srt.layers.rotary_embedding.rope_variant as rope_variant

        rope_variant.get_device = lambda device_id=None: "cpu"

    def install_model_standins(self) -> None:
        """Off a GPU: Qwen3-Next's GDN split and gated norm (before the model is built) and the
        shared expert's sigmoid gate (Qwen2-MoE's block) by their CPU stand-ins."""
        gdn_standin.install()
        shared_gate_standin.install()

    @classmethod
    def requires(cls) -> tuple[str, ...]:
        """Every engine name this adapter's CPU extraction and forward run (the GPU-only backend
        resolver aside), each concern's in turn: a release outside every family's range runs with
        this adapter only when each of them is found in its installed source
        (parity.extract.families.place)."""
        return tuple(dict.fromkeys(name for attr in CODE_PATH_ATTRS for name in getattr(cls, attr)))

    def check_code_paths(self) -> None:
        """A loud CodePathMoved (naming what was looked for) unless every engine name this
        adapter runs is in the installed source, and each statement a concern runs alone is where
        it looks. Imports engine modules: run it after parity's CPU stand-ins are installed."""
        self.before_engine_imports()
        require(*self.requires())
        self.check_capture_paths()
        self.check_context_paths()
        self.check_target_paths()


class ProcessWithTorchvisionStandin(Process):
    """The torchvision stand-in imported before the engine's configs register image processors."""

    def before_engine_imports(self) -> None:
        import_standin_torchvision()


class ProcessWithInterpolationModes(Process):
    """The torchvision stand-in's InterpolationMode given before the engine is imported."""

    def before_engine_imports(self) -> None:
        give_standin_interpolation_modes()


class SingleProcess(Process):
    """One process's gloo groups, no runtime context; the `torch.cuda.synchronize` no-op; the code
    paths checked once set up."""

    PROCESS_PATHS: tuple[str, ...] = (*_GROUPS, _ROPE_VARIANT)

    def before_engine_imports(self) -> None:
        give_standin_interpolation_modes()

    def setup(self, port: int, draft_dir: str | None, device: str = "cpu") -> None:
        self.before_engine_imports()
        from sglang.srt.distributed import parallel_state as ps

        self.device = device
        if not device.startswith("cuda"):
            self.rope_on_cpu()
        if not torch.cuda.is_available():
            # The draft's set_embed ends with torch.cuda.synchronize() (0.5.16 on asks the platform
            # layer instead); with no CUDA device there is nothing to wait for.
            torch.cuda.synchronize = lambda device=None: None
        self.port = port
        self.publish(draft_dir)
        ps.init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                        distributed_init_method=f"tcp://127.0.0.1:{port}")
        ps.initialize_model_parallel(backend="gloo")
        self.check_code_paths()
        if not device.startswith("cuda"):
            self.install_model_standins()

    def install_model_standins(self) -> None:
        """None: these releases' model code runs on the CPU as written."""


class SingleProcessWithKvCacheStandin(SingleProcess):
    """The host KV-cache module (`mem_cache.memory_pool_host`, on the model runner's import path)
    imports `sgl_kernel.kvcacheio` unconditionally on a CPU, so that one module gets parity's
    import-time stand-in (standins.py: any use raises; the package's other modules stay absent, so
    SGLang's own ImportError fallbacks still run); the MoE and rope stand-ins once set up."""

    PROCESS_PATHS: tuple[str, ...] = _GROUPS

    def before_engine_imports(self) -> None:
        standins.install(*KERNEL_STANDINS)  # before anything imports the model runner
        give_standin_interpolation_modes()

    def rope_on_cpu(self) -> None:
        rope_device_on_cpu()

    def install_model_standins(self) -> None:
        install_moe_and_rope_standins()


class SingleProcessWithLayersAsOnGpu(SingleProcess):
    """The `sgl_kernel.kvcacheio` stand-in, then SGLang's activation and norm modules imported as on
    a GPU (import_layers_as_on_gpu), before anything imports a model; the MoE and rope stand-ins
    once set up."""

    PROCESS_PATHS: tuple[str, ...] = _GROUPS

    def before_engine_imports(self) -> None:
        standins.install(*KERNEL_STANDINS)
        import_layers_as_on_gpu()
        give_standin_interpolation_modes()

    def rope_on_cpu(self) -> None:
        rope_device_on_cpu()

    def install_model_standins(self) -> None:
        install_moe_and_rope_standins()


class SingleProcessWithOldTorchNames(SingleProcess):
    """The names these releases import that parity's torch and triton renamed or removed
    (old_torch_and_triton_names), then as `SingleProcessWithLayersAsOnGpu`."""

    PROCESS_PATHS: tuple[str, ...] = _GROUPS

    def before_engine_imports(self) -> None:
        old_torch_and_triton_names()
        standins.install(*KERNEL_STANDINS)
        import_layers_as_on_gpu()
        give_standin_interpolation_modes()

    def rope_on_cpu(self) -> None:
        rope_device_on_cpu()

    def install_model_standins(self) -> None:
        install_moe_and_rope_standins()
