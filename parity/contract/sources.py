"""Where each contract field comes from: the run on the tiny model, or the real config files.

parity runs the engines and trainers on a tiny model of the target's architecture and depth
(parity.extract.shrink: widths, heads, experts and vocabularies shrunk; the trainers' data
paths on a marker sample). What that run finds is behaviour: which state fills each slot, which
graph flag the draft class applies, how it reads d2t. Those fields are `RUN` fields. A size is
never behaviour: measured on the tiny model it is a width parity chose (64, 256, 32...), not the
draft's. The sizes, and the target's identity, are `REAL` fields: read from the config files as
given, by the side's own reader where it has one (vLLM's `get_config` on the draft directory),
never from the tiny model.

This module is the one place that decides it: every field of every contract is in exactly one
of the two lists (tests/test_field_sources.py walks the models), and every extractor builds
the vocabulary through `vocab`, which takes the sizes from the real reading only and drops any
size a run reports (issue 32: vLLM's draft class, built from the shrunk copy, reported
draft_vocab_size 32 and target_vocab_size 256, and every correct draft read as drift).
"""

from __future__ import annotations

import typing
from typing import Any, Mapping

from pydantic import BaseModel

from .models import (BuiltDraft, Contract, Finding, GraphFlags, Provenance, ServingContract, TargetModel,
                     TrainingContract, VocabMapping)

# Read from the real config files (the target's config.json, the draft's config.json).
REAL: frozenset[str] = frozenset({
    "target_model.architecture", "target_model.model_type", "target_model.text_architecture",
    "target_model.num_hidden_layers", "target_model.hidden_size", "target_model.vocab_size",
    "target_model.quantization",
    "vocab.draft_vocab_size", "vocab.target_vocab_size",
    # a DFlash draft's mask token, as the side's own reader holds it off the real draft config
    "draft.mask_token_id",
    # the serve command as the engine's own parser and resolution read it, on the real target
    # config.json and the user's arguments (docs/launch.md): never on the tiny model
    "launch",
    # the draft's trained depth: the trainer's own config classes on the real config.json
    "trained_depth",
    # the built draft's sizes: the side's own config reader on the real config.json (the d2t
    # table's largest id on the real tensor); the positions, rope settings and dtype as it reads them
    "draft.vocab_size", "draft.draft_vocab_size", "draft.hidden_size", "draft.target_hidden_size",
    "draft.num_hidden_layers", "draft.num_attention_heads", "draft.num_key_value_heads", "draft.head_dim",
    "draft.intermediate_size", "draft.max_position_embeddings", "draft.rope_theta", "draft.rope_scaling",
    "draft.dtype", "draft.max_token_id", "draft.config_from",
    # the sizes its converter assumed for keys the real draft config does not set
    "draft.converter_assumed",
})

# Found by running the installed code (on the tiny model, or the trainer's data path on markers),
# or saying which code ran.
RUN: frozenset[str] = frozenset({
    "side", "fc_input", "embedding", "provenance", "findings",
    "graph.norm_before_fc", "graph.fc_norm", "graph.norm_output", "graph.norm_before_residual",
    "vocab.d2t", "vocab.t2d", "vocab.mapping",
    # training
    "dump_layout", "dump_layout_source", "fc_slots", "target", "target_slot", "target_normed_by_trainer",
    "alignment",
    # serving
    "engine", "requested_ids", "ids_source", "capture_ids", "checkpoint_renames", "checkpoint_zero_biases",
    "runners", "draft_kind",
    # the built draft's modules (built at tiny widths by the side's own classes): what they compute
    "draft.built_by", "draft.hidden_act", "draft.rms_norm_eps", "draft.rope_frequencies", "draft.rope_scale",
    "draft.lm_head_tied",
    # the decoder layers it built and how each after the first is fed (its own forward, by value)
    "draft.layers_built", "draft.later_layer_input_norms",
    # a DFlash draft's: the kind built, the block size its model holds and the states its fc projects
    # (a count: off the tiny build, whose config keeps the block size and the ids)
    "draft.draft_kind", "draft.block_size", "draft.num_context_features",
    # which config keys the side's own code read while building it (the shrunk copy holds the real
    # file's keys; the defaults by its config class built again without each key)
    "draft.config_keys_read", "draft.config_keys_unread", "draft.config_keys_default",
    # which of them the draft it builds computes the same without (its own forward, tiny build)
    "draft.config_keys_training_only",
})

# The REAL fields that are sizes: the ones a shrunk width could pose as (the guard's list).
SIZES: tuple[str, ...] = ("target_model.hidden_size", "target_model.vocab_size",
                          "vocab.draft_vocab_size", "vocab.target_vocab_size")

# Models whose fields are listed one by one (the others are a single field: provenance, findings).
_EXPANDED: tuple[type[BaseModel], ...] = (TargetModel, GraphFlags, VocabMapping, BuiltDraft)
_WHOLE: tuple[type[BaseModel], ...] = (Provenance, Finding)

VOCAB_SIZES = tuple(p.split(".", 1)[1] for p in SIZES if p.startswith("vocab."))


def field_paths(model: type[BaseModel] = Contract) -> set[str]:
    """Every field of `model` as a dotted path, nested `_EXPANDED` models field by field."""
    paths: set[str] = set()
    for name, info in model.model_fields.items():
        inner = next((a for a in typing.get_args(info.annotation) if a is not type(None)), info.annotation)
        if isinstance(inner, type) and issubclass(inner, _EXPANDED):
            paths |= {f"{name}.{sub}" for sub in inner.model_fields}
        else:
            paths.add(name)
    return paths


def contract_paths() -> set[str]:
    """The fields of both contract kinds."""
    return field_paths(TrainingContract) | field_paths(ServingContract)


def vocab(run: Mapping[str, Any] | VocabMapping, real: Mapping[str, Any]) -> VocabMapping:
    """The contract's vocabulary: d2t, t2d and mapping as the run found them (`run`), the sizes
    as `real` read them from the config files. A size in `run` is the tiny model's and is
    dropped; `real` may hold nothing else than sizes (a None size is unknown)."""
    if isinstance(run, VocabMapping):
        run = run.model_dump()
    wrong = set(real) - set(VOCAB_SIZES)
    if wrong:
        raise ValueError(f"not a size read from the real configs: {sorted(wrong)}")
    kept = {k: v for k, v in run.items() if f"vocab.{k}" in RUN and v is not None}
    return VocabMapping(**kept, **{k: v for k, v in real.items() if v is not None})


def value_at(contract: Contract, path: str) -> Any:
    """The value of a dotted field path of `contract` (e.g. 'vocab.draft_vocab_size')."""
    value: Any = contract
    for part in path.split("."):
        value = getattr(value, part)
    return value


__all__ = ["REAL", "RUN", "SIZES", "VOCAB_SIZES", "contract_paths", "field_paths", "value_at", "vocab"]
