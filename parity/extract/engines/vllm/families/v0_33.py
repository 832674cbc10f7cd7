"""vLLM 0.33: the family adapter (config classes, loading, kernel stand-ins, both model runners).

Every call below is vLLM's own code, run on the CPU platform from the official wheel:
- `VllmConfig`/`ModelConfig`/`SpeculativeConfig` read the tiny target and the speculative
  config exactly as `LLM(..., speculative_config=...)` passes it (for data generation the
  `extract_hidden_states` method, whose config class wraps the target's; for serving
  `eagle3` with the draft directory, read by vLLM's own config loader);
- `get_model` builds the model class vLLM's registry picks, runs its `load_weights` on the
  checkpoint's safetensors and the real `process_weights_after_loading`;
- the aux ids are set by each model runner's own function: V1's
  `GPUModelRunner._setup_eagle3_aux_hidden_state_outputs` (which reads them with
  `_get_eagle3_aux_layers_from_config`) and V2's `eagle3_utils.set_eagle3_aux_hidden_state_layers`
  (`get_eagle3_aux_layers_from_config`); both fall back to the model's own default.
Only the three kernel bodies the wheel lacks on a CPU are replaced (parity.extract.engines.vllm.kernels).
The draft config keys vLLM reads (BuiltDraft's config keys) are recorded while `config` reads the
served draft, `build_draft` builds its class and each runner reads its ids, the target's config
objects left out (`target_configs`); a speculators-format config.json also as the dict its
`SpeculatorsConfig` converter reads (`config_keys`); so does every family from 0.11 on (BUILDS_DRAFT).
DFlash (method "dflash"; 0.21.0 has it, 0.17.0 not): both runners read a DFlash draft's ids with
their EAGLE-3 reader (`dflash_config.target_layer_ids` +1, else the model's EAGLE-3 default) and set
them with their EAGLE-3 setter; the proposer's `DFlashQwen3ForCausalLM` takes the concatenation in
`combine_hidden_states` (DFLASH_CODE_PATHS). This family runs it (RUNS_DFLASH).
The adapter states each concern of the adapter protocol (parity.extract.engines.vllm.adapter) in
full, one part each (`Launch`, `Platform`, `Config`, `Capture`, `Draft`); every other family places
its own parts, and those it shares, ahead of this `Adapter`.
"""

from __future__ import annotations

import importlib
import json
import os
import tempfile
from pathlib import Path

from packaging.specifiers import SpecifierSet

from .. import launch, platform_first
from ....config_reads import converted_fields, read_fields, recording
from ....run_until import require
from .....workspace import engine_cache

RELEASES = SpecifierSet(">=0.33,<0.34")
VERIFIED = ("0.33.0",)

CODE_PATHS = {
    "config": "vllm.config.VllmConfig / ModelConfig / SpeculativeConfig",
    "load": "vllm.model_executor.model_loader.get_model (load_weights + process_weights_after_loading)",
    "v1": "vllm.v1.worker.gpu_model_runner.GPUModelRunner._setup_eagle3_aux_hidden_state_outputs",
    "v2": "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils.set_eagle3_aux_hidden_state_layers",
    "capture": "<model>.set_aux_hidden_state_layers + forward (aux hidden states)",
}
_DFLASH_DRAFT = " -> vllm.model_executor.models.qwen3_dflash.DFlashQwen3ForCausalLM.combine_hidden_states"
DFLASH_CODE_PATHS = {  # the same keys for a DFlash draft (method "dflash"): the contract records these
    **CODE_PATHS,
    "v1": CODE_PATHS["v1"] + " (ids: _get_eagle3_aux_layers_from_config, dflash_config.target_layer_ids +1)"
          + _DFLASH_DRAFT,
    "v2": CODE_PATHS["v2"] + " (ids: get_eagle3_aux_layers_from_config, dflash_config.target_layer_ids +1)"
          + _DFLASH_DRAFT,
}

DUMP_METHOD = "extract_hidden_states"  # speculators' launch script's speculative method
RUNNERS = ("v1", "v2")
GPU_DEFAULT_RUNNER = "v2"  # vLLM's default model runner on a GPU with Triton; the CPU platform uses V1


