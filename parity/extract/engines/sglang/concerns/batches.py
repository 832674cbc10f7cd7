"""The batches concern: how a prefill or decode batch is built and run (parity's prefill SDPA
backend answering the attention layers: sdpa_backend.py, not a stub of any layer), a pipeline
stage's forward, SGLang's own KV pools and attention backends, and the attention backend SGLang
picks by default on a GPU.

- `Batches` (0.5.21 on): every `ForwardBatch` field given; the default GPU backend by
  `arg_groups.model_override_base.get_default_attn_backend`.
- `DefaultBackendByResolverOrServerArgs` (0.5.16-0.5.20): the default GPU backend by
  `ServerArgs._get_default_attn_backend` up to 0.5.18, `arg_groups.model_override_base.
  get_default_attn_backend` from 0.5.19 (whichever the installed release defines; both are the
  engine's own resolver).
- `DefaultBackendByServerArgs` (0.4.4.post2-0.5.15): by `ServerArgs._get_default_attn_backend`.
- `ForwardBatchWithoutSeqLensCpu` (0.4.4.post2-0.4.8): as `DefaultBackendByServerArgs`, and
  `ForwardBatch` has no `seq_lens_cpu` field in 0.4.4.post2-0.4.4.post3 (added in 0.4.4.post4;
  nothing on the CPU path reads it there): a batch is built without it where the dataclass does
  not declare it.
"""

from __future__ import annotations

import dataclasses

import torch

from ..sdpa_backend import make_backend_class


class Batches:
    """Batches and forwards: parity's prefill backend, and SGLang's own KV pools and attention
    backends."""

    BATCHES_PATHS: tuple[str, ...] = (
        "sglang.srt.model_executor.forward_batch_info.ForwardBatch",
        "sglang.srt.model_executor.forward_batch_info.ForwardMode",
        "sglang.srt.model_executor.forward_batch_info.CaptureHiddenMode",
        "sglang.srt.layers.attention.base_attn_backend.AttentionBackend",
        "sglang.srt.mem_cache.memory_pool.MHATokenToKVPool",
        "sglang.srt.mem_cache.memory_pool.ReqToTokenPool",
        "sglang.srt.layers.attention.torch_native_backend.TorchNativeAttnBackend",
    )

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


class DefaultBackendByResolverOrServerArgs(Batches):
    """The default GPU attention backend: the resolver from 0.5.19, `ServerArgs`' own before."""

    def default_gpu_attention_backend(self, model_config) -> str:
        try:
            return super().default_gpu_attention_backend(model_config)  # 0.5.19 on
        except ImportError:
            return self.server_args._get_default_attn_backend(False, model_config)


class DefaultBackendByServerArgs(Batches):
    """The default GPU attention backend by `ServerArgs._get_default_attn_backend`."""

    def default_gpu_attention_backend(self, model_config) -> str:
        return self.server_args._get_default_attn_backend(False, model_config)


class ForwardBatchWithoutSeqLensCpu(DefaultBackendByServerArgs):
    """`seq_lens_cpu` only where this release's ForwardBatch declares it."""

    def batch_fields(self, **fields) -> dict:
        """`seq_lens_cpu` only where this release's ForwardBatch declares it (0.4.4.post4 on)."""
        from sglang.srt.model_executor.forward_batch_info import ForwardBatch

        declared = {f.name for f in dataclasses.fields(ForwardBatch)}
        if "seq_lens_cpu" not in declared:
            fields.pop("seq_lens_cpu", None)
        return fields


class _SpecInfo:
    """What the draft reads from `forward_batch.spec_info` in a prefill: the aux states."""

    def __init__(self, hidden_states: torch.Tensor):
        self.hidden_states = hidden_states
