"""How a published Hugging Face config is shaped: where the text model's config sits."""

from __future__ import annotations

from typing import Any


def is_wrapper(config: dict[str, Any]) -> bool:
    """A published multimodal wrapper (`*ForConditionalGeneration` of Kimi-K2.5, Llama-4, ...):
    the text model's config is nested under `text_config` and the top level has no layer count."""
    return isinstance(config.get("text_config"), dict) and "num_hidden_layers" not in config


def text_part(config: dict[str, Any]) -> dict[str, Any]:
    """The config of the model whose hidden states the draft reads: a wrapper's nested
    `text_config`, else the config itself. The file is never rewritten: the engine reads
    the wrapper as published, and this only says where N, H and the vocabulary are."""
    return config["text_config"] if is_wrapper(config) else config


# The draft classes and speculators model types of a DFlash-family draft (DFlash, DFlash2,
# DSpark): the engines' registries map these architectures to their DFlash draft classes.
DFLASH_ARCHITECTURES = frozenset({"DFlashDraftModel", "DFlash2DraftModel", "DSparkDraftModel", "Qwen3DSparkModel"})
DFLASH_MODEL_TYPES = frozenset({"dflash", "dflash2", "dspark"})


def draft_kind(config: dict[str, Any]) -> str:
    """Which kind of draft a draft's config.json describes: 'dflash' (a DFlash-family block
    drafter, by its architecture or speculators model type), else 'eagle3'. It chooses the
    algorithm parity serves the draft under when the serve arguments name none."""
    archs = config.get("architectures") if isinstance(config.get("architectures"), list) else []
    if DFLASH_ARCHITECTURES.intersection(archs) or config.get("speculators_model_type") in DFLASH_MODEL_TYPES:
        return "dflash"
    return "eagle3"


__all__ = ["DFLASH_ARCHITECTURES", "DFLASH_MODEL_TYPES", "draft_kind", "is_wrapper", "text_part"]
