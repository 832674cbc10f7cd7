"""What the SGLang extraction asks of a release family's adapter: the adapter protocol.

The extractor (probe.py), the built-draft facts (draft_facts.py), the forward runner
(forward_side.py) and SpecForge's probe call only the members below on an adapter and never
branch on releases. Every family's `Adapter` provides all of them (tests/test_adapter_protocol.py),
composed of one variant of each concern of the implementation (concerns/: process, launch, config,
capture, target, batches, context, draft), each a base stating that concern as the newest
release runs it and variants named by what they do differently. The protocol's five groups
below are what callers ask for; the implementation's concerns split them where releases differ
independently (the capture concern holds `resolve_aux_ids`, `configure_capture` and
`ids_never_read`; the process concern `setup` and `check_code_paths`).

Beside these an adapter carries `server_args` (the process-wide server args it published, set
by `setup` and `publish`), read by the forward runner where the engine reads them.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Callable, Protocol

import torch


class Launch(Protocol):
    """Launch and server args, and the speculative algorithm served."""

    family: str  # the family's name (its first release), recorded in every contract
    LAUNCH: Callable[..., Any]  # how the user's serve arguments are resolved (launch.declared or launch.traced)
    RUNS_DFLASH: bool  # whether this family's adapter runs DFlash capture (else a DFlash draft is parity's limit)

    def use_algorithm(self, name: str) -> None:
        """Serve under SGLang's speculative algorithm `name`; set before `setup`."""

    def is_dflash(self) -> bool:
        """Whether the algorithm served is of SGLang's DFlash family (the release's own answer)."""

    def dflash_question(self) -> str | None:
        """The installed SpeculativeAlgorithm's own method `serves_dflash` asks (`is_dflash_family`,
        or `is_dflash` on a release without a DFlash family), read from the class; None without DFlash."""

    def serves_dflash(self, name: str | None) -> bool:
        """Whether SGLang's algorithm `name` serves a DFlash draft, by the release's own method
        (`dflash_question`)."""

    def dflash_refusal(self, version: str) -> tuple[str, bool] | None:
        """Why this release cannot extract a DFlash draft and whether that is the release's own
        answer (else parity's limit); None when it can."""

    def check_code_paths(self) -> None:
        """Raise CodePathMoved unless every engine name this adapter runs is in the installed
        source (with parity's CPU stand-ins installed)."""

    def setup(self, port: int, draft_dir: str | None, device: str = "cpu") -> None:
        """Publish the server args naming `draft_dir` and start single-process groups on `port`."""

    def setup_rank(self, port: int, draft_dir: str | None, rank: int, tp: int, pp: int, timeout: int) -> None:
        """`setup` as rank `rank` of a layout of `tp` x `pp` ranks (only a family that `runs_ranks`)."""

    def runs_ranks(self) -> bool:
        """Whether this family's adapter runs the capture on several ranks (a parallel layout);
        where not, a layout of more than one rank is parity's limit."""

    def publish(self, draft_dir: str | None, backend: str = "torch_native") -> None:
        """(Re-)publish the process-wide server args naming this draft and attention backend."""

    def ids_never_read(self, version: str) -> str | None:
        """Why this release never reads aux ids from any draft config, or None when it reads them."""


class Config(Protocol):
    """Model config reading and the draft's aux-id resolution."""

    def model_config(self, model_dir: str, is_draft: bool = False) -> Any:
        """The engine's ModelConfig of the model in `model_dir` (the draft's when `is_draft`)."""

    def draft_model_config(self, draft_dir: str, context_length: int) -> Any:
        """The draft's ModelConfig as the speculative worker builds it, with the target's context length."""

    def resolve_aux_ids(self, target_config) -> tuple[bool, Any]:
        """(whether aux states are captured, the layer ids) exactly as the engine resolves them."""

    def dflash_draft_config(self, draft_dir: str) -> Any:
        """The DFlash draft's config as the engine's own parser reads it (`parse_dflash_draft_config`:
        its target_layer_ids, block size, mask token)."""

    def dflash_written_ids(self, draft_dir: str) -> list[int] | None:
        """The DFlash draft's own ids as the engine's parser reads them; None when it has none."""


