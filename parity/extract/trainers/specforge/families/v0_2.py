"""The SpecForge 0.2 family: where 0.2.0 keeps each step of its offline EAGLE-3 data path.

SpecForge 0.2 trains from states its pinned SGLang release (0.5.14) captures: no transformers
backend any more (`model.target_backend` is `Literal["sglang"]`). Each step below calls the
installed release's own code:
- ids and capture method: the composition root `resolve_offline_capture` on a typed offline
  `Config` (its eagle3 provider runs `model_providers.resolve_eagle_capture_layers`: the run's
  `model.aux_hidden_state_layer_ids`, else the draft's `eagle_config`, else its default), which
  also names the features the capture is stored under (its `OfflineCaptureLayout`);
- capture: `OfflineSGLangCaptureBackend.set_capture_layers` (SGLang's
  `set_eagle3_layers_to_capture`) on the target model, and SpecForge's own logits-processor
  wrapper, which returns the aux concatenation and SGLang's last (post-norm) hidden states;
- the training sample: `algorithms.eagle3.data.normalize_offline_sample` (the stored features
  to the training names `hidden_state`, the fc input, and `target`);
- the loss target: `modeling.target.target_head.TargetHead` (the LM head applied to `target`)
  and its `preprocess` (the shift that aligns `target` with the next position);
- the trained depth: a run's training checkpoint (`training_state.pt`, which its exporter to
  the served format drops) holds its EAGLE-3 resume contract (`algorithms.eagle3.providers.
  resume_contract`), whose `eagle3_ttt_length` is the training model's `length`, the run's
  `training.ttt_length`; `export.checkpoint_io.resolve_training_state` reads it from the state
  file, a `{run_id}-step{N}` directory or the run's output_dir (its `{run_id}-latest`).
"""

from __future__ import annotations

from types import SimpleNamespace

from packaging.specifiers import SpecifierSet

RELEASES = SpecifierSet("==0.2.*")
VERIFIED = ("0.2.0",)

# What the calls below import (parity.forkserver imports them once, before any run).
IMPORTS = (
    "transformers", "specforge.config", "specforge.application.composition",
    "specforge.offline_capture.sglang_backend.capture", "specforge.offline_capture.sglang_backend.utils",
    "specforge.algorithms.eagle3.data", "specforge.modeling.target.target_head",
)

CODE_PATHS = {
    "ids": "specforge.application.composition.resolve_offline_capture -> "
           "specforge.algorithms.model_providers.resolve_eagle_capture_layers",
    "capture": "specforge.offline_capture.sglang_backend.capture.OfflineSGLangCaptureBackend.set_capture_layers "
               "-> <Model>.set_eagle3_layers_to_capture; "
               "specforge.offline_capture.sglang_backend.utils.wrap_offline_eagle3_logits_processors",
    "normalizer": "specforge.algorithms.eagle3.data.normalize_offline_sample",
    "target_head": "specforge.modeling.target.target_head.TargetHead (forward, preprocess)",
    "draft": "specforge.training.model_loading.resolve_draft_config -> "
             "specforge.modeling.auto.AutoDraftModel.from_config (as algorithms.model_providers.build_eagle3_draft)",
}


def resolve_ids(run_ids: list[int] | None, draft_config_path: str, target_dir: str):
    """SpecForge's own resolution: (capture method, ids, the feature names the capture is
    stored under) for an offline run with this target, draft config and run override."""
    from transformers import AutoConfig

    from specforge.application.composition import resolve_offline_capture
    from specforge.config import Config

    cfg = Config(model={"target_model_path": target_dir, "draft_model_config": draft_config_path,
                        "aux_hidden_state_layer_ids": run_ids},
                 data={"hidden_states_path": target_dir})
    resolved = resolve_offline_capture(cfg, target_config=AutoConfig.from_pretrained(target_dir))
    layout = resolved.layout
    return resolved.capture_method, list(resolved.capture_layers), {
        "aux": layout.aux_feature, "last": layout.last_hidden_feature}


def ttt_length(draft_config_path: str, target_dir: str) -> dict:
    """The depth SpecForge trains the draft to (parity.contract.TrainedDepth): its typed
    `Config`'s `training.ttt_length` for a run on this draft, the run's own default (neither the
    draft's config.json nor SpecForge's export writes it; the run's training state records it
    as `eagle3_ttt_length`, read with --trained: `recorded_ttt_length`)."""
    from specforge.config import Config

    cfg = Config(model={"target_model_path": target_dir, "draft_model_config": draft_config_path},
                 data={"hidden_states_path": target_dir})
    return {"steps": int(cfg.training.ttt_length), "recorded": False,
            "source": "training.ttt_length of SpecForge's Config, its default for a run (the draft's config.json "
                      "records no depth; give --trained, the run's output, for the depth it recorded)"}