# What the calls below import (parity.forkserver imports them once, before any run).
IMPORTS = (
    "vllm.config", "vllm.config.compilation", "vllm.distributed", "vllm.forward_context",
    "vllm.model_executor.model_loader", "vllm.model_executor.model_loader.utils",
    "vllm.model_executor.layers.attention.attention", "vllm.model_executor.layers.attention.mla_attention",
    "vllm.model_executor.layers.fused_moe.experts.cpu_moe", "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils", "vllm.v1.spec_decode.eagle",
)
# The names the kernel stand-ins replace: a release where one moved is not run by this family.
REQUIRES = (
    "vllm.model_executor.layers.attention.attention.Attention.forward",
    "vllm.model_executor.layers.attention.mla_attention.MLAAttention.forward",
    "vllm.model_executor.layers.fused_moe.experts.cpu_moe.CPUUnquantizedExperts.apply",
    "vllm.model_executor.layers.fused_moe.experts.cpu_moe.CPUUnquantizedExperts.process_weights_after_loading",
)

# The registry's out-of-process model inspection (every family's; replaced by an in-process call).
INSPECTION = "vllm.model_executor.models.registry._run_in_subprocess"


def _never_called(x):
    raise AssertionError("parity only applies torch.compile's decorator to this function, never calls it")


def compiler_first() -> None:
    """torch's compiler modules imported before vLLM. Without Triton, vLLM 0.8.5 puts a
    placeholder module under `sys.modules['triton']` (only `jit`, `autotune`, `heuristics`,
    `language`); the `@torch.compile` decorators its layers apply at import
    (`vocab_parallel_embedding.get_masked_input_and_mask`) make torch 2.13 import its inductor
    runtime, which imports `Config` from whatever `triton` is there and fails on the placeholder
    (torch 2.6, which 0.8.5 pins, did not get that far). Imported first, torch finds no Triton,
    as it does under 0.9 on. Every family does it (vLLM imports the same modules anyway), so a
    release placed by its code paths is judged on them, whichever family looks first. Nothing
    is compiled."""
    import torch

    torch.compile(_never_called, dynamic=True, backend="inductor")  # imports what the decorator does


def private_cache() -> None:
    """vLLM's cache root (`VLLM_CACHE_ROOT`, by default ~/.cache/vllm: the registry's
    `modelinfos/`, any compile cache) in this process's private temp dir. Its `envs` reads the
    variable at each access (until a serving engine, never started here, freezes them)."""
    engine_cache("VLLM_CACHE_ROOT", "vllm-cache")


def without_amx() -> None:
    """vLLM's CPU path as on a CPU without AMX, on every machine. On an AMX CPU (Sapphire Rapids
    and later) vLLM chooses its AMX MLA backend, whose weight preparation packs the
    decompression weights with `torch.ops._C.convert_weight_packed`, a CPU kernel the CUDA
    wheel parity installs does not have (the DeepSeek-V3 / Kimi-K2.5 cases ended in exit 2 on
    such a machine and passed on one without AMX). parity replaces the attention and MoE bodies
    with its own stand-ins either way (kernels.py), and every captured state is identified
    numerically, so the choice changes no state parity names; it makes the run the same on
    every CPU. Every family asks `torch.cpu._is_amx_tile_supported()` at the point of choice."""
    import torch

    torch.cpu._is_amx_tile_supported = lambda: False  # noqa: SLF001 - the one question vLLM asks


def inspect_in_process() -> None:
    """vLLM's registry inspects a model class it has not cached (`_LazyRegisteredModel.
    inspect_model_cls`) by running `_ModelInfo.from_model_cls(load_model_cls())` in a fresh Python
    process, so that a GPU process does not initialise CUDA early; that process imports vLLM again
    (about 15 s per architecture on 2 cores). On the CPU there is no CUDA to keep uninitialised:
    the same function is called here, in this process, and returns the same `_ModelInfo`. The
    probe imports the model's module for `get_model` anyway. Every family (0.11-0.33) has the
    same `registry._run_in_subprocess(fn)`; a release without it is CodePathMoved."""
    require(INSPECTION)
    from vllm.model_executor.models import registry

    registry._run_in_subprocess = _call


def _call(fn):
    return fn()