class Target(Protocol):
    """The target: its model class, build, weights, capture set-up and decoder."""

    def model_class(self, model_config) -> type:
        """The model class the engine picks for `model_config`."""

    def build_target(self, target_config) -> torch.nn.Module:
        """The target model as the engine builds it (after any start-up it needs first)."""

    def load_weights(self, model: torch.nn.Module, state_dict: dict[str, torch.Tensor]) -> None:
        """Load `state_dict` through the model's own `load_weights` (and its post-load hook)."""

    def configure_capture(self, model, use_aux: bool, ids) -> None:
        """The capture set-up the model runner does at start-up, with the resolved ids."""

    def text_layers(self, model_config) -> int:
        """N, the target's decoder layer count, as the engine reads it."""

    def decoder(self, model) -> torch.nn.Module:
        """The module holding the decoder layers, the token embedding and the capture list."""

    def capture_indices(self, model) -> list[int] | None:
        """The layer indices the built target captures, None when it captures none."""


class Batches(Protocol):
    """Batches, attention and forwards."""

    def extend_batch(self, input_ids: torch.Tensor, out_cache_loc: torch.Tensor | None = None,
                     req_pool_index: int = 0) -> Any:
        """One request's EXTEND (prefill) batch with full hidden capture."""

    def decode_batch(self, input_ids: torch.Tensor, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor,
                     out_cache_loc: torch.Tensor, positions: torch.Tensor) -> Any:
        """A DECODE batch, one token per request, with full hidden capture."""

    def attention_context(self, batch, backend) -> AbstractContextManager:
        """What the attention layers read their backend from during one forward."""

    def run_batch(self, model, batch, backend, spec_hidden: torch.Tensor | None = None) -> Any:
        """`model.forward` on `batch` with `backend` answering its attention layers."""

    def forward(self, model, input_ids: torch.Tensor, spec_hidden: torch.Tensor | None = None) -> Any:
        """One EXTEND forward with full hidden capture over parity's prefill SDPA backend."""

    def stage_forward(self, model, input_ids: torch.Tensor) -> torch.Tensor | None:
        """One EXTEND forward of this rank's pipeline stage, the stages' tensors passed on as the
        engine's scheduler passes them; the aux states the last stage hands the draft (else None)."""

    def stage(self, model) -> dict:
        """This rank's place (pp_rank, tp_rank, is_last) and its model's part (layers, capture)."""

    def kv_pools(self, *, size: int, requests: int, context: int, kv_heads: int, head_dim: int,
                 layers: int, dtype: torch.dtype, device: str) -> tuple[Any, Any]:
        """A token-to-KV pool and a request-to-token table, the engine's own."""

    def attention_backend(self, name: str, *, model_config, kv, req, dtype: torch.dtype, device: str,
                          is_draft: bool) -> Any:
        """SGLang's attention backend `name` over the pools, built as its ModelRunner builds it."""

    def default_gpu_attention_backend(self, model_config) -> str:
        """The attention backend SGLang picks by default for this GPU and model."""

    def is_mla(self, model_config) -> bool:
        """Whether the model's attention is MLA in the engine's reading."""


class Draft(Protocol):
    """The built draft."""

    def build_draft(self, draft_dir: str) -> torch.nn.Module:
        """The draft as the engine builds it: its config reader, its model class."""

    def draft_layers(self, draft) -> list:
        """The draft's decoder layers, in order."""

    def bind_target_embedding(self, target, draft) -> str:
        """Bind the target's embedding (and head) into the draft as the EAGLE-3 worker does; returns
        whose embedding the draft now holds ("target" or "draft")."""

    def keep_all_rows(self, draft) -> None:
        """Make the draft's logits processor keep every row of a prefill."""


class Adapter(Launch, Config, Target, Batches, Draft, Protocol):
    """Every member the extraction calls on an SGLang family's adapter, by concern."""


CONCERNS = (Launch, Config, Target, Batches, Draft)  # the concerns, in the order the base states them
