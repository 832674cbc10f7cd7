"""vLLM release families: one adapter module per family, each declaring the releases it serves.

A family module defines `RELEASES` (a packaging SpecifierSet), `VERIFIED` (the releases the
test suite runs), `CODE_PATHS` (the vLLM functions the extraction runs, recorded in every
contract) and `Adapter`, whose methods hold every release-specific line: platform set-up,
config classes, building and loading the model, the kernel stand-ins' import paths, and
each model runner's id resolution. A release outside every family's range is refused.
"""

from __future__ import annotations

from types import ModuleType

from ....families import family_for as _family_for


def family_for(version: str) -> ModuleType:
    """The family module whose range holds vllm `version`; UnsupportedRelease otherwise."""
    return _family_for("vllm", version, __name__)
