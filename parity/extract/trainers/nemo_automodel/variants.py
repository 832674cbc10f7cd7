"""What NeMo Automodel's releases run on each step of their EAGLE-3 training path, as functions a
family (families/) picks, one per concern; no family imports another. Every release so far runs
the same target class, draft and trainer module (0.6 added a module-level
`default_eagle3_aux_layer_ids`, which the target class's own default calls; its rule is 0.5's):

- the target: `components.speculative.eagle.target.HFEagle3TargetModel(model, aux_layer_ids)`,
  whose `generate_batch` sets a forward hook on each `layers[id]` (the layer's output), runs the
  target, and concatenates the captured states in the order of `aux_layer_ids` as given; its
  default `default_eagle3_aux_layer_ids(N)` is `[1, N//2-1, N-4]` (three distinct ids, else it
  refuses); the batch's logits, tokens and loss mask are shifted left by one;
- the draft: `components.speculative.eagle.registry.resolve_eagle3_draft_spec(target
  architectures).draft_cls`, on the config its EAGLE-3 recipe assembles in
  `recipes/llm/train_eagle3.py` (`TrainEagle3Recipe.setup`: the target's config with
  `draft_vocab_size`, `target_hidden_size`, `architectures`, an untied head, eager attention and
  `fc_norm`/`norm_output`/`parallel_drafting` off, rebuilt with the target's config class). That
  recipe module does not import here (it needs torchao and its distributed stack), so
  `draft_config` repeats those lines; the draft class, its embedding copy and the vocabulary map
  (`components.datasets.llm.eagle3.build_eagle3_token_mapping`) are its own;
- one step: `components.speculative.eagle.core.Eagle3TrainerModule(draft, ...)` on the batch's
  trainer inputs (its TTT unroll and soft cross-entropy);
- the offline (cached) path, `recipe_args.cached_target_path`: the cache its
  `components.speculative.precompute_eagle3` writes (`_compute_batch_cache` on the same target
  class's batch, in the manifest's dtype; `datasets.llm.eagle3_cache.write_shard`), read back by
  `CachedEagle3Dataset` and handed to the trainer module as the recipe's offline branch does. The
  one difference between releases is the cache's sample function (`cache_sample`):
  - `cache_sample_full` (0.5): `_compute_batch_cache(batch, ids, mask, dtype)`, the full
    draft-vocabulary probabilities;
  - `cache_sample_topk` (0.6 on): `_compute_batch_cache(..., target_probs_topk)`, the manifest's
    top-k (0: in full).
"""

from __future__ import annotations

# What every family imports (parity.forkserver warms them) and the code it runs, by role.
IMPORTS = (
    "transformers", "nemo_automodel.components.speculative.eagle.target",
    "nemo_automodel.components.speculative.eagle.registry", "nemo_automodel.components.speculative.eagle.core",
    "nemo_automodel.components.datasets.llm.eagle3",
)  # the offline path's modules (its precompute imports torchao) are imported only by a run that takes it

CODE_PATHS = {
    "ids": "nemo_automodel.components.speculative.eagle.target.HFEagle3TargetModel(aux_layer_ids), else "
           "its _default_aux_layer_ids",
    "capture": "HFEagle3TargetModel.generate_batch: forward hooks on layers[id], torch.cat in aux_layer_ids order",
    "draft": "nemo_automodel.components.speculative.eagle.registry.resolve_eagle3_draft_spec -> draft_cls "
             "(the config as recipes/llm/train_eagle3.py TrainEagle3Recipe.setup assembles it)",
    "step": "nemo_automodel.components.speculative.eagle.core.Eagle3TrainerModule",
    "offline": "nemo_automodel.components.speculative.precompute_eagle3._compute_batch_cache -> "
               "datasets.llm.eagle3_cache.write_shard / CachedEagle3Dataset -> Eagle3TrainerModule",
}


def target(model, ids: list[int] | None):
    from nemo_automodel.components.speculative.eagle.target import HFEagle3TargetModel

    return HFEagle3TargetModel(model, aux_layer_ids=ids)


def resolved_ids(wrapper) -> list[int]:
    return list(wrapper.aux_layer_ids)


def default_ids(model) -> list[int]:
    """Its default ids for the target `model`: what its target class takes when given none."""
    return resolved_ids(target(model, None))


def draft_config(base):
    """The draft's config as TrainEagle3Recipe.setup assembles it for the target config `base`
    (its full draft vocabulary: no vocabulary shrinking)."""
    config = base.to_dict()
    config.update(draft_vocab_size=base.vocab_size, target_hidden_size=base.hidden_size,
                  architectures=["LlamaEagle3DraftModel"], tie_word_embeddings=False, attn_implementation="eager",
                  fc_norm=False, norm_output=False, parallel_drafting=False)
    return type(base).from_dict(config)


