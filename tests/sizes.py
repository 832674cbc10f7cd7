"""The guard against issue 32's class: a size field of a contract that is a width parity shrank.

parity runs the engines on a tiny model (parity.extract.shrink) and the trainers' data paths on
a marker sample; a contract's sizes (parity.contract.sources.SIZES) must be the real configs'.
`shrunk_widths` is every width such a run could report; `leaked_sizes` names each size field of
a contract that holds one of them while the real configs hold no such number."""

from __future__ import annotations

from typing import Any

from parity.extract.shrink import TINY, shrink_config, shrink_draft_config

# A contract's size fields (parity.contract.sources.SIZES; listed here too, so the guard runs on
# code from before that module existed)
SIZES = ("target_model.hidden_size", "target_model.vocab_size", "vocab.draft_vocab_size", "vocab.target_vocab_size")
SIZE_KEYS = ("hidden_size", "vocab_size", "draft_vocab_size", "target_hidden_size")


def _numbers(config: Any, keys=SIZE_KEYS) -> set[int]:
    """Every int under a size key, at any depth (text_config, transformer_layer_config)."""
    found: set[int] = set()
    if isinstance(config, dict):
        for k, v in config.items():
            if k in keys and isinstance(v, int) and not isinstance(v, bool):
                found.add(v)
            found |= _numbers(v, keys)
    return found


def _ints(config: Any) -> set[int]:
    found: set[int] = set()
    if isinstance(config, dict):
        for v in config.values():
            found |= _ints(v)
    elif isinstance(config, int) and not isinstance(config, bool):
        found.add(config)
    return found


def shrunk_widths(target_config: dict, draft_config: dict | None) -> set[int]:
    """The widths a run on the tiny model could report: TINY's, the shrunk draft's 96 and
    capped vocabulary, and every number the shrunk configs hold that the real ones do not."""
    widths = set(TINY.values()) | {96, 32}
    widths |= _ints(shrink_config(target_config)) - _ints(target_config)
    if draft_config is not None:
        widths |= _ints(shrink_draft_config(draft_config)) - _ints(draft_config)
    return widths


def _value(contract, path: str):
    for part in path.split("."):
        contract = getattr(contract, part)
    return contract


def leaked_sizes(contract, target_config: dict, draft_config: dict | None) -> list[str]:
    """Each size field of `contract` holding a shrunk width the real configs do not hold."""
    real = _numbers(target_config) | (_numbers(draft_config) if draft_config is not None else set())
    widths = shrunk_widths(target_config, draft_config)
    out = []
    for path in SIZES:
        value = _value(contract, path)
        if value is not None and value in widths and value not in real:
            out.append(f"{contract.side} {path} = {value}: a shrunk width (the real configs hold "
                       f"{sorted(real)})")
    return out
