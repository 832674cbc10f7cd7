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


def is_wrapper(config: dict[str, Any]) -> bool:
    """A published multimodal wrapper (`*ForConditionalGeneration` of Kimi-K2.5, Llama-4, ...):
    the text model's config is nested under `text_config` and the top level has no layer count."""
    return isinstance(config.get("text_config"), dict) and "num_hidden_layers" not in config


def text_part(config: dict[str, Any]) -> dict[str, Any]:
    """The config of the model whose hidden states the draft reads: a wrapper's nested
    `text_config`, else the config itself. The file is never rewritten: the engine reads
    the wrapper as published, and this only says where N, H and the vocabulary are."""
    return config["text_config"] if is_wrapper(config) else config


def target_layers(config: dict[str, Any], path: Path) -> int:
    """N, the target's decoder-layer count, or an InputError saying why it is missing."""
    where = "text_config.num_hidden_layers" if is_wrapper(config) else "num_hidden_layers"
    n = text_part(config).get("num_hidden_layers")
    if n is None:
        if is_wrapper(config):
            raise InputError(f"target config {path}: its text_config has no num_hidden_layers, so the "
                             "text model's depth is unknown")
        raise InputError(f"target config {path}: no num_hidden_layers")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InputError(f"target config {path}: {where} is {n!r}, expected a positive integer")
    return n


def target_model(path: Path):
    """The TargetModel a target config.json describes (one-line InputError when it cannot)."""
    from .contract import TargetModel

    cfg = read_config(Path(path), "target config")
    target_layers(cfg, Path(path))
    return TargetModel.from_hf_config(cfg)


def check_inputs(target_config: Path, draft_dir: Path, training=None) -> None:
    """What `parity check` refuses: impossible ids, and (given the TrainingContract) widths
    that cannot fit. The draft config is read as the engine will read it."""
    cfg = read_config(target_config, "target config")
    n = target_layers(cfg, target_config)
    if not (cfg.get("architectures") or []):
        raise InputError(f"target config {target_config}: no architectures list")
    draft_dir = Path(draft_dir)
    if not draft_dir.is_dir():
        raise InputError(f"draft {draft_dir}: not a directory")
    dfile = draft_dir / "config.json"
    draft = read_config(dfile, "draft config")
    eagle = draft.get("eagle_config") if isinstance(draft.get("eagle_config"), dict) else {}
    ids = eagle.get("eagle_aux_hidden_state_layer_ids", draft.get("eagle_aux_hidden_state_layer_ids"))
    if ids is not None:
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise InputError(f"draft config {dfile}: eagle_aux_hidden_state_layer_ids is {ids!r}, "
                             "expected a list of integers")
        out = [i for i in ids if not -1 <= i <= n]
        if out:
            raise InputError(f"draft config {dfile}: layer ids {out} are out of range for a {n}-layer "
                             f"target (-1..{n})")
        if len(set(ids)) != len(ids):
            raise InputError(f"draft config {dfile}: duplicate layer ids in {ids}")
        if ids != sorted(ids):
            raise InputError(f"draft config {dfile}: layer ids {ids} are not ascending; engines "
                             "capture in layer order, so the fc chunks would not follow this order")
    if training is None:
        return
    layout = [t.name for t in training.dump_layout]
    if len(set(layout)) != len(layout):
        raise InputError(f"dump layout {layout}: a state appears twice")
    n_aux = draft.get("num_aux_hidden_states") or (len(ids) if isinstance(ids, list) else None)
    if n_aux is not None and n_aux != len(training.fc_input):
        raise InputError(f"dump layout {layout}: the training data path builds a {len(training.fc_input)}"
                         f"-state fc input, but draft config {dfile} expects {n_aux} aux states")
    tgt_h, draft_h = text_part(cfg).get("hidden_size"), draft.get("target_hidden_size") or draft.get("hidden_size")
    if isinstance(tgt_h, int) and isinstance(draft_h, int) and tgt_h != draft_h:
        where = "text_config.hidden_size" if is_wrapper(cfg) else "hidden_size"
        raise InputError(f"draft config {dfile}: expects target hidden states of width {draft_h}, "
                         f"but target config {target_config} has {where} {tgt_h}")