def draft(model, input_ids):
    """The draft its recipe builds for the target `model` (embeddings copied from it, frozen), with
    the vocabulary map of `input_ids`, and the map itself."""
    import torch

    from nemo_automodel.components.datasets.llm.eagle3 import build_eagle3_token_mapping
    from nemo_automodel.components.speculative.eagle.registry import resolve_eagle3_draft_spec

    spec = resolve_eagle3_draft_spec(list(model.config.architectures or []))
    built = spec.draft_cls(draft_config(model.config)).to(dtype=torch.float32)
    built.copy_embeddings_from_target(model.get_input_embeddings())
    mask = torch.ones_like(input_ids)
    selected, selected_mask = build_eagle3_token_mapping([{"input_ids": input_ids, "loss_mask": mask}],
                                                         target_vocab_size=model.config.vocab_size,
                                                         draft_vocab_size=None)
    built.set_vocab_mapping(selected)
    built.freeze_embeddings()
    return built, selected, selected_mask


def fc(built):
    return built.model.fc


def layers(built) -> list:
    return list(built.model.layers)


def embedding(built):
    return built.model.embed_tokens


def step(wrapper, built, selected, selected_mask, input_ids):
    """One training step's forward: the target's batch, then its trainer module on it; the batch."""
    import torch

    from nemo_automodel.components.speculative.eagle.core import Eagle3TrainerModule

    ones = torch.ones_like(input_ids)
    batch = wrapper.generate_batch(input_ids=input_ids, attention_mask=ones, loss_mask=ones)
    trainer = Eagle3TrainerModule(built, selected_token_ids=selected, selected_token_mask=selected_mask, ttt_steps=3)
    trainer(**batch.to_trainer_inputs())
    return batch


def read_cache_manifest(cache_dir: str) -> dict:
    """The offline cache's manifest, as its own reader reads it (a cache of another format version
    is its refusal)."""
    from nemo_automodel.components.datasets.llm.eagle3_cache import read_manifest

    return read_manifest(cache_dir)


def cache_sample_full(batch, selected, selected_mask, manifest: dict) -> dict:
    """0.5: the cache sample its precompute writes for `batch`, in the manifest's dtype."""
    from nemo_automodel.components.datasets.llm.eagle3_cache import DTYPE_MAP
    from nemo_automodel.components.speculative.precompute_eagle3 import _compute_batch_cache

    return _compute_batch_cache(batch, selected, selected_mask, DTYPE_MAP[manifest["dtype"]])


def cache_sample_topk(batch, selected, selected_mask, manifest: dict) -> dict:
    """0.6 on: the same, with the manifest's top-k of the target probabilities (0: in full)."""
    from nemo_automodel.components.datasets.llm.eagle3_cache import DTYPE_MAP
    from nemo_automodel.components.speculative.precompute_eagle3 import _compute_batch_cache

    return _compute_batch_cache(batch, selected, selected_mask, DTYPE_MAP[manifest["dtype"]],
                                int(manifest.get("target_probs_topk") or 0))


def offline_step(wrapper, built, selected, selected_mask, input_ids, manifest: dict, work: str, cache_sample):
    """One step of its offline path on the run's tokens: the sample its precompute caches for the
    target's batch (`cache_sample`), written and read back as its cache is (`write_shard`,
    `CachedEagle3Dataset`), then handed to the trainer module as the recipe's offline branch hands a
    cached batch; the target's batch and the dtype the cache stored its states in."""
    import torch

    from nemo_automodel.components.datasets.llm.eagle3_cache import CachedEagle3Dataset, write_manifest, write_shard
    from nemo_automodel.components.speculative.eagle.core import Eagle3TrainerModule

    ones = torch.ones_like(input_ids)
    with torch.no_grad():
        batch = wrapper.generate_batch(input_ids=input_ids, attention_mask=ones, loss_mask=ones)
    write_manifest(work, {**manifest, "num_samples": 1, "shard_size": 1, "draft_vocab_size": int(selected.numel()),
                          "selected_token_ids": selected.tolist()})
    write_shard(work, 0, cache_sample(batch, selected, selected_mask, manifest))
    item = CachedEagle3Dataset(work)[0]
    inputs = {k: item[k][None] for k in ("input_ids", "attention_mask", "loss_mask", "aux_hidden_states",
                                         "target_probs", "position_mask")}
    # Its recipe builds the draft in its compute dtype: bf16 on a GPU, the dtype a default cache
    # stores; float32 on a CPU, where a bf16 cache meets a float32 fc. Here the cached states are
    # widened to the float32 draft, exactly (every bf16 value is a float32 one).
    cached = inputs["aux_hidden_states"].dtype
    inputs["aux_hidden_states"] = inputs["aux_hidden_states"].to(torch.float32)
    trainer = Eagle3TrainerModule(built, selected_token_ids=selected, selected_token_mask=selected_mask, ttt_steps=3)
    trainer(**inputs)
    return batch, cached
