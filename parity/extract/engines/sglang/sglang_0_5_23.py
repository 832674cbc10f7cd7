"""SGLang 0.5.23 (and the releases that share its runtime layout): the per-release adapter.

Everything that differs between SGLang releases lives in one adapter like this one:
how the process-wide runtime is published, where the draft's aux ids are resolved,
how a model class is found and a prefill batch is built. The extractor above it
(probe.py) calls only the methods below and never branches on versions.

CPU shims, each the smallest that lets the real code run (docs/engines-on-cpu.md):
- single-process gloo groups; server args published with model_path "dummy" so the
  GPU-oriented argument resolution is skipped (real paths are given where read);
- the rotary-embedding module's device lookup answers "cpu" (it asks for an accelerator);
- attention by parity's prefill SDPA backend (sdpa_backend.py), not a stub of any layer.
"""

from __future__ import annotations

from typing import Any

import torch

CODE_PATHS = {
    "ids": "sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state."
           "resolve_spec_aux_hidden_state_config",
    "capture": "sglang.srt.model_executor.model_runner_components.attention_backend_setup."
               "configure_aux_hidden_state_capture -> <Model>.set_eagle3_layers_to_capture",
    "model_class": "sglang.srt.model_loader.utils.get_model_architecture",
    "draft": "sglang.srt.models.llama_eagle3.LlamaForCausalLMEagle3",
}


class Adapter:
    family = "0.5.23"

    def setup(self, port: int, draft_dir: str | None) -> None:
        from sglang.srt import runtime_context as rc
        from sglang.srt.distributed import parallel_state as ps
        from sglang.srt.server_args import ServerArgs
        import sglang.srt.layers.rotary_embedding.rope_variant as rope_variant

        rope_variant.get_device = lambda device_id=None: "cpu"
        spec = {}
        if draft_dir is not None:
            spec = dict(speculative_algorithm="EAGLE3", speculative_draft_model_path=draft_dir)
        self.server_args = ServerArgs(model_path="dummy", tp_size=1, device=None,
                                      attention_backend="torch_native", **spec)
        rc.reset_context()
        rc.publish(self.server_args, role="test", ranks=rc.SpawnRanks(world_rank=0))
        ps.init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                        distributed_init_method=f"tcp://127.0.0.1:{port}")
        ps.initialize_model_parallel(backend="gloo")

    # -- config reading -------------------------------------------------------------

    def model_config(self, model_dir: str, is_draft: bool = False):
        from sglang.srt.configs.model_config import ModelConfig

        return ModelConfig.from_server_args(self.server_args, model_path=model_dir,
                                            is_draft_model=is_draft)

    def resolve_aux_ids(self, target_config) -> tuple[bool, Any]:
        """The draft's aux ids exactly as the engine resolves them at start-up."""
        from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import \
            resolve_spec_aux_hidden_state_config
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        resolved = resolve_spec_aux_hidden_state_config(
            server_args=self.server_args, model_config=target_config,
            spec_algorithm=SpeculativeAlgorithm.from_string("EAGLE3"), is_draft_worker=False)
        return resolved.eagle_use_aux_hidden_state, resolved.eagle_aux_hidden_state_layer_ids

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
        from sglang.srt.model_executor.model_runner_components.attention_backend_setup import \
            configure_aux_hidden_state_capture

        configure_aux_hidden_state_capture(
            model=model, eagle_use_aux_hidden_state=use_aux, eagle_aux_hidden_state_layer_ids=ids,
            dflash_use_aux_hidden_state=False, dflash_target_layer_ids=None, is_dspark=False)

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

    def _batch(self, input_ids: torch.Tensor):
        from sglang.srt.layers.attention.base_attn_backend import AttentionBackend
        from sglang.srt.model_executor.forward_batch_info import (CaptureHiddenMode, ForwardBatch,
                                                                  ForwardMode)
        from .sdpa_backend import make_backend_class

        t = input_ids.shape[0]
        lens = torch.tensor([t], dtype=torch.int32)
        batch = ForwardBatch(
            forward_mode=ForwardMode.EXTEND, batch_size=1, input_ids=input_ids,
            req_pool_indices=torch.zeros(1, dtype=torch.int32), seq_lens=lens,
            seq_lens_cpu=lens.clone(), out_cache_loc=torch.arange(t), seq_lens_sum=t,
            positions=torch.arange(t))
        batch.extend_prefix_lens = torch.zeros(1, dtype=torch.int32)
        batch.extend_prefix_lens_cpu = [0]
        batch.extend_seq_lens = lens.clone()
        batch.extend_seq_lens_cpu = [t]
        batch.extend_num_tokens = t
        batch.capture_hidden_mode = CaptureHiddenMode.FULL
        batch.attn_backend = make_backend_class(AttentionBackend)()
        return batch

    @torch.no_grad()
    def forward(self, model, input_ids: torch.Tensor, spec_hidden: torch.Tensor | None = None):
        """One EXTEND forward with full hidden capture; returns the LogitsProcessorOutput."""
        from sglang.srt.model_executor.forward_context import ForwardContext, forward_context

        batch = self._batch(input_ids)
        if spec_hidden is not None:
            batch.spec_info = _SpecInfo(spec_hidden)
        with forward_context(ForwardContext(attn_backend=batch.attn_backend), forward_batch=batch):
            return model.forward(input_ids, batch.positions, batch)

    # -- the draft ------------------------------------------------------------------

    def build_draft(self, draft_dir: str):
        """The draft as the engine builds it: its config reader, its model class."""
        from sglang.srt.model_loader.utils import get_model_architecture

        config = self.model_config(draft_dir, is_draft=True)
        cls, _ = get_model_architecture(config)
        return cls(config=config.hf_config, quant_config=None).eval()


class _SpecInfo:
    """What the draft reads from `forward_batch.spec_info` in a prefill: the aux states."""

    def __init__(self, hidden_states: torch.Tensor):
        self.hidden_states = hidden_states
