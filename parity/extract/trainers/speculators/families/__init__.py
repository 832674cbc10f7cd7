"""speculators release families: one module per family, each declaring the releases it covers.

A family module defines
- `RELEASES`: a `packaging` SpecifierSet, the version range of the family;
- `VERIFIED`: the releases in that range the test suite runs the probe against;
- where the family keeps what the training probe runs: `ARROW_PATH`, `SHIFT_BATCH`,
  `DRAFT_MODEL`, `DRAFT_CONFIG`, `HS_CONNECTORS`, `DFLASH_MODEL`, `DFLASH_CONFIG`,
  `DFLASH_CONVERTER` (qualified names), and optionally `ARROW_ROWS` (see the probe);
- one variant of each concern (parity.extract.trainers.speculators.variants, where each is
  described): `data_paths(run)`, `train_transform(run)`, `collate(run, sample)`,
  `arrow_dataset(...)`, `default_path(run, ran)`, `draft_model(model_cls, config)` and, where the
  release has DFlash, `dflash_preprocess(run)` (`run`: a `variants.Run`, which the probe's
  `ProbeRun` is).

- `REQUIRES`: the qualified names that must all be in a release outside every family's
  range for this family to run it, and optionally `ABSENT`: names whose presence means the
  family would miss a step (e.g. a train-split augmentation it does not apply).

No family imports another, nor the probe that runs it (.importlinter: speculators-families).

Adding a family is adding one module here (parity.extract.families finds it). A release
outside every family's range runs with the newest family whose REQUIRES are all in the
installed source, and the contract says so ("speculators X is newer than any release parity
has verified; extracted with the 0.9-family adapter"); when no family's are, the probe
refuses it, naming what each family looked for.
"""

from __future__ import annotations

from types import ModuleType

from ....families import Placement
from ....families import family_for as _family_for
from ....families import place as _place
from ....run_until import require, require_absent


def family_for(version: str) -> ModuleType:
    """The family module whose range holds speculators `version`; UnsupportedRelease when none does."""
    return _family_for("speculators", version, __name__)


def place(version: str) -> Placement:
    """The family speculators `version` runs with, and the note reports print when it is not
    a verified release (parity.extract.families.place)."""
    def fits(module: ModuleType) -> None:
        require(*module.REQUIRES)
        require_absent("a step this family does not run", *getattr(module, "ABSENT", ()))

    return _place("speculators", version, __name__, fits)
