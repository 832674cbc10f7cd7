"""The NeMo Automodel 0.6 family: 0.6.0 to 0.7.x. Its steps are the shared ones
(parity.extract.trainers.nemo_automodel.variants); its offline cache may store the target
probabilities' top-k (`cache_sample_topk`, the manifest's `target_probs_topk`).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .. import variants

RELEASES = SpecifierSet(">=0.6,<0.8")
VERIFIED = ("0.6.0", "0.7.0")

IMPORTS = (
    "transformers", "nemo_automodel.components.speculative.eagle.target",
    "nemo_automodel.components.speculative.eagle.registry", "nemo_automodel.components.speculative.eagle.core",
    "nemo_automodel.components.datasets.llm.eagle3", "nemo_automodel.components.datasets.llm.eagle3_cache",
    "nemo_automodel.components.speculative.precompute_eagle3",
)

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

target, resolved_ids, default_ids = variants.target, variants.resolved_ids, variants.default_ids
draft_config, draft, fc, layers, embedding = (variants.draft_config, variants.draft, variants.fc, variants.layers,
                                              variants.embedding)
step, offline_step, read_cache_manifest = variants.step, variants.offline_step, variants.read_cache_manifest
cache_sample = variants.cache_sample_topk
