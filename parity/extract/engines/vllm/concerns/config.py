"""The config concern: vLLM's config classes, as `LLM(..., speculative_config=...)` builds them
(`VllmConfig`/`ModelConfig`/`SpeculativeConfig` read the tiny target and the speculative config
exactly as it passes them: for data generation the `extract_hidden_states` method, whose config
class wraps the target's; for serving `eagle3` with the draft directory, read by vLLM's own config
loader), with the process group of one rank of a layout, and what is read off them.

- `Config` (0.16-0.33): eager, fp32, compilation off with `CompilationConfig(mode=NONE)`.
- `PlatformCheckSeesTriton` (0.34): the CPU platform's `check_and_update_config` refuses an x86
  CPU without Triton ("vLLM on x86 CPUs requires Triton (triton-cpu)": its CPU deployment runs
  Triton-CPU kernels). parity deploys nothing on the CPU and runs no Triton kernel: while that one
  check runs (in `config`), it reads Triton as present; every other reading of `HAS_TRITON` is
  unchanged, and afterwards the platform's own check is back.
- `CompilationByLevel` (0.9-0.11): compilation is switched off with `CompilationConfig(level=0)`
  (no `mode` yet). The config module is one file (`vllm/config.py`) up to 0.10.0 and a package
  from 0.10.1; the names parity calls are the same in both.
- `ConfigArgsWithoutDefaults` (0.8.5): as `CompilationByLevel`, and `ModelConfig.__init__`
  requires `task`, `tokenizer`, `tokenizer_mode`, `trust_remote_code` and `seed` (no defaults
  until 0.9's dataclass): parity passes what `LLM(model=...)` would (`task="generate"`, the model
  directory as tokenizer, `"auto"`, False, 0); `VllmConfig` leaves the cache, scheduler, device and
  load configs None unless given, and the CPU platform's check and the loader read them: parity
  gives them (the device "cpu", the others at their defaults), as `LLM` gives its engine arguments'.
"""

from __future__ import annotations

from contextlib import contextmanager


class Config:
    """vLLM's config classes, as `LLM(..., speculative_config=...)` builds them, and what is read off them."""

    def config(self, target_dir: str, speculative: dict | None, port: int, max_model_len: int | None = 128):
        """The VllmConfig `LLM(model=target_dir, speculative_config=speculative)` would build
        (eager, fp32, no compilation), with a world-size-1 gloo process group. `max_model_len`:
        the served context (128: parity's extraction runs 8 tokens; None: vLLM's own default, the
        target config's context, as a server launched without --max-model-len serves it)."""
        from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig, VllmConfig
        from vllm.config import set_current_vllm_config
        from vllm.distributed import init_distributed_environment, initialize_model_parallel

        model_config = ModelConfig(model=target_dir, skip_tokenizer_init=True, dtype="float32",
                                   enforce_eager=True, max_model_len=max_model_len,
                                   **self.model_config_args(target_dir))
        # one process, or (setup_rank) one rank of a layout: the ParallelConfig vLLM's engine
        # arguments build for it, the groups numbered as its launcher numbers them (rank
        # tp * pp_rank + tp_rank of a world of tp * pp)
        parallel = ParallelConfig(tensor_parallel_size=self.tp, pipeline_parallel_size=self.pp)
        spec = None
        if speculative is not None:
            spec = SpeculativeConfig(**speculative, target_model_config=model_config,
                                     target_parallel_config=parallel)
        vllm_config = VllmConfig(model_config=model_config, parallel_config=parallel, speculative_config=spec,
                                 compilation_config=self.compilation_config(), **self.vllm_config_args())
        from vllm.distributed.parallel_state import model_parallel_is_initialized

        if not model_parallel_is_initialized():  # once per process (the forward builds one config per draft)
            with set_current_vllm_config(vllm_config):
                init_distributed_environment(world_size=self.tp * self.pp, rank=self.rank, local_rank=0,
                                             backend="gloo", distributed_init_method=f"tcp://127.0.0.1:{port}")
                initialize_model_parallel(self.tp, self.pp, backend="gloo")
        return vllm_config

    def model_config_args(self, target_dir: str) -> dict:
        """The ModelConfig arguments a release requires beyond those above (none from 0.9 on)."""
        return {}

    def vllm_config_args(self) -> dict:
        """The VllmConfig arguments a release requires beyond those above (none from 0.9 on)."""
        return {}

    def compilation_config(self):
        """Eager: no compilation, no custom ops (the CPU wheel has none)."""
        from vllm.config import CompilationConfig
        from vllm.config.compilation import CompilationMode

        return CompilationConfig(mode=CompilationMode.NONE, custom_ops=["none"])

    def num_layers(self, vllm_config) -> int:
        return vllm_config.model_config.hf_text_config.num_hidden_layers

    @staticmethod
    def target_configs(vllm_config) -> list:
        """The target's config objects: vLLM's config classes read them beside the draft's (the
        same `ModelConfig` code runs for both), and those reads are not the draft's."""
        model_config = vllm_config.model_config
        return [model_config.hf_config, model_config.hf_text_config]