class Launch:
    """How the serve command resolves (the launch contract) and which drafts this family runs."""

    # A DFlash draft (method "dflash") is extracted (probe.dflash_refusal): both runners read its
    # `dflash_config.target_layer_ids` +1 with their EAGLE-3 reader and set them with their EAGLE-3
    # setter (DFLASH_CODE_PATHS), and the proposer's `DFlashQwen3ForCausalLM` is built and handed them.
    RUNS_DFLASH = True

    # How the user's serve arguments are resolved (the launch contract,
    # parity.extract.engines.vllm.launch): vLLM's own parser and config classes, and V2's
    # `eagle3_utils.requires_aux_hidden_states` for whether the target's aux states are captured
    # (0.30-0.32, run with this family, have none: V1's EagleProposer answers there, as for 0.28).
    LAUNCH = staticmethod(launch.requires_or_proposer_answer)

    # Whether this family's adapter runs the capture on several ranks (a parallel layout: parity's
    # multi-process capture, vllm/ranks.py); where not, a layout of more than one rank is parity's
    # limit, said (docs/launch.md, "The parallel layout"). 0.33 runs two runners: not yet.
    RUNS_RANKS = False
    rank, tp, pp = 0, 1, 1  # this process's place in the layout (setup_rank)

    def setup_rank(self, rank: int, tp: int, pp: int) -> None:
        """The next `config` builds its process group as rank `rank` of `tp` x `pp` ranks."""
        self.rank, self.tp, self.pp = rank, tp, pp


class Platform:
    """The CPU platform and parity's kernel stand-ins, before any vLLM model code runs."""

    def platform(self) -> None:
        """Everything before any vLLM model code runs: torch's compiler modules, vLLM's cache in
        this process's private TMPDIR, the CPU platform (its non-AMX path, on every CPU), and the
        registry's model inspection in this process."""
        compiler_first()
        private_cache()
        self.cpu_platform()
        without_amx()
        inspect_in_process()

    def cpu_platform(self) -> None:
        """Select the CPU platform before vLLM is imported (0.33 reads the variable)."""
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        import torch

        # vLLM 0.33 is built against torch 2.14; on the CPU torch 2.13, releasing the caching
        # allocator (`torch.accelerator.empty_cache`, called around weight loading) raises when
        # no accelerator exists. There is no cache to release on a CPU: a no-op, nothing computed.
        if not torch.accelerator.is_available():
            torch.accelerator.empty_cache = lambda: None
        platform_first.cpu_platform_unless_chosen()  # also for an older wheel tried here first (0.12-0.15)

    def replace_kernels(self) -> list[str]:
        from vllm.model_executor.layers.attention import attention, mla_attention
        from vllm.model_executor.layers.fused_moe.experts import cpu_moe

        from .. import gdn_guard, kernels  # deferred: heavy, imports torch (a family module imports without it)

        attention.Attention.forward = kernels.attention_forward
        mla_attention.MLAAttention.forward = kernels.mla_forward
        cpu_moe.CPUUnquantizedExperts.process_weights_after_loading = kernels.experts_prepare
        cpu_moe.CPUUnquantizedExperts.apply = kernels.experts_apply
        looked_up = [f"torch.ops._C.{name} -> raises if called (looked up, never called, on this path)"
                     for name in kernels.absent_custom_ops("silu_and_mul")]
        return [*looked_up, *gdn_guard.install(),
                "vllm.model_executor.layers.attention.Attention.forward -> causal SDPA, one prefill sequence",
                "vllm.model_executor.layers.attention.MLAAttention.forward -> kv_b_proj decompression + causal SDPA",
                "vllm.model_executor.layers.fused_moe.experts.cpu_moe.CPUUnquantizedExperts.apply -> "
                "per-expert SiLU or SwiGLU-OAI MLP, biases added (router real)"]


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

    def gpu_default_runner(self, vllm_config) -> str:
        """The runner a GPU deployment of `vllm_config` gets: the family's GPU_DEFAULT_RUNNER
        (a family whose release decides per config overrides this)."""
        return importlib.import_module(type(self).__module__).GPU_DEFAULT_RUNNER

    def num_layers(self, vllm_config) -> int:
        return vllm_config.model_config.hf_text_config.num_hidden_layers

    @staticmethod
    def target_configs(vllm_config) -> list:
        """The target's config objects: vLLM's config classes read them beside the draft's (the
        same `ModelConfig` code runs for both), and those reads are not the draft's."""
        model_config = vllm_config.model_config
        return [model_config.hf_config, model_config.hf_text_config]


