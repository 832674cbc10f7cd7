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


__all__ = ["is_wrapper", "text_part"]
