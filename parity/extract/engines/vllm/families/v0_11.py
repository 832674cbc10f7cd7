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
- DeepSeek-V3 is not an EAGLE-3 target (`supports_eagle3` is False; its dump is refused as the
  release's own answer, probe.capture_lacking), so no MLA stand-in is installed; the attention
  body is replaced, and on an x86 CPU (0.10-0.11.x) Intel's fused-MoE experts by the GPU's route
  and experts in torch (moe_cpu: gpt-oss on 0.11.1-0.11.2);
- attention sinks (gpt-oss): 0.11.0's CPU platform answers every dense layer with
  `TorchSDPABackend`, whose impl takes no `sinks` (TypeError building the layer); a GPU of compute
  capability 8.x gets `TRITON_ATTN` for a layer with sinks, so parity answers that choice with it,
  built only (cpu_attention.install_sinks: its kernels raise if called; parity's attention body
  honours the sinks). Its impl's constructor checks the head size its Triton kernel takes (32 on:
  a property of that kernel; real gpt-oss has 64, supported), which the tiny target's 16
  (shrink.TINY) fails: for this family that check also takes 16 (the kernel never runs here) and
  refuses every other size as the release does. 0.11.1's own CPU backend (CPU_ATTN) takes sinks;
- the launch contract: `vllm serve`'s parser is `vllm.entrypoints.openai.cli_args.make_arg_parser`
  on the `FlexibleArgumentParser` that module imports, taken from it: 0.11.0 keeps the class in
  `vllm.utils`, later releases this family runs (0.12-0.15, outside every range) in
  `vllm.utils.argparse_utils` (0.15 no longer re-exports it from `vllm.utils`);
  `create_speculative_config` also takes the chunked-prefill and log-stats flags (passed where
  the release's signature has them: 0.15 takes the two configs only); whether the
  aux states are captured is decided inline in `GPUModelRunner.__init__` (`use_eagle()` and the
  method eagle3).
The built draft (BuiltDraft and its config keys, docs/built-draft.md), read as the 0.33 family
reads it; what 0.11.0's own code builds otherwise (found by running it):
- its `EagleProposer.load_model` builds the registry's `Eagle3LlamaForCausalLM` with `get_model` on
  the draft's ModelConfig (at the target's dtype), as 0.33's proposers do;
- that class builds one decoder layer whatever `num_hidden_layers` says (never read: at its
  default where the config sets 1, `config_keys`; 0.15.1's installed class builds that many),
  its fc a plain `torch.nn.Linear`, and none of `norm_before_fc`, `fc_norm` or `norm_output`
  (never read: a draft trained with one is a drift on the graph flag and on the key);
  `norm_before_residual` is read;
- transformers 4.57: a config that writes its rope only as transformers 5's `rope_parameters`
  is built with `LlamaConfig`'s default base 10000, whatever it says (as speculators' converter
  builds a served EAGLE-3 config; a trained checkpoint with another base is a rope_frequencies
  drift); `_find_dtype` reads `torch_dtype` by that name (the property transformers keeps it behind);
- a speculators-format config: its `SpeculatorsConfig` (kept in `configs/speculators/base`) is
  built from `extract_vllm_speculative_config`'s result (0.16 on: `extract_transformers_pre_trained_config`'s),
  the keys followed through it (SPECULATORS_CONVERSION).
Every fact is read off the class as built, so a release of this range that builds otherwise
(0.12-0.15, placed here by their code paths) is reported as it builds.