class Capture:
    """The target as vLLM's loader builds it, the aux ids each runner sets, its forward and the dump."""

    def build_target(self, vllm_config):
        from vllm.config import set_current_vllm_config
        from vllm.model_executor.model_loader import get_model

        with set_current_vllm_config(vllm_config):
            return get_model(vllm_config=vllm_config).eval()

    def default_ids(self, model) -> list[int]:
        return list(model.get_eagle3_default_aux_hidden_state_layers())

    def config_ids(self, vllm_config, runner: str) -> list[int] | None:
        """The ids runner `runner` reads from the speculative config (None: it found none)."""
        spec = vllm_config.speculative_config
        if runner == "v1":
            from vllm.v1.worker.gpu_model_runner import GPUModelRunner

            ids = GPUModelRunner._get_eagle3_aux_layers_from_config(_V1Runner(None, spec))
        else:
            from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import get_eagle3_aux_layers_from_config

            ids = get_eagle3_aux_layers_from_config(spec)
        return list(ids) if ids else None

    def set_capture(self, model, vllm_config, runner: str) -> None:
        """What runner `runner` does at start-up: resolve the ids (or the model default) and set them."""
        from vllm.config import set_current_vllm_config

        spec = vllm_config.speculative_config
        with set_current_vllm_config(vllm_config):
            if runner == "v1":
                from vllm.v1.worker.gpu_model_runner import GPUModelRunner

                GPUModelRunner._setup_eagle3_aux_hidden_state_outputs(_V1Runner(model, spec))
            else:
                from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import set_eagle3_aux_hidden_state_layers

                set_eagle3_aux_hidden_state_layers(model, spec)

    def set_ids(self, model, ids: list[int]) -> None:
        """The model's own setter, with an id list (the fix search's candidates)."""
        model.set_aux_hidden_state_layers(tuple(ids))

    def capture_ids(self, model) -> list[int] | None:
        layers = getattr(model.model, "aux_hidden_state_layers", None)
        return list(layers) if layers is not None else None

    def forward(self, model, vllm_config, input_ids):
        """One prefill; (final hidden states, [aux states in capture order])."""
        import torch
        from vllm.config import set_current_vllm_config
        from vllm.forward_context import set_forward_context

        positions = torch.arange(input_ids.shape[0])
        with set_current_vllm_config(vllm_config), torch.no_grad(), \
                set_forward_context(None, vllm_config, num_tokens=input_ids.shape[0]):
            out = model(input_ids=input_ids, positions=positions, intermediate_tensors=None)
        if isinstance(out, tuple):
            return out[0], list(out[1])
        return out, []

    relay: tuple[str, ...] = ()  # the aux states a middle pipeline stage passes on (a family's set_capture)

    def stage_forward(self, model, vllm_config, input_ids):
        """One prefill of this rank's pipeline stage as V2 runs a stage: a stage after the first takes
        the previous stage's intermediate tensors (`pp_group.recv_tensor_dict(all_gather_group=tp
        group)`, as `Worker.execute_model`'s irecv, blocking here), copied into the model's own
        `make_empty_intermediate_tensors` buffers (as `GPUModelRunner.execute_model` does, aux slots
        included), and no input ids unless the model needs raw tokens; a stage before the last
        passes on its output with the relayed aux states (`PPHandler.relay_aux_hidden_states`) by
        `send_tensor_dict` (`Worker.execute_model`'s isend). Returns the aux states the last stage
        hands the draft (a list, in capture order), None on an earlier stage."""
        import torch
        from vllm.config import set_current_vllm_config
        from vllm.distributed.parallel_state import get_pp_group, get_tp_group
        from vllm.forward_context import set_forward_context
        from vllm.sequence import IntermediateTensors
        from vllm.model_executor.models.interfaces import requires_raw_input_tokens

        pp, n = get_pp_group(), input_ids.shape[0]
        intermediate = None
        with set_current_vllm_config(vllm_config):
            if not pp.is_first_rank:
                received = pp.recv_tensor_dict(all_gather_group=get_tp_group())
                buffers = model.make_empty_intermediate_tensors(n, torch.float32, input_ids.device)
                intermediate = IntermediateTensors({k: v[:n].copy_(received[k][:n])
                                                    for k, v in buffers.tensors.items()})
            tokens = input_ids if pp.is_first_rank or requires_raw_input_tokens(model) else None
            with torch.no_grad(), set_forward_context(None, vllm_config, num_tokens=n):
                out = model(input_ids=tokens, positions=torch.arange(n), intermediate_tensors=intermediate)
            if not pp.is_last_rank:
                relayed = {k: intermediate[k] for k in self.relay} if self.relay else {}
                pp.send_tensor_dict(out.tensors | relayed, all_gather_group=get_tp_group())
                return None
        return list(out[1]) if isinstance(out, tuple) else []

    def stage(self, model) -> dict:
        """This rank's place and its model's part: pipeline and tensor ranks, the decoder layers its
        stage holds ([start, end): vLLM's own partition) and the layer indices it captures at."""
        from vllm.distributed.parallel_state import get_pp_group, get_tp_group

        inner = model.get_language_model().model if hasattr(model, "get_language_model") else model.model
        return {"pp_rank": get_pp_group().rank_in_group, "tp_rank": get_tp_group().rank_in_group,
                "is_last": bool(get_pp_group().is_last_rank),
                "layers": [int(getattr(inner, "start_layer", 0)), int(getattr(inner, "end_layer", 0))],
                "capture": self.capture_ids(model)}

    def dump_config(self, launch_ids: list[int]) -> dict | None:
        """The speculative config of speculators' data generation (scripts/launch_vllm.py): the
        `extract_hidden_states` method with the launch ids; both runners then set them."""
        return {"method": "extract_hidden_states", "num_speculative_tokens": 1,
                "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": list(launch_ids)}}}

    def set_dump(self, model, launch_ids: list[int]) -> None:
        """Only for a family without a dump method (dump_config None)."""
        raise NotImplementedError("vLLM 0.33 sets the dump's ids through its speculative config")

    def dump_stack(self, aux):
        """What the extract_hidden_states proposer writes per token: the aux states stacked in
        the order the model returned them ([T, slots, H]), as `ExtractHiddenStatesProposer.propose` does
        (0.34: `ExtractHiddenStatesSpeculator.propose`, the same stack)."""
        import torch

        return torch.stack(aux, dim=1)


