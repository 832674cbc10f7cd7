"""Reading user input: every problem becomes one line naming the file and what is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class InputError(ValueError):
    """Bad input: missing or malformed files, impossible ids. Exit code 2, one line."""


def read_config(path: Path, what: str) -> dict[str, Any]:
    """A JSON object from `path`, or an InputError naming the file."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{what} {path}: file not found")
    if path.is_dir():
        raise InputError(f"{what} {path}: is a directory, expected a config.json file")
    try:
        data = json.loads(path.read_text())
    except UnicodeDecodeError:
        raise InputError(f"{what} {path}: not a text file") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} {path}: malformed JSON at line {exc.lineno} column {exc.colno}: "
                         f"{exc.msg}") from None
    if not isinstance(data, dict):
        raise InputError(f"{what} {path}: expected a JSON object, got {type(data).__name__}")
    return data


def target_layers(config: dict[str, Any], path: Path) -> int:
    """N, the target's decoder-layer count, or an InputError saying why it is missing."""
    n = config.get("num_hidden_layers")
    if n is None:
        hint = (" (it has a text_config: pass the text model's config)" if "text_config" in config else "")
        raise InputError(f"target config {path}: no num_hidden_layers{hint}")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InputError(f"target config {path}: num_hidden_layers is {n!r}, expected a positive integer")
    return n
