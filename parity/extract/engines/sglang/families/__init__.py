"""SGLang release families: one adapter module per family, each declaring the releases it serves.

A family module defines
- `RELEASES`: a `packaging` SpecifierSet, the version range of the family;
- `VERIFIED`: the releases in that range whose capture and forward were verified against
  transformers (the test suite runs them);
- `CODE_PATHS`: the engine functions the extraction runs, recorded in every contract;
- `DFLASH_CODE_PATHS` (the families that run DFlash): the same keys for a DFlash draft;
- `Adapter`: exactly one variant of each concern (parity.extract.engines.sglang.concerns: process,
  launch, config, capture, target, batches, context, draft; each variant named by what it does),
  and the family's name (`family`) and whether it runs DFlash (`RUNS_DFLASH`). It provides the
  adapter protocol (parity.extract.engines.sglang.adapter); no family imports another
  (.importlinter, "sglang families are leaves"; tests/test_adapter_protocol.py).

Adding a family is adding one module here (parity.extract.families finds it and picks the
one whose range holds the installed release). A release outside every family's range runs
with the newest family whose `Adapter.requires()` (every engine name its extraction runs: each
concern variant's) and `check_code_paths()` are all satisfied by the installed source, and every report says so
("sglang X is newer than any release parity has verified; extracted with the F-family
adapter"); when no family's code paths are all found it is refused loudly, naming what
each family looked for.

SGLang's own modules are imported inside the calls that run them: in the child, after parity's CPU
stand-ins are installed (importing some of them needs a stand-in); everything else is imported at
the module top.
"""

from __future__ import annotations

from types import ModuleType

from .... import standins
from ....families import Placement
from ....families import family_for as _family_for
from ....families import missing_modules as _missing_modules
from ....families import place as _place


def family_for(version: str) -> ModuleType:
    """The family module whose range holds sglang `version`; UnsupportedRelease (a
    LookupError naming every range looked in) when none does."""
    return _family_for("sglang", version, __name__)


def place(version: str) -> Placement:
    """The family sglang `version` runs with, and the note reports print when it is not a
    verified release (parity.extract.families.place). Imports engine modules to check code
    paths: call it with parity's CPU stand-ins installed."""
    return _place("sglang", version, __name__, lambda module: module.Adapter().check_code_paths())


def missing_modules() -> set[str]:
    """Top-level modules some family's code paths import but this environment lacks (with
    parity's CPU stand-ins installed, as every extraction runs)."""
    standins.install()
    return _missing_modules(__name__, lambda module: module.Adapter().check_code_paths())
