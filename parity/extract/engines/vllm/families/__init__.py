"""vLLM release families: one adapter module per family, each declaring the releases it serves.

A family module defines `RELEASES` (a packaging SpecifierSet), `VERIFIED` (the releases the
test suite runs), `CODE_PATHS` (the vLLM functions the extraction runs, recorded in every
contract), the names its code paths need (`IMPORTS`, `REQUIRES`, `ABSENT`) and `Adapter`, exactly
one variant of each concern (parity.extract.engines.vllm.concerns: the platform set-up, kernel
stand-ins, config classes, runners, building and loading the model, each model runner's id
resolution, the dump and the draft). It provides the adapter protocol
(parity.extract.engines.vllm.adapter). No family imports another (.importlinter, "vllm families
are leaves"; tests/test_adapter_protocol.py).
A release outside every family's range runs with the
newest family whose code paths (its `IMPORTS`, every vLLM module its calls import, and its
`REQUIRES`, the names its kernel stand-ins replace) are all in the installed source and
none of its `ABSENT` names is (code whose presence the family would silently ignore, such as
a model runner it does not run; `ABSENT_WHY` says what, when not that), and every report says so (parity.extract.families.place);
when none fits it is refused, naming what each family looked for.

A family module imports neither vLLM nor torch: it is imported (and placed) before vLLM picks its
platform on import, so vLLM's modules, torch and parity's modules that import torch (kernels,
moe_cpu, parity.extract.built) are imported inside the calls that need them, each of parity's
marked so; everything else is imported at the module top.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ....families import Placement
from ....families import family_for as _family_for
from ....families import missing_modules as _missing_modules
from ....families import place as _place
from ....run_until import require, require_absent
from ..launch import parser_modules


def _fits(module: ModuleType) -> None:
    module.Adapter().platform()  # before anything imports vLLM: it picks its platform on import
    require_absent(getattr(module, "ABSENT_WHY", "a model runner this family does not run"), *getattr(module, "ABSENT", ()))
    require(*module.IMPORTS, *module.REQUIRES)


def place(version: str) -> Placement:
    """The family vllm `version` runs with, and the note reports print when it is not verified."""
    return _place("vllm", version, __name__, _fits)


def family_for(version: str) -> ModuleType:
    """The family module whose range holds vllm `version`; UnsupportedRelease otherwise."""
    return _family_for("vllm", version, __name__)


def _launch_imports(module: ModuleType) -> None:
    """Import the modules the family's launch contract runs (`Adapter.LAUNCH`: the parser `vllm
    serve` builds, which on 0.11.1-0.14.1 imports lm-format-enforcer's `lmformatenforcer`)."""
    if module.Adapter.LAUNCH is None:  # no resolver before 0.11
        return
    module.Adapter().platform()
    for name in parser_modules(module.Adapter.LAUNCH):
        importlib.import_module(name)


def missing_modules() -> set[str]:
    """Top-level modules some family's code paths (its capture's, its launch contract's) import
    but this environment lacks."""
    return _missing_modules(__name__, _fits) | _missing_modules(__name__, _launch_imports)
