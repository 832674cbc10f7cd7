"""SGLang release families: one adapter module per family, each declaring the releases it serves.

A family module defines
- `RELEASES`: a `packaging` SpecifierSet, the version range of the family;
- `VERIFIED`: the releases in that range whose capture and forward were verified against
  transformers (the test suite runs them);
- `CODE_PATHS`: the engine functions the extraction runs, recorded in every contract;
- `Adapter`: the class whose methods hold every release-specific line (set-up, config
  reading, capture, batches, forwards, KV pools, embedding binding).

Adding a family is adding one module here (parity.extract.families finds it and picks the
one whose range holds the installed release). A release outside every family's range is
refused loudly, never served by a neighbouring family.
"""

from __future__ import annotations

from types import ModuleType

from ....families import family_for as _family_for


def family_for(version: str) -> ModuleType:
    """The family module whose range holds sglang `version`; UnsupportedRelease (a
    LookupError naming every range looked in) when none does."""
    return _family_for("sglang", version, __name__)