class PlatformCheckSeesTriton(Config):
    """`Config`'s, with the CPU platform's config check run as on an x86 CPU with Triton-CPU."""

    def config(self, target_dir: str, speculative: dict | None, port: int, max_model_len: int | None = 128):
        """`Config`'s, with the CPU platform's config check run as on an x86 CPU with Triton-CPU
        (only while this config is built; afterwards the platform's own check is back)."""
        with _triton_read_as_present_by_the_platform_check():
            return super().config(target_dir, speculative, port, max_model_len)


@contextmanager
def _triton_read_as_present_by_the_platform_check():
    """The current platform's `check_and_update_config` reads `vllm.triton_utils.HAS_TRITON` as
    True while it runs; no other code sees the flag changed, and the method is restored on exit."""
    import vllm.triton_utils as triton_utils
    from vllm.platforms import current_platform

    platform = type(current_platform)
    own = platform.__dict__.get("check_and_update_config")  # the classmethod object, where defined
    bound = current_platform.check_and_update_config

    def check_with_triton(*args, **kwargs):
        had, triton_utils.HAS_TRITON = triton_utils.HAS_TRITON, True
        try:
            return bound(*args, **kwargs)
        finally:
            triton_utils.HAS_TRITON = had

    platform.check_and_update_config = staticmethod(check_with_triton)
    try:
        yield
    finally:
        if own is None:
            del platform.check_and_update_config  # inherited again
        else:
            platform.check_and_update_config = own


class CompilationByLevel(Config):
    """Compilation off with `level=0` (no `mode` yet)."""

    def compilation_config(self):
        from vllm.config import CompilationConfig

        return CompilationConfig(level=0, custom_ops=["none"])


class ConfigArgsWithoutDefaults(CompilationByLevel):
    """The ModelConfig and VllmConfig arguments 0.8.5 requires (no defaults until 0.9)."""

    def model_config_args(self, target_dir: str) -> dict:
        return {"task": "generate", "tokenizer": target_dir, "tokenizer_mode": "auto",
                "trust_remote_code": False, "seed": 0}

    def vllm_config_args(self) -> dict:
        """The cache, scheduler, device and load configs (`DeviceConfig("cpu")`, the others at their
        defaults): 0.8.5's VllmConfig leaves them None unless given, and its CPU platform's
        `check_and_update_config` and the model loader read them (`LLM` passes the engine
        arguments' own)."""
        from vllm.config import CacheConfig, DeviceConfig, LoadConfig, SchedulerConfig

        return {"cache_config": CacheConfig(), "scheduler_config": SchedulerConfig(),
                "device_config": DeviceConfig("cpu"), "load_config": LoadConfig()}
