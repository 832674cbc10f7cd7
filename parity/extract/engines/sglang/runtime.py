"""SGLang's model runner on a CPU, as a release family sets it up: the one module of this engine
that another side may import (SpecForge's capture runs SGLang's runner; .importlinter holds
every trainer to this module of an engine). The probe (probe.py) extracts through it too."""

from __future__ import annotations

from ... import standins
from ...child import free_port
from ....workspace import engine_cache
from .families import place


def setup_on_a_free_port(adapter, draft_dir, tries: int = 5, **setup) -> None:
    """`adapter.setup` on a free local port. The port is free when picked but another probe
    (xdist workers, the matrix) may bind it before gloo does: that is retried on a new port."""
    from torch.distributed import DistNetworkError

    for attempt in range(tries):
        try:
            return adapter.setup(free_port(), draft_dir, **setup)
        except DistNetworkError:
            if attempt == tries - 1:
                raise


def adapter_for(version: str):
    """(adapter, code paths, placement) of the release family `version` runs with
    (families/: the family whose range holds it; for a release outside every range, the
    newest family whose code paths are all in the installed source, with the placement's
    `note` saying so). A release no family can run is a loud LookupError naming what was
    looked for. Installs parity's CPU stand-ins (checking code paths imports engine modules).
    First, SGLang's cache root (`SGLANG_CACHE_DIR`, by default ~/.cache/sglang; `import sglang`
    points inductor's and Triton's caches under it) goes into this process's private temp dir."""
    engine_cache("SGLANG_CACHE_DIR", "sglang-cache")
    standins.install()
    placement = place(version)
    return placement.module.Adapter(), placement.module.CODE_PATHS, placement
