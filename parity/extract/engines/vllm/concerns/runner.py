"""The runner concern: which model runner ("v1" or "v2") a GPU deployment of a config gets (the
reply's `gpu_default_runner`, and the runner the forward runs; on the CPU every runner of the
family's RUNNERS is run).

- `Runner` (0.8.5-0.16, 0.28 on): one answer per release, the family's GPU_DEFAULT_RUNNER: V1
  where it is the one runner that sets EAGLE-3 aux layers (0.8.5-0.16), V2 from 0.28.
- `RunnerByUseV2Property` (0.22-0.27): decided per config by `VllmConfig.use_v2_model_runner`: V2
  for a model whose architecture is not MoE (or is on its list), V1 for the others (DeepSeek-V3,
  gpt-oss) and for a speculative method V2 does not support (`extract_hidden_states`: the dump is
  V1's). parity evaluates that property as a GPU with Triton would (its `HAS_TRITON` True while it
  runs; the CPU environment has no Triton); the environment variable VLLM_USE_V2_MODEL_RUNNER,
  when set, decides there as here.
- `RunnerByEnvironment` (0.17-0.21): the V2 runner is opt-in (`VLLM_USE_V2_MODEL_RUNNER`, default
  0; no `VllmConfig.use_v2_model_runner`): a GPU deployment gets V1.
"""

from __future__ import annotations

import importlib


class Runner:
    """The family's GPU_DEFAULT_RUNNER."""

    def gpu_default_runner(self, vllm_config) -> str:
        """The runner a GPU deployment of `vllm_config` gets: the family's GPU_DEFAULT_RUNNER
        (a family whose release decides per config picks another variant)."""
        return importlib.import_module(type(self).__module__).GPU_DEFAULT_RUNNER


class RunnerByUseV2Property(Runner):
    """The GPU's default runner as `VllmConfig.use_v2_model_runner` evaluates it with Triton."""

    def gpu_default_runner(self, vllm_config) -> str:
        """`VllmConfig.use_v2_model_runner` as a GPU with Triton evaluates it (the environment
        variable VLLM_USE_V2_MODEL_RUNNER, when set, decides there as here)."""
        import vllm.config.vllm as config_module

        had = config_module.HAS_TRITON
        config_module.HAS_TRITON = True
        try:
            return "v2" if vllm_config.use_v2_model_runner else "v1"
        finally:
            config_module.HAS_TRITON = had


class RunnerByEnvironment(Runner):
    """V1 unless VLLM_USE_V2_MODEL_RUNNER is set."""

    def gpu_default_runner(self, vllm_config) -> str:
        """V1 unless VLLM_USE_V2_MODEL_RUNNER is set (vLLM's own environment reading)."""
        import vllm.envs as envs

        return "v2" if envs.VLLM_USE_V2_MODEL_RUNNER else "v1"
