"""vLLM 0.17-0.21: the family adapter (V1 sets the aux layers inside `load_model`; V2 is opt-in).

What differs from the 0.22 family (v0_22.py), found by running 0.21.0's and 0.17.0's code:
- V1 has no `_setup_eagle3_aux_hidden_state_outputs`: `GPUModelRunner.load_model` ends with
  `if self.use_aux_hidden_state_outputs:` (the ids of `_get_eagle3_aux_layers_from_config`,
  which reads only the top-level `eagle_aux_hidden_state_layer_ids` (0.20 on: else
  `dflash_config.target_layer_ids` + 1; never `eagle_config`), or the model's default). parity
  runs exactly that statement of the installed `load_model` (run_until.run_statement) on a
  holder of the model, as for 0.11;
- the V2 runner is opt-in (`VLLM_USE_V2_MODEL_RUNNER`, default 0; no
  `VllmConfig.use_v2_model_runner`): a GPU deployment gets V1. V2's own
  `eagle3_utils.set_eagle3_aux_hidden_state_layers` is still run and reported;
- the model's default layers are `get_eagle3_aux_hidden_state_layers()` in 0.17 and
  `get_eagle3_default_aux_hidden_state_layers()` from 0.18 (both runners call the one their
  release has); `default_ids` calls the one the model has, the newer name first;
- the CPU platform, the MoE experts (vLLM's own pure-torch CPU experts; no MoE stand-in) and
  the kernel stand-ins are the 0.22 family's.
The built draft (BuiltDraft and its config keys, docs/built-draft.md), read as the 0.33 family
reads it (both runners build the registry's class with `get_model`: V1's `EagleProposer._get_model`,
V2's `load_eagle_model`); what 0.17.0's own code builds otherwise (found by running it):
- its `Eagle3LlamaForCausalLM` builds none of `norm_before_fc`, `fc_norm` or `norm_output` (never
  read: a draft trained with one is a drift on the graph flag and on the key). The family spans
  the change: 0.21.0's installed class reads and builds `norm_before_fc` (fc_norm and norm_output
  from 0.22); the flags are read off the class as built, so each release is reported as it builds;
- transformers 4.57 (0.21: 5.24); vLLM's `patch_rope_parameters` copies the config class's
  `rope_theta` into `rope_parameters`, so a config that writes its rope only as `rope_parameters`
  is built with base 10000 (measured on 0.16.0; as speculators' converter builds it).

Composed of: its own `Platform` (ahead of the 0.11 family's, which it extends), `Runner` and
`Capture` (also the 0.16 family's; V1's `load_model` statement is the 0.11 family's
`run_load_model_statement`), the 0.22 family's `Launch` and `Kernels`, the 0.11 family's `Platform`,
ahead of the 0.33 adapter (never through another family's adapter).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from . import v0_11, v0_22, v0_33

RELEASES = SpecifierSet(">=0.17,<0.22")
VERIFIED = ("0.17.0",)

CODE_PATHS = {**v0_33.CODE_PATHS,
              "v1": "vllm.v1.worker.gpu_model_runner.GPUModelRunner.load_model (its `if "
                    "self.use_aux_hidden_state_outputs:` statement: _get_eagle3_aux_layers_from_config, "
                    "else the model's default)"}
DUMP_METHOD = v0_33.DUMP_METHOD
RUNNERS = v0_33.RUNNERS
GPU_DEFAULT_RUNNER = "v1"  # V2 only with VLLM_USE_V2_MODEL_RUNNER=1

IMPORTS = tuple(m for m in v0_22.IMPORTS if m != "vllm.config.vllm")
REQUIRES = (
    *v0_22.REQUIRES[:4],
    "vllm.v1.worker.gpu_model_runner.GPUModelRunner.load_model",
    "vllm.v1.worker.gpu_model_runner.GPUModelRunner._get_eagle3_aux_layers_from_config",
    "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils.set_eagle3_aux_hidden_state_layers",
)


class Platform:
    """torch's CPU-capability queries under the private names these releases call, then the CPU
    platform set by hand (the 0.11 family's; also the 0.16 family's)."""

    def cpu_platform(self) -> None:
        """The CPU platform set by hand (0.11's), and torch's CPU-capability queries under the
        private names these releases call: vLLM 0.17 is built against an older torch, whose
        `torch._C._cpu._is_avx512_supported` (called by `CpuPlatform.import_kernels`) and
        `_is_amx_tile_supported` are `torch.cpu`'s in torch 2.13. The same functions, aliased
        where absent; nothing is computed by parity."""
        import torch

        for name in ("_is_avx512_supported", "_is_amx_tile_supported"):
            if not hasattr(torch._C._cpu, name):
                setattr(torch._C._cpu, name, getattr(torch.cpu, name))
        super().cpu_platform()


class Runner:
    """V1 unless VLLM_USE_V2_MODEL_RUNNER is set."""

    def gpu_default_runner(self, vllm_config) -> str:
        """V1 unless VLLM_USE_V2_MODEL_RUNNER is set (vLLM's own environment reading)."""
        import vllm.envs as envs

        return "v2" if envs.VLLM_USE_V2_MODEL_RUNNER else "v1"


class Capture:
    """The model's default layers under either name; V1's capture by the `load_model` statement (also
    the 0.16 family's)."""

    def default_ids(self, model) -> list[int]:
        default = getattr(model, "get_eagle3_default_aux_hidden_state_layers", None)  # 0.18 on
        return list(default() if default is not None else model.get_eagle3_aux_hidden_state_layers())

    def set_capture(self, model, vllm_config, runner: str) -> None:
        if runner == "v1":
            v0_11.run_load_model_statement(model, vllm_config)
        else:
            super().set_capture(model, vllm_config, runner)


class Adapter(Platform, Runner, Capture, v0_22.Launch, v0_22.Kernels, v0_11.Platform, v0_33.Adapter):
    """vLLM 0.17-0.21's calls: the 0.33 adapter's, with the 0.22 family's launch and kernels and the
    0.11 family's platform, but where these releases differ."""
