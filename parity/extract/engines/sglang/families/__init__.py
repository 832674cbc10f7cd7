"""SGLang release families: one adapter module per family, each declaring the releases it serves.

A family module defines
- `RELEASES`: a `packaging` SpecifierSet, the version range of the family;
- `VERIFIED`: the releases in that range whose capture and forward were verified against
  transformers (the test suite runs them);
- `CODE_PATHS`: the engine functions the extraction runs, recorded in every contract;
- `Adapter`: the class whose methods hold every release-specific line (set-up, config
  reading, capture, batches, forwards, KV pools, embedding binding).

Adding a family is adding one module here and its name to `FAMILIES`. A release outside
every family's range is refused loudly, never served by a neighbouring family.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from packaging.version import InvalidVersion, Version

FAMILIES = ("v0_5_23", "v0_5_14", "v0_5_12")  # newest first


def family(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{name}")


def family_for(version: str) -> ModuleType:
    """The family module whose range holds `version`; LookupError when none does."""
    try:
        release = Version(version)
    except InvalidVersion:
        release = None
    for name in FAMILIES:
        module = family(name)
        if release is not None and module.RELEASES.contains(release, prereleases=True):
            return module
    ranges = ", ".join(f"{family(n).RELEASES} ({', '.join(family(n).VERIFIED)} verified)" for n in FAMILIES)
    raise LookupError(f"no parity adapter for sglang {version} (adapters exist for {ranges}); "
                      f"looked for release {version!r} in parity.extract.engines.sglang.families")
