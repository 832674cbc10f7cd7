"""NVIDIA NeMo Automodel release families: one module per family, each declaring the releases it covers.

A family module defines `RELEASES` (a `packaging` SpecifierSet) and `VERIFIED`; `IMPORTS` and
`CODE_PATHS`; and picks, from parity.extract.trainers.nemo_automodel.variants (where each is
described), `target(model, ids)` (its target wrapper, hooks set for the run's ids, None: its
default), `resolved_ids`, `default_ids(model)`, `draft_config`, `draft(target_model, input_ids)`
(the draft its recipe builds), `fc`, `layers`, `embedding`, `step` (one training step's forward),
`offline_step`, `read_cache_manifest` and `cache_sample` (its offline cache's path). No family
imports another. Adding a family is adding one module here (parity.extract.families finds
it); a release outside every family's range is refused by the probe, naming the ranges looked in.
"""

from __future__ import annotations

from types import ModuleType

from ....families import family_for as _family_for


def family_for(version: str) -> ModuleType:
    """The family module whose range holds nemo-automodel `version`; UnsupportedRelease when none does."""
    return _family_for("nemo-automodel", version, __name__)