class Draft:
    """The draft as the proposer builds, loads and shares it, and what its class applies."""

    # The built draft (parity.contract.BuiltDraft) is read from the 0.11 family on; an older
    # family's adapter (0.8.5, 0.9) sets False and the contract says its draft is not compared.
    BUILDS_DRAFT = True

    def build_draft(self, vllm_config, prefix: str = "draft"):
        """The draft class the proposer builds from the speculative config's draft model config
        (once per config: its layers register in the config's layer registry)."""
        from vllm.config import set_current_vllm_config
        from vllm.model_executor.model_loader.utils import initialize_model

        draft_config = vllm_config.speculative_config.draft_model_config
        with set_current_vllm_config(vllm_config):
            return initialize_model(vllm_config=vllm_config, model_config=draft_config, prefix=prefix).eval()

    def load_draft_weights(self, draft, vllm_config, weights: list) -> None:
        """The draft's own `load_weights` (d2t renamed, t2d dropped), then the loader's
        `process_weights_after_loading`."""
        import torch
        from vllm.config import set_current_vllm_config
        from vllm.model_executor.model_loader.utils import process_weights_after_loading

        with set_current_vllm_config(vllm_config):
            draft.load_weights(weights)
            process_weights_after_loading(draft, vllm_config.speculative_config.draft_model_config,
                                          torch.device("cpu"))

    def share_with_target(self, draft, target, vllm_config) -> None:
        """Share the target's embedding and LM head with the draft exactly where the proposer
        does: its own `_maybe_share_embeddings` / `_maybe_share_lm_head`, run on a holder of
        the draft (the real proposer allocates device buffers: a GPU)."""
        from vllm.config import set_current_vllm_config
        from vllm.v1.spec_decode.eagle import EagleProposer

        holder = _Proposer(draft, vllm_config)
        with set_current_vllm_config(vllm_config):
            EagleProposer._maybe_share_embeddings(holder, target)
            EagleProposer._maybe_share_lm_head(holder, target)

    def draft_graph(self, draft) -> dict:
        """The graph flags vLLM's draft class stores (what its forward applies)."""
        inner = draft.model
        layer = inner.layers[0]
        return {"norm_before_fc": bool(getattr(inner, "norm_before_fc", False)),
                "fc_norm": getattr(inner, "fc_norm", None) is not None,
                "norm_output": bool(getattr(inner, "norm_output", False)),
                "norm_before_residual": getattr(layer, "_residual_norm", None) is not None and
                getattr(layer._residual_norm, "__func__", None) is getattr(type(layer), "_norm_before_residual", 0)}

    def draft_embedding(self, draft, vllm_config, target, checkpoint: str | None = None) -> str:
        """Whose token embedding the served `draft` (just built) uses: its checkpoint loaded by
        its own `load_weights`, then the proposer's own sharing with `target` ("target" or "draft").
        `checkpoint`: the real draft of a draft built at tiny widths; its tensor names decide
        (an embed_tokens tensor is fed at the tiny width, distinct from the target's)."""
        import torch
        from safetensors import safe_open
        from safetensors.torch import load_file

        weights = {}
        if checkpoint is None:
            for f in sorted(Path(vllm_config.speculative_config.draft_model_config.model).glob("*.safetensors")):
                weights.update(load_file(str(f)))
        else:
            for f in sorted(Path(checkpoint).glob("*.safetensors")):
                with safe_open(str(f), framework="pt") as fh:
                    for name in fh.keys():
                        if "embed_tokens" in name:
                            weights[name] = torch.randn(draft.model.embed_tokens.weight.shape)
        self.load_draft_weights(draft, vllm_config, list(weights.items()))
        self.share_with_target(draft, target, vllm_config)
        return "target" if draft.model.embed_tokens is self.target_embedding(target) else "draft"

    @staticmethod
    def target_embedding(target):
        """The target's token embedding, where the proposer's sharing looks for it: its inner
        model's `embed_tokens`, or `embedding` (gpt-oss)."""
        inner = target.model
        return inner.embed_tokens if hasattr(inner, "embed_tokens") else inner.embedding

    def real_draft_sizes(self, draft_dir: str) -> dict:
        """The draft vocabulary vLLM's draft class takes from the draft's own config files: vLLM's
        config reader (`transformers_utils.config.get_config`, which turns a speculators-format
        config into the draft's HF config) run on the directory as given, never on the shrunk copy
        the class is built from; then the class's own rule (`LlamaForCausalLMEagle3.__init__`:
        without a draft_vocab_size, the draft's vocab_size)."""
        from vllm.transformers_utils.config import get_config

        config = get_config(draft_dir, trust_remote_code=False)
        draft_vocab = getattr(config, "draft_vocab_size", None)
        return {"draft_vocab_size": draft_vocab if draft_vocab is not None else getattr(config, "vocab_size", None)}

    def draft_facts(self, vllm_config, target=None, checkpoint: str | None = None,
                    reads: set[str] | None = None, dict_reads: dict[str, set[str]] | None = None) -> dict:
        """What vLLM's own draft class (built from the draft's config, as the proposer builds it)
        applies: the graph flags it stores and, run on probes, how a draft token index becomes a
        target id (`compute_logits` with a known d2t), whether `load_weights` takes a t2d and
        (given the built `target`) whose embedding it uses. With `reads` (the draft config's
        attributes vLLM's config classes read building `vllm_config`, parity.extract.config_reads):
        the class's constructor's reads are added, and the config keys it read (`config_keys`;
        `dict_reads`: the reads of the served config.json as a dict, `config_reads.reading_dicts`)."""
        import torch

        if reads is None:
            draft = self.build_draft(vllm_config)  # once: a release may name its layers whatever the prefix
        else:
            with recording(reads, skip=self.target_configs(vllm_config)):
                draft = self.build_draft(vllm_config)
        module = self.draft_module_facts(draft)  # as built: before any weight is loaded or shared
        if len(draft.model.layers) > 1:  # drawn before vLLM processes the weights: its CPU linears keep them
            from ....built import seeded  # deferred: heavy, parity.extract.built imports torch

            seeded(draft)
        keys = self.config_keys(draft, vllm_config, checkpoint, reads, dict_reads or {}) if reads is not None else {}
        if target is not None:  # loads the checkpoint (and processes the weights), then shares
            embedding = self.draft_embedding(draft, vllm_config, target, checkpoint)
        else:
            from vllm.config import set_current_vllm_config
            from vllm.model_executor.model_loader.utils import process_weights_after_loading

            embedding = "unknown"
            with set_current_vllm_config(vllm_config):
                process_weights_after_loading(draft, vllm_config.speculative_config.draft_model_config,
                                              torch.device("cpu"))
        module.update(self.layer_wiring(draft, vllm_config))
        graph = self.draft_graph(draft)
        return {"graph": graph, "vocab": self.vocab_mapping(draft, vllm_config), "embedding": embedding,
                "module": module, "config_keys": keys, "class": f"{type(draft).__module__}.{type(draft).__name__}"}

    @staticmethod
    def vocab_mapping(draft, vllm_config) -> dict:
        """How the built draft maps a draft token index to a target id (its compute_logits run with
        a known d2t), and whether its load_weights takes a t2d. The built class's sizes are the
        shrunk copy's: used to run it, never reported (the contract's sizes are
        `real_draft_sizes`', parity.contract.sources)."""
        import torch

        draft_vocab, target_vocab = draft.config.draft_vocab_size, vllm_config.model_config.get_vocab_size()
        mapping = getattr(draft, "draft_id_to_target_id", None)
        if mapping is None:
            return {"d2t": "absent", "t2d": "absent", "mapping": "draft index = target id (same vocabulary)"}
        # d2t = shift everywhere: offsets put draft index i at target id i + shift, absolute all at
        # shift (0 when the draft vocabulary is the target's: i + 1 would leave it)
        shift = 1 if draft_vocab < target_vocab else 0
        with torch.no_grad():
            mapping.fill_(shift)
            for p in draft.lm_head.parameters():
                p.copy_(torch.randn(p.shape))
            logits = draft.compute_logits(torch.randn(1, draft.config.hidden_size))
        finite = torch.isfinite(logits[0]).nonzero().flatten().tolist()
        d2t = ("offsets" if finite == [i + shift for i in range(draft_vocab)] else
               "absolute" if finite == [shift] else "unknown")
        before = {k: v.clone() for k, v in draft.state_dict().items()}
        draft.load_weights([("t2d", torch.ones(target_vocab, dtype=torch.bool))])
        same = lambda a, b: bool(((a == b) | (a.isnan() & b.isnan())).all())  # noqa: E731 (uninitialised: NaN)
        t2d = "ignored" if all(same(before[k], v) for k, v in draft.state_dict().items()) else "present"
        return {"d2t": d2t, "t2d": t2d, "mapping": f"target id = draft index + d2t[draft index] (compute_logits; "
                f"ran it: d2t = {shift} put draft index 0 at target id {finite[0] if finite else None})"}

    @staticmethod
    def layer_wiring(draft, vllm_config) -> dict:
        """The decoder layers vLLM's draft class built, and which norm each after the first applies
        to its input (parity.extract.built.later_layer_input_norms), found on one forward of the
        draft as the proposer runs it: `combine_hidden_states` (the fc), then its forward, over
        parity's attention stand-in (its parameters drawn before vLLM processed them)."""
        import torch
        from vllm.config import set_current_vllm_config
        from vllm.forward_context import set_forward_context

        from ....built import later_layer_input_norms  # deferred: heavy, parity.extract.built imports torch

        def forward():
            gen = torch.Generator().manual_seed(3)
            t = 6
            ids = torch.randint(0, draft.config.vocab_size, (t,), generator=gen)
            # 0.12-0.21's class keeps no fc_input_size (0.22 on): its fc's own input_size
            width = getattr(draft.model, "fc_input_size", None) or draft.model.fc.input_size
            aux = torch.randn(t, width, generator=gen)
            with set_current_vllm_config(vllm_config), set_forward_context(None, vllm_config, num_tokens=t):
                draft(input_ids=ids, positions=torch.arange(t), hidden_states=draft.combine_hidden_states(aux))

        layers = list(draft.model.layers)
        return {"layers_built": len(layers), "later_layer_input_norms": later_layer_input_norms(layers, forward)}

    # The `SpeculatorsConfig` method whose result its `from_pretrained` builds the class from (the
    # loaded config.json dict in, the class's keyword arguments out; 0.11: extract_vllm_speculative_config).
    SPECULATORS_CONVERSION = "extract_transformers_pre_trained_config"

    def config_keys(self, draft, vllm_config, checkpoint: str | None, reads: set[str],
                    dict_reads: dict[str, set[str]]) -> dict:
        """BuiltDraft's config_keys_read/unread/default for the real draft config.json (`checkpoint`,
        else the directory the draft was built from), given `reads`. The draft's hf_config is vLLM's
        `EAGLEConfig`, which holds the config class the draft's config.json builds as `model` and
        copies every field of it: keys are followed through that class. A speculators-format
        config (`speculators_config`) vLLM reads as a dict (`dict_reads`: its config parser picks
        the format by `speculators_config`, its `SpeculatorsConfig.extract_transformers_pre_trained_config`
        starts from `transformer_layer_config` and copies the EAGLE-3 keys of the top level into it)
        and builds its `SpeculatorsConfig` from the result (SPECULATORS_CONVERSION, as its
        `from_pretrained` does): keys are followed through that conversion
        (`config_reads.converted_fields`), nested ones spelled bare."""
        from transformers import PretrainedConfig

        folder = checkpoint or vllm_config.speculative_config.draft_model_config.model
        raw = json.loads((Path(folder) / "config.json").read_text())
        inner = getattr(draft.config, "model", None)
        config = inner if isinstance(inner, PretrainedConfig) else draft.config
        if "speculators_config" in raw:
            from vllm.transformers_utils.configs.speculators.base import SpeculatorsConfig  # 0.11 on

            convert = getattr(SpeculatorsConfig, self.SPECULATORS_CONVERSION)
            return converted_fields(config, raw, "transformer_layer_config", convert,
                                    lambda d: SpeculatorsConfig(**convert(d)), reads, dict_reads)
        return read_fields(config, raw, reads)

    @staticmethod
    def draft_module_facts(draft) -> dict:
        """What the draft class built at tiny widths computes (parity.extract.built): its rotary
        table (`get_rope`'s `cos_sin_cache`), its RMSNorms' eps, its MLP's activation, and whether
        its lm_head is its own token embedding (`Eagle3LlamaForCausalLM` builds a separate
        `ParallelLMHead` whatever tie_word_embeddings says)."""
        from ....built import module_facts  # deferred: heavy, parity.extract.built imports torch

        return module_facts(draft, draft.model.embed_tokens, getattr(draft, "lm_head", None))

    def real_draft_built(self, draft_dir: str, target_config: dict) -> dict:
        """The built draft's sizes as vLLM reads the draft's real config: `get_config` on the
        directory as given (what the draft's ModelConfig holds as hf_config), with the class's
        own defaults (`Eagle3LlamaForCausalLM.__init__`: draft_vocab_size = vocab_size when
        absent; its LlamaModel: target_hidden_size = hidden_size; LlamaAttention: head_dim =
        hidden_size / heads). The dtype is the target's: `SpeculativeConfig` builds the draft's
        ModelConfig with `dtype=target_model_config.dtype`, which for a served target is
        `_get_and_verify_dtype(..., "auto")` on the target's real config."""
        from vllm.config.model import _get_and_verify_dtype
        from vllm.transformers_utils.config import get_config

        from ....built import dtype_name, hf_sizes  # deferred: heavy, parity.extract.built imports torch

        built = hf_sizes(get_config(draft_dir, trust_remote_code=False))
        model_dir = launch.write_model_dir(Path(tempfile.mkdtemp(prefix="parity-vllm-dtype-")), target_config)
        target = get_config(model_dir, trust_remote_code=False)
        text = target.get_text_config() if hasattr(target, "get_text_config") else target
        built["dtype"] = dtype_name(_get_and_verify_dtype(model_dir, text, "auto", is_pooling_model=False))
        return built