TTT_KEY = "eagle3_ttt_length"  # resume_contract's key for the training model's length
READER = "specforge.export.checkpoint_io.resolve_training_state"


def recorded_ttt_length(path: str) -> tuple[object, str]:
    """(the ttt length SpecForge's training checkpoint at `path` records, None when it records
    none; which checkpoint it is, in words), read by the release's own checkpoint reader. A
    LookupError when this release has no such reader; what the reader raises for a path that
    holds no checkpoint (FileNotFoundError, or ValueError for several runs) propagates."""
    try:
        from specforge.export.checkpoint_io import resolve_training_state
    except ImportError as exc:
        raise LookupError(f"it has no {READER} ({exc})") from None
    state = resolve_training_state(path)
    if not isinstance(state, dict):
        return None, f"a {type(state).__name__}, not a training state"
    return state.get(TTT_KEY), f"run {state.get('run_id')!r}, step {state.get('global_step')}"


def set_capture(model, method: str, ids: list[int]) -> None:
    """SpecForge's capture backend sets the layers on the (already built) target model."""
    from specforge.offline_capture.sglang_backend.capture import OfflineSGLangCaptureBackend

    OfflineSGLangCaptureBackend(SimpleNamespace(model=model)).set_capture_layers(ids, capture_method=method)


def wrap_logits(model) -> None:
    from specforge.offline_capture.sglang_backend.utils import wrap_offline_eagle3_logits_processors

    wrap_offline_eagle3_logits_processors(model)


def captured(output) -> tuple:
    """(aux concatenation, last hidden states) from the wrapped processor's output, as
    SpecForge's `capture_eagle3` reads them."""
    return getattr(output, "aux_hidden_states", None), getattr(output, "last_hidden_states", None)


def normalize(raw: dict, max_len: int) -> dict:
    from specforge.algorithms.eagle3.data import normalize_offline_sample

    return normalize_offline_sample(raw, max_len=max_len)


def target_head(target_dir: str, lm_head_weight):
    """SpecForge's TargetHead for this target, holding the target's LM-head weight."""
    import torch

    from specforge.modeling.target.target_head import TargetHead

    head = TargetHead(target_dir)
    with torch.no_grad():
        head.fc.weight.copy_(lm_head_weight)
    return head.eval()


def draft_config(draft_config_path: str, target_dir: str):
    """(the run's typed Config, the draft config as training resolves it): the composition
    root's `resolve_run` for the default strategy (eagle3), then `resolve_draft_config` with
    its model provider's draft-config provider, as `training.assembly._load_draft` does
    (`load_draft_config_source`: tie_word_embeddings forced False, draft_vocab_size defaulting
    to vocab_size, the registered architecture's config class)."""
    from specforge.application.composition import resolve_run
    from specforge.config import Config
    from specforge.training.model_loading import resolve_draft_config

    cfg = Config(model={"target_model_path": target_dir, "draft_model_config": draft_config_path},
                 data={"hidden_states_path": target_dir})
    provider = resolve_run(cfg).algorithm.providers.model
    return cfg, resolve_draft_config(cfg, provider=provider.draft_config)


def build_draft(cfg, config, attention_backend: str | None = None):
    """The draft module `build_eagle3_draft` constructs: `AutoDraftModel.from_config` with the
    run's attention backend (the class from the draft registry by `architectures`), or the one
    named. Its `torch_dtype` cast is left out, so the rotary tables read exactly (the dtype is
    reported from the run's config); the warm start, vocabulary mapping and target embedding it
    loads next are weights, not the module's math."""
    from specforge.modeling.auto import AutoDraftModel

    backend = attention_backend or cfg.training.attention_backend
    return AutoDraftModel.from_config(config, attention_backend=backend).eval()


# The backend the draft's own forward runs under on a CPU (`draft_forward`): the run's default,
# flex attention, takes the training loop's KV cache and compiles its kernels past 128 positions;
# its `sdpa` backend computes the same attention with torch's own kernel.
FORWARD_BACKEND = "sdpa"


def draft_forward(model, hidden_states, input_ids) -> tuple:
    """What the draft it builds (under FORWARD_BACKEND) computes on target states and tokens, by
    its own forward: `model(hidden_states=..., inputs_embeds=model.embed_input_ids(ids))`, the
    draft's hidden states (one step, what its EAGLE-3 training step's backbone computes), then
    `compute_logits` on them. (hidden states, logits)."""
    hidden = model(hidden_states=hidden_states, inputs_embeds=model.embed_input_ids(input_ids))
    return hidden, model.compute_logits(hidden)


def train_dtype(cfg) -> str:
    """The dtype training casts the draft to (`model.torch_dtype`, whatever the draft config says)."""
    return str(cfg.model.torch_dtype)
