"""NVIDIA ModelOpt release families: one module per family, each declaring the releases it covers.

A family module defines
- `RELEASES`: a `packaging` SpecifierSet, the version range of the family; `VERIFIED`: the
  releases in that range the test suite runs the probe against;
- `IMPORTS` (what its calls import, for parity.forkserver) and `CODE_PATHS` (the ModelOpt code
  the probe runs, recorded in every contract);
- one variant of each concern (parity.extract.trainers.modelopt.variants, where each is described):
  `convert` (its conversion), `export` (its exporter of the served draft folder), `mode` (the module
  mode the probe's forward runs in) and `rotary` (where the draft's rotary embedding lives);
- `resolved_ids(model)` (its default where the run gave none), `fc(model)`, `lm_head(model)`,
  `draft(model)`: where the converted model keeps what the probe reads.

No family imports another.

Adding a family is adding one module here (parity.extract.families finds it); a release outside
every family's range is refused by the probe, naming the ranges looked in.
"""

from __future__ import annotations

from types import ModuleType

from ....families import family_for as _family_for


def family_for(version: str) -> ModuleType:
    """The family module whose range holds nvidia-modelopt `version`; UnsupportedRelease when none does."""
    return _family_for("nvidia-modelopt", version, __name__)