class Adapter(Launch, Platform, Config, Capture, Draft):
    """vLLM 0.33's calls, each named after what parity needs from it: every concern in full (the
    adapter protocol, parity.extract.engines.vllm.adapter)."""


class _Proposer:
    """What the proposer's two sharing methods read of `self`: the draft model and the config."""

    def __init__(self, model, vllm_config):
        self.model, self.vllm_config = model, vllm_config
        # set from the speculative config by the proposer's __init__; the sharing code checks it
        self.use_local_argmax_reduction = getattr(vllm_config.speculative_config, "use_local_argmax_reduction", False)

    def __getattr__(self, name):
        raise AttributeError(f"parity's proposer holder has no {name!r}: vLLM's sharing code reads more "
                             "than parity set up")


class _V1Runner:
    """The attributes of a `GPUModelRunner` its two aux-layer methods read, and nothing else
    (the real runner allocates device buffers and a KV cache: a GPU)."""

    def __init__(self, model, speculative_config):
        self.model = model
        self.speculative_config = speculative_config
        self.use_aux_hidden_state_outputs = True

    def get_model(self):
        return self.model

    def __getattr__(self, name):  # the runner's own methods, bound to this object
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner

        attr = getattr(GPUModelRunner, name, None)
        if attr is None or not callable(attr):
            raise AttributeError(f"parity's V1 runner shell has no {name!r}: vLLM's runner code reads "
                                 "more than parity set up")
        return attr.__get__(self)
