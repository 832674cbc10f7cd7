"""The NeMo Automodel 0.5 family: 0.5.x, its first release with EAGLE-3. Its steps are the shared
ones (parity.extract.trainers.nemo_automodel.variants); its offline cache stores the full
draft-vocabulary probabilities (`cache_sample_full`).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .. import variants

RELEASES = SpecifierSet(">=0.5,<0.6")
VERIFIED = ("0.5.0",)

IMPORTS, CODE_PATHS = variants.IMPORTS, variants.CODE_PATHS

target, resolved_ids, default_ids = variants.target, variants.resolved_ids, variants.default_ids
draft_config, draft, fc, layers, embedding = (variants.draft_config, variants.draft, variants.fc, variants.layers,
                                              variants.embedding)
step, offline_step, read_cache_manifest = variants.step, variants.offline_step, variants.read_cache_manifest
cache_sample = variants.cache_sample_full
