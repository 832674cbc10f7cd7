"""The SGLang 0.5.23 family: the base adapter every other family adapter derives from.

Everything that differs between SGLang releases lives in one family adapter like this one:
how the process-wide runtime is published, where the draft's aux ids are resolved, how a
model class is found, how a prefill or decode batch is built and run, how the draft is bound
to the target's embedding. The extractor (probe.py) and the forward runner (forward_side.py)
call only the methods below and never branch on versions.

CPU shims, each the smallest that lets the real code run (docs/engines-on-cpu.md):
- single-process gloo groups; server args published with model_path "dummy" so the
  GPU-oriented argument resolution is skipped (real paths are given where read);
- the rotary-embedding module's device lookup answers "cpu" (it asks for an accelerator);
- attention by parity's prefill SDPA backend (sdpa_backend.py), not a stub of any layer;
- a hybrid target's (Qwen3-Next) Triton-only GDN kernels and shared-expert gate by CPU stand-ins
  for their bodies (gdn_standin.py, shared_gate_standin.py), installed by `Launch.setup`;
- the draft's embedding binding (`set_embed`, `set_embed_and_head`) under parity's
  `torch.cuda.synchronize` stand-in (standins.cuda_synchronize_on_cpu): the MLA draft class for
  Kimi-K2.5 (`Eagle3DeepseekV2ForCausalLM`) ends both with it.

DFlash (`--speculative-algorithm DFLASH`, the algorithm a DFlash draft is served under unless
the serve arguments name another): the ids are the draft's `target_layer_ids` (its
`dflash_config`'s, else the top level), as `parse_dflash_draft_config` reads them, else
`build_target_layer_ids(N, draft layers)`; the same start-up resolver
(`resolve_spec_aux_hidden_state_config`) returns them, and `configure_aux_hidden_state_capture`
hands them to the target's `set_dflash_layers_to_capture` (`set_dspark_layers_to_capture` under
DSPARK). The draft class (`DFlashDraftModel`) takes their concatenation in
`project_target_hidden`. This family runs all of it (REQUIRES_DFLASH).

The adapter is composed by concern, one small class each (the concerns of the adapter
protocol, parity.extract.engines.sglang.adapter): `Launch` (launch and server args, the
speculative algorithm and DFlash), `Config` (model config and aux-id resolution), `Target`
(target build, weights and capture), `Batches` (batches, attention, forwards, KV pools and
backends) and `Draft` (the built draft). An older family composes its `Adapter` from the
concern parts it changes, placed ahead of this `Adapter` (never through another family's
`Adapter`); a part two families share is imported from the file of the family where that
difference first appears (the newest release that has it), and each file says at its top
which parts it takes from where.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import sys
from typing import Any

import torch
from packaging.specifiers import SpecifierSet

from .... import standins
from ....run_until import require
from .. import gdn_standin, launch, shared_gate_standin
from ..sdpa_backend import make_backend_class

RELEASES = SpecifierSet("==0.5.23.*")  # the releases this family's adapter serves
VERIFIED = ("0.5.23",)  # releases whose capture and forward were verified against transformers

CODE_PATHS = {
    "ids": "sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state."
           "resolve_spec_aux_hidden_state_config",
    "capture": "sglang.srt.model_executor.model_runner_components.attention_backend_setup."
               "configure_aux_hidden_state_capture -> <Model>.set_eagle3_layers_to_capture",
    "model_class": "sglang.srt.model_loader.utils.get_model_architecture",
    "draft": "sglang.srt.models.llama_eagle3.LlamaForCausalLMEagle3",
}
# The same keys for a DFlash draft (served under DFLASH): the contract records these instead.
DFLASH_CODE_PATHS = {
    "ids": CODE_PATHS["ids"] + " -> _resolve_dflash_aux_hidden_state (sglang.srt.speculative.dflash_utils."
           "parse_dflash_draft_config, build_target_layer_ids)",
    "capture": "sglang.srt.model_executor.model_runner_components.attention_backend_setup."
               "configure_aux_hidden_state_capture -> <Model>.set_dflash_layers_to_capture",
    "model_class": CODE_PATHS["model_class"],
    "draft": "sglang.srt.models.dflash.DFlashDraftModel.project_target_hidden",
}

# SpeculativeAlgorithm's methods that may say whether an algorithm serves a DFlash draft, the
# family-wide one first: which one a release has is read from its class (dflash_question).
DFLASH_QUESTIONS = ("is_dflash_family", "is_dflash")


INTERPOLATION_MODES = "NEAREST NEAREST_EXACT BILINEAR BICUBIC BOX HAMMING LANCZOS"


def give_standin_interpolation_modes() -> None:
    """(Families whose engine imports torchvision at module level call it first; this family's
    does not, so it never imports the stand-in itself.) An inert InterpolationMode on the torchvision stand-in: transformers 5.6-5.12 build a
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
    (give_standin_interpolation_modes). For releases whose transformers refuses a registration
    without it (sglang 0.5.21's image processors)."""
    if "torchvision" in standins._active:
        importlib.import_module("torchvision")
        give_standin_interpolation_modes()


_COMMON = (  # what every family's CPU extraction runs, beside its own entries
    "sglang.srt.distributed.parallel_state.init_distributed_environment",
    "sglang.srt.distributed.parallel_state.initialize_model_parallel",
    "sglang.srt.layers.rotary_embedding.rope_variant.get_device",
    "sglang.srt.server_args.ServerArgs",
    "sglang.srt.configs.model_config.ModelConfig.from_server_args",
    "sglang.srt.speculative.spec_info.SpeculativeAlgorithm",
    "sglang.srt.model_loader.utils.get_model_architecture",
    "sglang.srt.model_executor.forward_batch_info.ForwardBatch",
    "sglang.srt.model_executor.forward_batch_info.ForwardMode",
    "sglang.srt.model_executor.forward_batch_info.CaptureHiddenMode",
    "sglang.srt.layers.attention.base_attn_backend.AttentionBackend",
    "sglang.srt.layers.logits_processor.LogitsMetadata",
    "sglang.srt.mem_cache.memory_pool.MHATokenToKVPool",
    "sglang.srt.mem_cache.memory_pool.ReqToTokenPool",
    "sglang.srt.layers.attention.torch_native_backend.TorchNativeAttnBackend",
    "sglang.srt.models.llama_eagle3.LlamaForCausalLMEagle3",
)


class Launch:
    """Launch and server args, and the speculative algorithm served (EAGLE-3 or DFlash): how the
    process-wide runtime is published, which code paths the extraction needs, whether DFlash runs."""

    # How the user's serve arguments are resolved (the launch contract): resolve_once's
    # declared resolutions, from 0.5.21 on (parity.extract.engines.sglang.launch).
    LAUNCH = staticmethod(launch.declared)

    # What a DFlash extraction runs beside REQUIRES: kept apart, so that a release without DFlash
    # keeps its EAGLE-3 placement and answers a DFlash draft with its own refusal.
    REQUIRES_DFLASH: tuple[str, ...] = (
        "sglang.srt.speculative.dflash_utils.parse_dflash_draft_config",
        "sglang.srt.speculative.dflash_utils.build_target_layer_ids",
        "sglang.srt.models.dflash.DFlashDraftModel.project_target_hidden",
        "sglang.srt.speculative.spec_info.SpeculativeAlgorithm.is_dflash_family",
        "sglang.srt.model_executor.model_runner_components.attention_backend_setup."
        "configure_aux_hidden_state_capture(is_dspark)",
    )
    # Whether this family's adapter runs DFlash capture (verified against transformers): a
    # family that does not says so as parity's limit, never as the release's answer.
    RUNS_DFLASH = True
    algorithm: str | None = "EAGLE3"  # the speculative algorithm the server args name (use_algorithm)

    def use_algorithm(self, name: str | None) -> None:
        """Serve under SGLang's speculative algorithm `name` (EAGLE3, DFLASH, DSPARK, or the one
        the serve arguments resolve to: EAGLE, None...): set before `setup`, which publishes it in
        the server args, and every family's capture is decided under it."""
        self.algorithm = name

    def is_dflash(self) -> bool:
        """Whether the algorithm served is of SGLang's DFlash family (its own answer)."""
        if self.algorithm == "EAGLE3":  # asks nothing of a release older than DFlash
            return False
        return self.serves_dflash(self.algorithm)  # the name its own resolution gave

    def dflash_question(self) -> str | None:
        """The installed SpeculativeAlgorithm's own method that says whether an algorithm serves
        a DFlash draft, read from the class: `is_dflash_family` where it has one (DFLASH,
        DSPARK: 0.5.16 on), else `is_dflash` (DFLASH alone: 0.5.12-0.5.15); None on a release
        without DFlash. `serves_dflash` asks it, and the launch verdict names it."""
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        return next((n for n in DFLASH_QUESTIONS if callable(getattr(SpeculativeAlgorithm, n, None))), None)

    def serves_dflash(self, name: str | None) -> bool:
        """Whether SGLang's algorithm `name` serves a DFlash draft, by the release's own method
        (`dflash_question`); False on a release without DFlash."""
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        question = self.dflash_question()
        return question is not None and bool(getattr(SpeculativeAlgorithm.from_string(name), question)())

    def dflash_refusal(self, version: str) -> tuple[str, bool] | None:
        """Why this release cannot extract a DFlash draft, and whether that is the release's own
        answer (its SpeculativeAlgorithm has no DFLASH: as on a GPU) rather than parity's limit
        (this family's adapter does not run DFlash, or a DFlash code path moved); None when it can."""
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        if not hasattr(SpeculativeAlgorithm, "DFLASH"):
            return (f"sglang {version} has no DFlash: its SpeculativeAlgorithm has no DFLASH, so it cannot serve "
                    "a DFlash draft", True)
        if not self.RUNS_DFLASH:
            return (f"parity's sglang {self.family}-family adapter does not run DFlash capture", False)
        try:
            require(*self.REQUIRES_DFLASH)
        except LookupError as exc:
            return (f"a DFlash code path parity runs moved: {exc}", False)
        return None

    def check_code_paths(self) -> None:
        """A loud CodePathMoved (naming what was looked for) unless every engine name this
        adapter runs is in the installed source. Imports engine modules: run it after
        parity's CPU stand-ins are installed."""
        require(*self.REQUIRES)

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
        own `initialize_model_parallel`. On the CPU the rotary-embedding device lookup answers "cpu"."""
        from sglang.srt import runtime_context as rc
        from sglang.srt.distributed import parallel_state as ps

        self.device = device
        if not device.startswith("cuda"):
            import sglang.srt.layers.rotary_embedding.rope_variant as rope_variant

            rope_variant.get_device = lambda device_id=None: "cpu"
            gdn_standin.install()  # Qwen3-Next's GDN split and gated norm: before the model is built
            shared_gate_standin.install()  # the shared expert's sigmoid gate (Qwen2-MoE's block)
        rc.reset_context()
        self.publish(draft_dir)
        ps.init_distributed_environment(world_size=self.tp * self.pp, rank=self.rank, local_rank=0, backend="gloo",
                                        distributed_init_method=f"tcp://127.0.0.1:{port}", timeout=self.dist_timeout)
        ps.initialize_model_parallel(backend="gloo")

    def _server_args(self, draft_dir: str | None, backend: str, device: str | None = None):
        from sglang.srt.server_args import ServerArgs

        self._published = (draft_dir, backend)
        spec = {}
        if draft_dir is not None:
            spec = dict(speculative_algorithm=self.algorithm, speculative_draft_model_path=draft_dir)
        layout = {"pp_size": self.pp} if self.pp != 1 else {}
        return ServerArgs(model_path="dummy", tp_size=self.tp, device=device, attention_backend=backend, **layout,
                          **spec)

    def publish(self, draft_dir: str | None, backend: str = "torch_native") -> None:
        """(Re-)publish the process-wide server args naming this draft (last publish wins)."""
        from sglang.srt import runtime_context as rc

        self.server_args = self._server_args(draft_dir, backend)
        rc.publish(self.server_args, role="test", ranks=rc.SpawnRanks(world_rank=self.rank))

    def ids_never_read(self, version: str) -> str | None:
        """Why this release never reads aux ids from any draft config (its reports say so where
        the ids resolve to None), or None: this family reads them."""
        return None


class Config:
    """Model config reading and the draft's aux-id resolution."""

    # -- config reading -------------------------------------------------------------

    def model_config(self, model_dir: str, is_draft: bool = False):
        from sglang.srt.configs.model_config import ModelConfig

        return ModelConfig.from_server_args(self.server_args, model_path=model_dir,
                                            is_draft_model=is_draft)

    def draft_model_config(self, draft_dir: str, context_length: int):
        """The draft's ModelConfig as the EAGLE worker builds it: with the target's context
        length (eagle_worker_v2 passes `target ... model_config.context_len`)."""
        from sglang.srt.configs.model_config import ModelConfig

        return ModelConfig.from_server_args(self.server_args, model_path=draft_dir, is_draft_model=True,
                                            context_length=context_length)

    def resolve_aux_ids(self, target_config) -> tuple[bool, Any]:
        """The draft's aux ids exactly as the engine resolves them at start-up, under the
        algorithm served (DFlash's: `dflash_target_layer_ids`, and whether it is DSpark)."""
        from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import \
            resolve_spec_aux_hidden_state_config
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        resolved = resolve_spec_aux_hidden_state_config(
            server_args=self.server_args, model_config=target_config,
            spec_algorithm=SpeculativeAlgorithm.from_string(self.algorithm), is_draft_worker=False)
        if self.is_dflash():
            self.is_dspark = bool(getattr(resolved, "is_dspark", False))
            return resolved.dflash_use_aux_hidden_state, resolved.dflash_target_layer_ids
        return resolved.eagle_use_aux_hidden_state, resolved.eagle_aux_hidden_state_layer_ids

    def dflash_draft_config(self, draft_dir: str) -> Any:
        """The DFlash draft's config as the engine's parser reads it (`parse_dflash_draft_config` of
        the draft's ModelConfig: target_layer_ids, block size, mask token)."""
        from sglang.srt.speculative.dflash_utils import parse_dflash_draft_config

        return parse_dflash_draft_config(draft_hf_config=self.model_config(draft_dir, is_draft=True).hf_config)

    def dflash_written_ids(self, draft_dir: str) -> list[int] | None:
        """The DFlash draft's own ids as the engine's parser reads them (its `target_layer_ids`),
        None when it has none and the engine builds its default."""
        parsed = self.dflash_draft_config(draft_dir)
        return None if parsed.target_layer_ids is None else list(parsed.target_layer_ids)


class Target:
    """The target: its model class, build, weights, capture set-up and decoder."""

    # -- the target -----------------------------------------------------------------

    def model_class(self, model_config) -> type:
        from sglang.srt.model_loader.utils import get_model_architecture

        return get_model_architecture(model_config)[0]

    def build_target(self, target_config) -> torch.nn.Module:
        cls = self.model_class(target_config)
        return cls(config=target_config.hf_config, quant_config=None).eval()

    def load_weights(self, model: torch.nn.Module, state_dict: dict[str, torch.Tensor]) -> None:
        model.load_weights(list(state_dict.items()))
        post = getattr(model, "post_load_weights", None)
        if post is not None:
            post()

    def configure_capture(self, model, use_aux: bool, ids) -> None:
        """The capture set-up the model runner does at start-up, for the algorithm served."""
        from sglang.srt.model_executor.model_runner_components.attention_backend_setup import \
            configure_aux_hidden_state_capture

        dflash = self.is_dflash()
        configure_aux_hidden_state_capture(
            model=model, eagle_use_aux_hidden_state=use_aux and not dflash,
            eagle_aux_hidden_state_layer_ids=None if dflash else ids,
            dflash_use_aux_hidden_state=use_aux and dflash, dflash_target_layer_ids=ids if dflash else None,
            is_dspark=dflash and getattr(self, "is_dspark", False))

    def text_layers(self, model_config) -> int:
        """N as the engine reads it: its text config (a wrapper's `text_config`)."""
        return model_config.hf_text_config.num_hidden_layers

    def decoder(self, model) -> torch.nn.Module:
        """The module holding the decoder layers, the token embedding and the capture list:
        `model.model` of a causal LM; in a multimodal wrapper (KimiK25ForConditionalGeneration,
        Llama4ForConditionalGeneration), that of the text model it keeps as `language_model`
        and hands `set_eagle3_layers_to_capture` to."""
        for path in (("model",), ("language_model", "model"), ("model", "model")):
            obj = model
            for attr in path:
                obj = getattr(obj, attr, None)
            if obj is not None and hasattr(obj, "layers"):
                return obj
        raise AttributeError(f"{type(model).__name__}: no decoder module (looked for .model.layers and "
                             ".language_model.model.layers)")

    def capture_indices(self, model) -> list[int] | None:
        ids = getattr(self.decoder(model), "layers_to_capture", None)
        return list(ids) if ids is not None else None

    def num_layers(self, model) -> int:
        return len(self.decoder(model).layers)


class Batches:
    """Batches, attention and forwards: parity's prefill backend, and SGLang's own KV pools and
    attention backends."""

    # -- batches and forwards ----------------------------------------------------------

    def batch_fields(self, **fields) -> dict:
        """The ForwardBatch constructor's arguments this release takes (all of them here)."""
        return fields

    def extend_batch(self, input_ids: torch.Tensor, out_cache_loc: torch.Tensor | None = None,
                     req_pool_index: int = 0):
        """One request's EXTEND (prefill) batch with full hidden capture, on the tokens' device."""
        from sglang.srt.model_executor.forward_batch_info import (CaptureHiddenMode, ForwardBatch,
                                                                  ForwardMode)

        t, dev = input_ids.shape[0], input_ids.device
        lens = torch.tensor([t], dtype=torch.int32, device=dev)
        batch = ForwardBatch(**self.batch_fields(
            forward_mode=ForwardMode.EXTEND, batch_size=1, input_ids=input_ids,
            req_pool_indices=torch.tensor([req_pool_index], dtype=torch.int32, device=dev),
            seq_lens=lens, seq_lens_cpu=lens.cpu().clone(),
            out_cache_loc=torch.arange(t, device=dev) if out_cache_loc is None else out_cache_loc,
            seq_lens_sum=t, positions=torch.arange(t, device=dev)))
        batch.extend_prefix_lens = torch.zeros(1, dtype=torch.int32, device=dev)
        batch.extend_prefix_lens_cpu = [0]
        batch.extend_seq_lens = lens.clone()
        batch.extend_seq_lens_cpu = [t]
        batch.extend_num_tokens = t
        batch.extend_start_loc = torch.zeros(1, dtype=torch.int32, device=dev)
        batch.capture_hidden_mode = CaptureHiddenMode.FULL
        return batch

    def decode_batch(self, input_ids: torch.Tensor, req_pool_indices: torch.Tensor,
                     seq_lens: torch.Tensor, out_cache_loc: torch.Tensor, positions: torch.Tensor):
        """A DECODE batch, one token per request, with full hidden capture."""
        from sglang.srt.model_executor.forward_batch_info import (CaptureHiddenMode, ForwardBatch,
                                                                  ForwardMode)

        batch = ForwardBatch(**self.batch_fields(
            forward_mode=ForwardMode.DECODE, batch_size=input_ids.shape[0], input_ids=input_ids,
            req_pool_indices=req_pool_indices, seq_lens=seq_lens, seq_lens_cpu=seq_lens.cpu().clone(),
            out_cache_loc=out_cache_loc, seq_lens_sum=int(seq_lens.sum()), positions=positions))
        batch.capture_hidden_mode = CaptureHiddenMode.FULL
        return batch

    def prefill_backend(self):
        """Parity's prefill SDPA backend, as a subclass of this release's AttentionBackend."""
        from sglang.srt.layers.attention.base_attn_backend import AttentionBackend

        return make_backend_class(AttentionBackend)()

    def attention_context(self, batch, backend):
        """What the attention layers read their backend from during one forward: this release
        asks the forward context (which also carries the batch)."""
        from sglang.srt.model_executor.forward_context import ForwardContext, forward_context

        return forward_context(ForwardContext(attn_backend=backend), forward_batch=batch)

    @torch.no_grad()
    def run_batch(self, model, batch, backend, spec_hidden: torch.Tensor | None = None):
        """`model.forward` on `batch` with `backend` answering its attention layers;
        `spec_hidden` is the state a draft continues from (`forward_batch.spec_info`)."""
        batch.attn_backend = backend
        if spec_hidden is not None:
            batch.spec_info = _SpecInfo(spec_hidden)
        backend.init_forward_metadata(batch)
        with self.attention_context(batch, backend):
            return model.forward(batch.input_ids, batch.positions, batch)

    @torch.no_grad()
    def stage_forward(self, model, input_ids: torch.Tensor) -> torch.Tensor | None:
        """One EXTEND forward of this rank's pipeline stage, as SGLang's scheduler runs a stage: a
        stage after the first takes the previous stage's proxy tensors
        (`pp_group.recv_tensor_dict(all_gather_group=attn_tp_group)` into `PPProxyTensors`, as
        `SchedulerPPMixin._pp_recv_proxy_tensors`), runs `model.forward(..., pp_proxy_tensors=)`,
        and a stage before the last sends its output's tensors on (`send_tensor_dict`, typed
        "proxy", as `_pp_send_dict_to_next_stage`). Returns what the last stage hands the draft
        (its output's `hidden_states`, the aux states' concatenation), None on an earlier stage."""
        from sglang.srt.model_executor.forward_batch_info import PPProxyTensors
        from sglang.srt.runtime_context import get_parallel

        parallel = get_parallel()
        pp_group = parallel.pp_group
        proxy = None
        if not pp_group.is_first_rank:
            proxy = PPProxyTensors(pp_group.recv_tensor_dict(all_gather_group=parallel.attn_tp_group))
        batch, backend = self.extend_batch(input_ids), self.prefill_backend()
        batch.attn_backend = backend
        backend.init_forward_metadata(batch)
        with self.attention_context(batch, backend):
            out = model.forward(batch.input_ids, batch.positions, batch, pp_proxy_tensors=proxy)
        if not pp_group.is_last_rank:
            pp_group.send_tensor_dict({**out.tensors, "__msg_type__": "proxy"},
                                      all_gather_group=parallel.attn_tp_group)
            return None
        return out.hidden_states

    def stage(self, model) -> dict:
        """This rank's place and its model's part: pipeline and tensor ranks, the decoder layers
        its stage holds ([start, end): the engine's own partition) and the layer indices it captures at."""
        from sglang.srt.runtime_context import get_parallel

        parallel, decoder = get_parallel(), self.decoder(model)
        return {"pp_rank": parallel.pp_rank, "tp_rank": parallel.tp_rank,
                "is_last": bool(parallel.pp_group.is_last_rank),
                "layers": [int(getattr(decoder, "start_layer", 0)),
                           int(getattr(decoder, "end_layer", len(decoder.layers)))],
                "capture": self.capture_indices(model)}

    def forward(self, model, input_ids: torch.Tensor, spec_hidden: torch.Tensor | None = None):
        """One EXTEND forward with full hidden capture over parity's prefill SDPA backend;
        returns the LogitsProcessorOutput."""
        return self.run_batch(model, self.extend_batch(input_ids), self.prefill_backend(), spec_hidden)

    # -- real KV pools and SGLang's own attention backends (the forward's draft, the GPU tier)

    def kv_pools(self, *, size: int, requests: int, context: int, kv_heads: int, head_dim: int,
                 layers: int, dtype: torch.dtype, device: str):
        """An MHA token-to-KV pool of `size` slots and a request-to-token table."""
        from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, ReqToTokenPool

        kv = MHATokenToKVPool(size=size, page_size=1, dtype=dtype, head_num=kv_heads, head_dim=head_dim,
                              layer_num=layers, device=device, enable_memory_saver=False)
        req = ReqToTokenPool(size=requests, max_context_len=context, device=device,
                             enable_memory_saver=False)
        return kv, req

    def attention_backend(self, name: str, *, model_config, kv, req, dtype: torch.dtype, device: str,
                          is_draft: bool):
        """SGLang's attention backend `name` over the pools, built as its ModelRunner builds it
        (the registry). The backend reads a handful of ModelRunner attributes; the stand-in
        runner carries exactly those (on the CPU, TorchNativeAttnBackend needs only the device
        and the two pools; the GPU backends also read the model config, dtype and speculative
        settings)."""
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        class _Runner:
            pass

        runner = _Runner()
        runner.__dict__.update(
            device=device, gpu_id=0, req_to_token_pool=req, token_to_kv_pool=kv,
            token_to_kv_pool_allocator=None, model_config=model_config, kv_cache_dtype=dtype,
            dtype=dtype, page_size=1, sliding_window_size=None, is_draft_worker=is_draft,
            decode_num_tokens_per_req=1, kv_index_translator=None, server_args=self.server_args,
            spec_algorithm=SpeculativeAlgorithm.from_string("EAGLE3"), tp_size=1)
        if name == "torch_native":
            from sglang.srt.layers.attention.torch_native_backend import TorchNativeAttnBackend

            return TorchNativeAttnBackend(runner)
        from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS

        if name not in ATTENTION_BACKENDS:
            raise LookupError(f"sglang has no attention backend {name!r} (has {sorted(ATTENTION_BACKENDS)})")
        return ATTENTION_BACKENDS[name](runner)

    def default_gpu_attention_backend(self, model_config) -> str:
        """The attention backend SGLang picks by default for this GPU and model (its own resolver)."""
        from sglang.srt.arg_groups.model_override_base import get_default_attn_backend

        return get_default_attn_backend(self.server_args, use_mla_backend=False, model_config=model_config)

    def is_mla(self, model_config) -> bool:
        from sglang.srt.configs.model_config import AttentionArch

        return getattr(model_config, "attention_arch", None) == AttentionArch.MLA


class Draft:
    """The built draft: its build, decoder layers, embedding binding and logits rows."""

    # -- the draft ------------------------------------------------------------------

    def build_draft(self, draft_dir: str):
        """The draft as the engine builds it: its config reader, its model class."""
        from sglang.srt.model_loader.utils import get_model_architecture

        config = self.model_config(draft_dir, is_draft=True)
        cls, _ = get_model_architecture(config)
        draft = cls(config=config.hf_config, quant_config=None).eval()
        if not getattr(self, "device", "cpu").startswith("cuda"):
            on_cpu_embedding_binding(draft)
        return draft

    def draft_layers(self, draft) -> list:
        """The draft's decoder layers, in order (its `model.layers`; the MLA draft class for
        Kimi-K2.5, `Eagle3DeepseekV2ForCausalLM`, has one, `model.midlayer`)."""
        layers = getattr(draft.model, "layers", None)
        return list(layers) if layers is not None else [draft.model.midlayer]

    def target_embed_and_head(self, target, draft) -> tuple[Any, Any]:
        """The target's embedding and head as the EAGLE-3 worker fetches them for the draft."""
        from sglang.srt.speculative.pp_draft_embedding import resolve_target_embed_and_head

        return resolve_target_embed_and_head(target, draft_model=draft)

    def bind_target_embedding(self, target, draft) -> str:
        """Bind the target's embedding (and head) into the draft as SGLang's EAGLE-3 worker does:
        `set_embed_and_head` when the draft takes its head from the target, else `set_embed`.
        Returns whose embedding the draft now holds ("target" or "draft")."""
        embed, head = self.target_embed_and_head(target, draft)
        before = draft.model.embed_tokens.weight
        if getattr(draft, "load_lm_head_from_target", False):
            draft.set_embed_and_head(embed, head)
        else:
            draft.set_embed(embed)
        return "target" if draft.model.embed_tokens.weight is not before else "draft"

    def keep_all_rows(self, draft) -> None:
        """Make the draft's LogitsProcessor keep every row of a prefill: its batch metadata is
        marked DECODE, which keeps every row through the same `lm_head` code path."""
        from sglang.srt.layers.logits_processor import LogitsMetadata
        from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode

        processor = draft.logits_processor
        original = processor.forward

        def forward(input_ids, hidden_states, lm_head, logits_metadata, *args, **kwargs):
            if isinstance(logits_metadata, ForwardBatch):
                logits_metadata = LogitsMetadata.from_forward_batch(logits_metadata)
            if logits_metadata.forward_mode.is_extend():
                logits_metadata = dataclasses.replace(logits_metadata, forward_mode=ForwardMode.DECODE)
            return original(input_ids, hidden_states, lm_head, logits_metadata, *args, **kwargs)

        processor.forward = forward


class Adapter(Launch, Config, Target, Batches, Draft):
    """The 0.5.23 family's adapter: every concern as the base states it. Older families compose
    theirs from the concern parts they change (each imported from the file of the family where
    that difference first appears) ahead of this class."""

    family = "0.5.23"
    # Every engine name this adapter's CPU extraction and forward run (the GPU-only backend
    # resolver aside): a release outside every family's range runs with this adapter only
    # when each of them is found in its installed source (parity.extract.families.place).
    REQUIRES: tuple[str, ...] = _COMMON + (
        "sglang.srt.runtime_context.reset_context",
        "sglang.srt.runtime_context.publish",
        "sglang.srt.runtime_context.SpawnRanks",
        "sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state."
        "resolve_spec_aux_hidden_state_config",
        "sglang.srt.model_executor.model_runner_components.attention_backend_setup."
        "configure_aux_hidden_state_capture",
        "sglang.srt.model_executor.forward_context.ForwardContext",
        "sglang.srt.model_executor.forward_context.forward_context(forward_batch)",
        "sglang.srt.speculative.pp_draft_embedding.resolve_target_embed_and_head(draft_model)",
        "sglang.srt.runtime_context.publish(ranks)",
    )


def on_cpu_embedding_binding(draft) -> None:
    """The draft's `set_embed` and `set_embed_and_head` (what the EAGLE-3 worker calls to bind
    the target's embedding and head) run under parity's `torch.cuda.synchronize` stand-in on a
    CPU (standins.cuda_synchronize_on_cpu): the MLA draft class for Kimi-K2.5
    (`Eagle3DeepseekV2ForCausalLM`, kimi_k25_eagle3.py) ends both with `torch.cuda.empty_cache()`
    and `torch.cuda.synchronize()`, housekeeping after the binding, which the CPU build of torch
    refuses. The binding itself runs unchanged; a class that calls neither is unaffected."""
    for name in ("set_embed", "set_embed_and_head"):
        method = getattr(draft, name, None)
        if method is None:
            continue

        def bound(*args, _method=method, **kwargs):
            with standins.cuda_synchronize_on_cpu():
                return _method(*args, **kwargs)

        setattr(draft, name, bound)


class _SpecInfo:
    """What the draft reads from `forward_batch.spec_info` in a prefill: the aux states."""

    def __init__(self, hidden_states: torch.Tensor):
        self.hidden_states = hidden_states
