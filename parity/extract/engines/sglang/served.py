"""The draft config in SGLang's served format, written from a speculators draft config: the
EAGLE-3 format (parity.extract.eagle3_config), whose keys are those SGLang's draft class reads
(docs/draft-graph.md, 'What SGLang 0.5.23's draft class reads'). Tensor names are not the
config's concern: SGLang's `load_weights` maps speculators' names itself from 0.5.11; for older
releases the serving extraction finds the renames it needs (parity/checkpoint.py).
"""

from __future__ import annotations

from ...eagle3_config import eagle3_config


def served_config(spec: dict, ids: list[int], release: str | None = None) -> dict:
    """SGLang's config.json for the speculators draft config `spec`, serving aux ids `ids` (the
    same format under every release)."""
    return eagle3_config(spec, ids)


__all__ = ["served_config"]
