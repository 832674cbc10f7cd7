"""speculators release families: one module per family, each declaring the releases it covers.

A family module defines
- `RELEASES`: a `packaging` SpecifierSet, the version range of the family;
- `VERIFIED`: the releases in that range the test suite runs the probe against;
- where the family keeps what the training probe runs: `ARROW_PATH`, `SHIFT_BATCH`,
  `DRAFT_MODEL`, `DRAFT_CONFIG`, `HS_CONNECTORS` (qualified names);
- `train_transform(run)`, `data_paths(run)`, `arrow_dataset(...)`, `default_path(run, ran)`:
  the steps that differ by family (`run` is the probe's `ProbeRun`).

Adding a family is adding one module here (parity.extract.families finds it); a release
outside every family's range is refused by the probe, naming the ranges looked in.
"""

from __future__ import annotations

from types import ModuleType

from ....families import family_for as _family_for


def family_for(version: str) -> ModuleType:
    """The family module whose range holds speculators `version`; UnsupportedRelease when none does."""
    return _family_for("speculators", version, __name__)