Composed of: its own `Launch`, `Platform` (the CPU platform set by hand), `Kernels`, `Config`
(compilation), `Capture` (V1's `load_model` statement: `run_load_model_statement`), `Dump` and
`Draft`, ahead of the 0.33 adapter; the parts older and newer families share are imported from here.
"""

from __future__ import annotations

import json
from pathlib import Path

from packaging.specifiers import SpecifierSet

from . import v0_33
from .. import launch
from ....run_until import run_statement
from ....shrink import TINY

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


def run_load_model_statement(model, vllm_config) -> None:
    """The statement of the installed `GPUModelRunner.load_model` that sets the aux layers
    (`if self.use_aux_hidden_state_outputs:`), run on a holder of the model (also V1's capture in
    the 0.16 and 0.17 families)."""
    from vllm.config import set_current_vllm_config
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    holder = v0_33._V1Runner(model, vllm_config.speculative_config)
    with set_current_vllm_config(vllm_config):
        run_statement(GPUModelRunner.load_model, "self.use_aux_hidden_state_outputs", holder)


class Launch:
    """0.11's parser, its create_speculative_config call and its runner's rule for the aux states."""

    # The launch contract (parity.extract.engines.vllm.launch): 0.11's parser, its
    # create_speculative_config call and its runner's rule for the aux states.
    LAUNCH = launch.Launch(aux=launch.runner_0_11_answer,
                           parser=("vllm.entrypoints.openai.cli_args", "vllm.entrypoints.openai.cli_args"),
                           speculative=launch.speculative_config_0_11)


class Platform:
    """The CPU platform set by hand: the CUDA wheel detects none (also the 0.8.5, 0.9, 0.16, 0.17
    and 0.22 families')."""

    def cpu_platform(self) -> None:
        import vllm.platforms as platforms
        from vllm.platforms.cpu import CpuPlatform

        platforms._current_platform = CpuPlatform()  # the CUDA wheel detects no CPU platform


class Kernels:
    """The attention body stood in at its 0.11 name, and Intel's fused-MoE experts by the GPU's
    (also, behind their own additions, the 0.8.5 and 0.9 families')."""

    def replace_kernels(self) -> list[str]:
        from vllm.attention import layer

        from .. import cpu_attention, kernels, moe_cpu  # deferred: heavy, import torch (a family imports without)

        layer.Attention.forward = kernels.attention_forward
        return ["vllm.attention.layer.Attention.forward -> causal SDPA, one prefill sequence",
                *moe_cpu.install(),  # 0.10-0.11.x: Intel's experts -> the GPU's, in torch (moe_cpu)
                # 0.11.0: the CPU backend takes no sinks -> the GPU's TRITON_ATTN, built only, its
                # head-size check (its Triton kernel's, 32 on) also taking the tiny target's 16
                *cpu_attention.install_sinks((TINY["head_dim"],))]


class Config:
    """Compilation off with `level=0` (no `mode` yet; also the 0.8.5 and 0.9 families')."""

    def compilation_config(self):
        from vllm.config import CompilationConfig

        return CompilationConfig(level=0, custom_ops=["none"])


class Capture:
    """The model's default layers under their old name, no ids read from any config, and V1's
    `load_model` statement (also the 0.8.5 and 0.9 families')."""

    def default_ids(self, model) -> list[int]:
        return list(model.get_eagle3_aux_hidden_state_layers())  # 0.33: get_eagle3_default_...

    def config_ids(self, vllm_config, runner: str) -> list[int] | None:
        """0.11 reads no ids from any config: None (the runner sets the model's default)."""
        return None

    def set_capture(self, model, vllm_config, runner: str) -> None:
        """The statement of the installed `GPUModelRunner.load_model` that sets the aux layers."""
        run_load_model_statement(model, vllm_config)


class Dump:
    """No `extract_hidden_states` method: the dump is set on the model itself (also the 0.8.5,
    0.9 and 0.16 families')."""

    def dump_config(self, launch_ids: list[int]) -> dict | None:
        """No extract_hidden_states method: the dump is set on the model itself (set_dump)."""
        return None

    def set_dump(self, model, launch_ids: list[int]) -> None:
        model.set_aux_hidden_state_layers(tuple(launch_ids))


class Draft:
    """The speculators-format conversion, the key `num_hidden_layers` at its default, and the
    proposer's sharing statements of 0.11."""

    # Its `SpeculatorsConfig.from_pretrained` builds the class from this method's result: the
    # layer's keys, the speculative method and token count, and the algorithm's own keys.
    SPECULATORS_CONVERSION = "extract_vllm_speculative_config"

    def config_keys(self, draft, vllm_config, checkpoint: str | None, reads: set[str],
                    dict_reads: dict[str, set[str]]) -> dict:
        """0.33's, and `num_hidden_layers` at its default where the class, which builds one decoder
        layer without reading it, built as many as the config sets: the key changes nothing 0.11
        builds (a config with more is a drift, on this key and on the layers built)."""
        keys = super().config_keys(draft, vllm_config, checkpoint, reads, dict_reads)
        folder = checkpoint or vllm_config.speculative_config.draft_model_config.model
        raw = json.loads((Path(folder) / "config.json").read_text())
        layer = raw.get("transformer_layer_config") if isinstance(raw.get("transformer_layer_config"), dict) else raw
        if ("num_hidden_layers" in keys.get("config_keys_unread", ())
                and layer.get("num_hidden_layers") == len(draft.model.layers)):
            keys["config_keys_default"] = sorted({*keys.get("config_keys_default", ()), "num_hidden_layers"})
        return keys

    def share_with_target(self, draft, target, vllm_config) -> None:
        """0.11's proposer shares inside `EagleProposer.load_model`: the target's embedding
        whenever the shapes match (a draft's own embedding is dropped), the LM head for EAGLE-3
        when its shape matches. Those two statements of the installed method run on a holder."""
        from vllm.config import set_current_vllm_config
        from vllm.v1.spec_decode.eagle import EagleProposer

        holder = v0_33._Proposer(draft, vllm_config)
        with set_current_vllm_config(vllm_config):
            for test in ("get_pp_group().world_size == 1", "self.vllm_config.speculative_config.method != 'eagle3'"):
                run_statement(EagleProposer.load_model, test, holder, target_language_model=target)


class Adapter(Launch, Platform, Kernels, Config, Capture, Dump, Draft, v0_33.Adapter):
    """vLLM 0.11's calls: the 0.33 adapter's, but where 0.11 differs."""
