"""vLLM 0.8.5: the family adapter (the first release with EAGLE-3; the proposer builds its draft itself).

What differs from the 0.9 family (v0_9.py), found by running 0.8.5's code (0.8.5.post1's
`EagleProposer.load_model` and `ModelConfig` are the same):
- vLLM's Triton placeholder lacks `Config`, which torch 2.13's inductor imports when a
  `@torch.compile` decorator is applied: torch's compiler is imported first (every family's
  platform does it, v0_33.compiler_first, so that code-path placement is not decided by it);
- `ModelConfig.__init__` requires `task`, `tokenizer`, `tokenizer_mode`, `trust_remote_code`
  and `seed` (no defaults until 0.9's dataclass): parity passes what `LLM(model=...)` would
  (`task="generate"`, the model directory as tokenizer, `"auto"`, False, 0); `VllmConfig` leaves
  the cache, scheduler, device and load configs None unless given, and the CPU platform's check
  and the loader read them: parity gives them (the device "cpu", the others at their defaults),
  as `LLM` gives its engine arguments';
- `EagleProposer.load_model` does not ask the registry for the draft class: it builds
  `Eagle3LlamaForCausalLM(model_config=draft_model_config, start_layer_id=<target layers>)`
  in its statement `if self.vllm_config.speculative_config.method == 'eagle':` (else eagle3),
  then loads the checkpoint with the draft's own `load_weights` (no
  `process_weights_after_loading`). parity runs that statement of the installed method;
- the target's embedding is shared only when the draft's checkpoint loaded none:
  `if 'model.embed_tokens.weight' not in loaded_weights:` (a draft with its own embedding keeps
  it, whatever its shape); an EAGLE-3 draft never gets the target's LM head. parity runs that
  statement with the names the draft's `load_weights` returned;
- SpeculativeConfig takes EAGLE-3 only for a Llama target ("Eagle3 is only supported for Llama
  models"), as in 0.9.x;
- the CPU platform's attention backend is V0's `TorchSDPABackend`, whose constructor refuses a
  head size its PagedAttention kernels lack (32-256): the tiny target's 16 is added to the list it
  reads (the 0.9 family's replace_kernels, as for 0.9.0.x); its kernels are never called;
- `SiluAndMul.__init__` fetches `torch.ops._C.silu_and_mul` on the CPU too (its `forward_native`
  runs): registered, where absent, as an op that raises if called (kernels.absent_custom_ops).
The CPU platform, compilation, the runner's statement (the model's default layers), the capture,
the dump (the model's own capture) and the attention stand-in are the 0.11 family's; the draft's
`compute_logits(hidden, None)` is the 0.9 family's.

Composed of: its own `Config` (the config arguments) and `Draft` (the proposer's build, loading and
sharing statements), the 0.9 family's `Launch`, `Kernels` and `Target`, the 0.11 family's
`Platform`, `Kernels`, `Config`, `Capture` and `Dump`, ahead of the 0.33 adapter (never through
another family's adapter).
Config keys read (docs/built-draft.md): not recorded. 0.8.5 has no speculators-format config class
(no `transformers_utils/configs/speculators`) and its proposer builds the draft class itself; reads
of the EAGLE-3 form would be recordable around that statement, but this family's draft build is not
read (BUILDS_DRAFT False), and parity carries the reads in the built-draft contract, judged only
beside a built draft: a contract holding reads alone would report a built draft compared in every
field. They come with this family's built draft.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from . import v0_9, v0_11, v0_33
from ....run_until import run_statement

RELEASES = SpecifierSet(">=0.8.5,<0.9")
VERIFIED = ("0.8.5",)

CODE_PATHS = {**v0_11.CODE_PATHS,
              "draft": "vllm.v1.spec_decode.eagle.EagleProposer.load_model (its statement building "
                       "Eagle3LlamaForCausalLM, and the one sharing the target's embedding)"}
DUMP_METHOD = "the model's own capture set to the launch ids (0.8.5 has no extract_hidden_states)"
RUNNERS = v0_11.RUNNERS
GPU_DEFAULT_RUNNER = v0_11.GPU_DEFAULT_RUNNER
IMPORTS = (*v0_11.IMPORTS, "vllm.model_executor.models.llama_eagle3")
REQUIRES = (*v0_11.REQUIRES, "vllm.model_executor.models.llama_eagle3.Eagle3LlamaForCausalLM")

# A release whose proposer builds its draft through the model loader (0.9 on) is not this family's.
ABSENT = ("vllm.model_executor.model_loader.utils.initialize_model",)
ABSENT_WHY = "the model loader's draft build, which the 0.9 family runs; this family runs the proposer's own"

BUILD = "self.vllm_config.speculative_config.method == 'eagle'"  # ... else: Eagle3LlamaForCausalLM(...)
SHARE_EMBEDDING = "'model.embed_tokens.weight' not in loaded_weights"


class Config:
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


class Draft:
    """The proposer's own statement building the draft class, its loading and its sharing statement."""

    BUILDS_DRAFT = False  # the built draft is read from the 0.11 family on

    def __init__(self) -> None:
        self.loaded: set[str] = set()  # the names the draft's load_weights returned (the sharing reads them)

    def build_draft(self, vllm_config, prefix: str = "draft"):
        """The draft class as the installed `EagleProposer.load_model` builds it: its own statement,
        run on a holder, in the draft's dtype and with the config current (as the method does)."""
        import torch
        from vllm.config import set_current_vllm_config
        from vllm.model_executor.model_loader.utils import set_default_torch_dtype
        from vllm.v1.spec_decode.eagle import EagleProposer

        holder = v0_33._Proposer(None, vllm_config)
        draft_config = vllm_config.speculative_config.draft_model_config
        with set_default_torch_dtype(draft_config.dtype), set_current_vllm_config(vllm_config):
            run_statement(EagleProposer.load_model, BUILD, holder, draft_model_config=draft_config,
                          target_layer_num=vllm_config.model_config.get_num_layers(vllm_config.parallel_config),
                          target_device=torch.device("cpu"))
        return v0_9.logits_as_proposed(holder.model.eval())

    def load_draft_weights(self, draft, vllm_config, weights: list) -> None:
        """The draft's own `load_weights` (the proposer runs nothing after it); the names it
        loaded are kept for the sharing statement."""
        from vllm.config import set_current_vllm_config

        with set_current_vllm_config(vllm_config):
            self.loaded = set(draft.load_weights(weights))

    def share_with_target(self, draft, target, vllm_config) -> None:
        """The installed method's `if 'model.embed_tokens.weight' not in loaded_weights:` (the
        target's embedding for a draft whose checkpoint has none), on a holder of the draft."""
        from vllm.config import set_current_vllm_config
        from vllm.v1.spec_decode.eagle import EagleProposer

        holder = v0_33._Proposer(draft, vllm_config)
        with set_current_vllm_config(vllm_config):
            run_statement(EagleProposer.load_model, SHARE_EMBEDDING, holder, target_model=target,
                          loaded_weights=self.loaded)


class Adapter(Config, Draft, v0_9.Launch, v0_9.Kernels, v0_9.Target, v0_11.Platform, v0_11.Kernels,
              v0_11.Config, v0_11.Capture, v0_11.Dump, v0_33.Adapter):
    """vLLM 0.8.5's calls: the 0.11 family's, but its config arguments and its proposer's draft."""
