"""vLLM 0.11: the family adapter (an older release: no config key for the aux ids).

What differs from the 0.33 family (v0_33.py), found by running 0.11.0's code:
- the CPU platform is not detected for the official (CUDA) wheel, so it is set by hand
  (`vllm.platforms._current_platform = CpuPlatform()`), before any model code runs;
- compilation is switched off with `CompilationConfig(level=0)` (no `mode` yet);
- one model runner: the V1 `GPUModelRunner`, whose `load_model` ends with
  `if self.use_aux_hidden_state_outputs: self.model.set_aux_hidden_state_layers(
  self.model.get_eagle3_aux_hidden_state_layers())`: the draft's config is never read, every
  EAGLE-3 draft gets the model's default layers. parity runs exactly that statement of the
  installed `load_model` (run_until.run_statement) on a holder of the model;
- the capture appends `hidden_states + residual` before layer i for each id i in the loop over
  the layers: id N is never reached (dropped, silently), id 0 has no residual yet (TypeError);
- no `extract_hidden_states` speculative method: a data-generation dump of 0.11 is what the
  model's own capture returns for the launch ids set with its own setter
  (`set_aux_hidden_state_layers`), in the order it captures them;
- DeepSeek-V3 is not an EAGLE-3 target (`supports_eagle3` is False), so no MLA or fused-MoE
  stand-in is installed; only the attention body is replaced;
- the launch contract: `vllm serve`'s parser is `vllm.entrypoints.openai.cli_args.make_arg_parser`
  on the `FlexibleArgumentParser` that module imports, taken from it: 0.11.0 keeps the class in
  `vllm.utils`, later releases this family runs (0.12-0.15, outside every range) in
  `vllm.utils.argparse_utils` (0.15 no longer re-exports it from `vllm.utils`);
  `create_speculative_config` also takes the chunked-prefill and log-stats flags (passed where
  the release's signature has them: 0.15 takes the two configs only); whether the
  aux states are captured is decided inline in `GPUModelRunner.__init__` (`use_eagle()` and the
  method eagle3).
Config keys read (docs/built-draft.md): not recorded. The installed code would allow it (its config
classes, `SpeculatorsConfig` and draft class are read the same way; its runner reads no ids from the
draft config at all), but this family's draft build is not read (BUILDS_DRAFT False), and parity
carries the reads in the built-draft contract, judged only beside a built draft: a contract holding
reads alone would report a built draft compared in every field. They come with this family's built
draft.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from . import v0_33
from .. import launch

RELEASES = SpecifierSet(">=0.11,<0.12")
VERIFIED = ("0.11.0",)

CODE_PATHS = {
    "config": "vllm.config.VllmConfig / ModelConfig / SpeculativeConfig",
    "load": "vllm.model_executor.model_loader.get_model (load_weights + process_weights_after_loading)",
    "v1": "vllm.v1.worker.gpu_model_runner.GPUModelRunner.load_model "
          "(its `if self.use_aux_hidden_state_outputs:` statement: the model's default layers)",
    "capture": "<model>.set_aux_hidden_state_layers + forward (aux hidden states)",
}

DUMP_METHOD = "the model's own capture set to the launch ids (0.11 has no extract_hidden_states)"
RUNNERS = ("v1",)
GPU_DEFAULT_RUNNER = "v1"  # 0.11 has one model runner

IMPORTS = (
    "vllm.config", "vllm.distributed", "vllm.forward_context", "vllm.model_executor.model_loader",
    "vllm.model_executor.model_loader.utils", "vllm.attention.layer", "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.spec_decode.eagle",
)
REQUIRES = ("vllm.attention.layer.Attention.forward",)  # what the kernel stand-in replaces


class Adapter(v0_33.Adapter):
    """vLLM 0.11's calls: the 0.33 adapter's, but where 0.11 differs."""

    # The built draft (parity.contract.BuiltDraft) is read from the 0.33 family on: this family's
    # draft build is not verified, and its contract says the built draft is not compared.
    BUILDS_DRAFT = False

    # The launch contract (parity.extract.engines.vllm.launch): 0.11's parser, its
    # create_speculative_config call and its runner's rule for the aux states.
    LAUNCH = launch.Launch(aux=launch.runner_0_11_answer,
                           parser=("vllm.entrypoints.openai.cli_args", "vllm.entrypoints.openai.cli_args"),
                           speculative=launch.speculative_config_0_11)

    def cpu_platform(self) -> None:
        import vllm.platforms as platforms
        from vllm.platforms.cpu import CpuPlatform

        platforms._current_platform = CpuPlatform()  # the CUDA wheel detects no CPU platform

    def replace_kernels(self) -> list[str]:
        from vllm.attention import layer

        from .. import kernels

        layer.Attention.forward = kernels.attention_forward
        return ["vllm.attention.layer.Attention.forward -> causal SDPA, one prefill sequence"]

    def compilation_config(self):
        from vllm.config import CompilationConfig

        return CompilationConfig(level=0, custom_ops=["none"])

    def default_ids(self, model) -> list[int]:
        return list(model.get_eagle3_aux_hidden_state_layers())  # 0.33: get_eagle3_default_...

    def config_ids(self, vllm_config, runner: str) -> list[int] | None:
        """0.11 reads no ids from any config: None (the runner sets the model's default)."""
        return None

    def set_capture(self, model, vllm_config, runner: str) -> None:
        """The statement of the installed `GPUModelRunner.load_model` that sets the aux layers."""
        from vllm.config import set_current_vllm_config
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner

        from ....run_until import run_statement

        holder = v0_33._V1Runner(model, vllm_config.speculative_config)
        with set_current_vllm_config(vllm_config):
            run_statement(GPUModelRunner.load_model, "self.use_aux_hidden_state_outputs", holder)

    def share_with_target(self, draft, target, vllm_config) -> None:
        """0.11's proposer shares inside `EagleProposer.load_model`: the target's embedding
        whenever the shapes match (a draft's own embedding is dropped), the LM head for EAGLE-3
        when its shape matches. Those two statements of the installed method run on a holder."""
        from vllm.config import set_current_vllm_config
        from vllm.v1.spec_decode.eagle import EagleProposer

        from ....run_until import run_statement

        holder = v0_33._Proposer(draft, vllm_config)
        with set_current_vllm_config(vllm_config):
            for test in ("get_pp_group().world_size == 1", "self.vllm_config.speculative_config.method != 'eagle3'"):
                run_statement(EagleProposer.load_model, test, holder, target_language_model=target)

    def dump_config(self, launch_ids: list[int]) -> dict | None:
        """No extract_hidden_states method: the dump is set on the model itself (set_dump)."""
        return None

    def set_dump(self, model, launch_ids: list[int]) -> None:
        model.set_aux_hidden_state_layers(tuple(launch_ids))
