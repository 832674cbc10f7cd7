"""The draft as the installed speculators builds it (parity.contract.BuiltDraft), in its probe.

A speculators-format config (`speculators_config`, `transformer_layer_config`) is read by
the release's own `Eagle3SpeculatorConfig`; a config in the served EAGLE-3 form is loaded
the way speculators' own converter maps such a checkpoint (`Eagle3Converter`, which takes
the vocabulary from the target and never ties the head). Sizes come from the real config
so read; rope, eps, activation and the head's tie are read off `Eagle3DraftModel` built by
its own constructor at tiny widths (the same shrink the engines' builds use).
"""

from __future__ import annotations

import inspect
import json
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from ...built import (MAX_POSITIONS, SIZE_KEYS, every_token, hf_sizes, later_layer_input_norms, module_facts,
                      plain_rope_scaling, seeded, training_only_keys)
from ...config_reads import ReadingDict, defaults_by_rebuild, read_fields, recording
from ...shrink import shrink_config, shrink_draft_config

CONVERTER = "speculators.convert.eagle.eagle3_converter.Eagle3Converter"


def is_speculators_format(config: dict) -> bool:
    return isinstance(config.get("speculators_config"), dict) or "transformer_layer_config" in config


def _config(run, draft: dict, target: dict, work: Path, reads: set[str] | None = None):
    """The release's Eagle3SpeculatorConfig for `draft` (a config.json dict) against `target`.
    `reads` collects the keys its converter reads from `draft` (a config in the served form)."""
    config_cls = run.look_up(run.family.DRAFT_CONFIG)
    if config_cls is None:
        raise LookupError(f"no {run.family.DRAFT_CONFIG} in this release")
    work.mkdir(parents=True, exist_ok=True)
    if is_speculators_format(draft):
        (work / "config.json").write_text(json.dumps(draft))
        return config_cls.from_pretrained(str(work)), "read by its Eagle3SpeculatorConfig"
    served_as = [a for a in draft.get("architectures") or [] if isinstance(a, str)]
    if served_as and not any("llama" in a.lower() and "eagle3" in a.lower() for a in served_as):
        # Its converter maps any EAGLE-3 config to a Llama draft: a config served as another
        # class (SGLang's MLA Eagle3DeepseekV2ForCausalLM) is not a draft this release trains.
        raise LookupError(f"the draft is served as {served_as[0]}, and this release builds EAGLE-3 drafts of "
                          "Llama layers only (its Eagle3Converter maps any EAGLE-3 config to one)")
    converter = run.look_up(CONVERTER)
    if converter is None:
        raise LookupError(f"the draft is in the served EAGLE-3 form and this release has no {CONVERTER} "
                          "to load it as training would")
    target_dir = work / "target"
    target_dir.mkdir(exist_ok=True)
    (target_dir / "config.json").write_text(json.dumps(target))
    # As its convert() does before the mapping (with no t2d tensor to read): the vocabulary is
    # the target's, found at any level of the target's config.
    find_vocab_size = run.look_up(CONVERTER.rsplit(".", 1)[0] + ".find_vocab_size")
    if find_vocab_size is not None and "target_vocab_size" not in draft:
        draft = {**draft, "target_vocab_size": find_vocab_size(target)}
    norm_before_residual = bool(draft.get("norm_before_residual", False))  # convert()'s argument, not a read
    config = converter()._build_eagle3_speculator_config(  # noqa: SLF001 - the converter's own mapping
        ReadingDict(draft, set() if reads is None else reads), str(target_dir), norm_before_residual=norm_before_residual)
    return config, "mapped as its Eagle3Converter maps an EAGLE-3 config"


def _forward(model, hidden_states: torch.Tensor, input_ids: torch.Tensor, ttt_steps: int):
    """The release's own Eagle3DraftModel forward on one sequence, called with the arguments it names."""
    t = input_ids.shape[-1]
    takes = inspect.signature(model.forward).parameters
    given: dict[str, Any] = {"hidden_states": hidden_states, "input_ids": input_ids, "ttt_steps": ttt_steps}
    if "document_ids" in takes:  # 0.8 on: one document
        given["document_ids"] = torch.zeros(1, t, dtype=torch.long)
    if "lengths" in takes:  # before: one sequence of t tokens
        given["lengths"] = torch.tensor([t])
    return model(**given)


def later_layer_wiring(model) -> tuple[str, ...]:
    """Which norm each decoder layer after the first applies to its input, found on one forward
    (one TTT step) of the release's own Eagle3DraftModel, called with the arguments its forward
    names (parity.extract.built.later_layer_input_norms); () for a one-layer draft."""
    def forward():
        gen = seeded(model)
        t = 6
        _forward(model, torch.randn(1, t, model.fc.in_features, generator=gen),
                 torch.randint(0, model.embed_tokens.num_embeddings, (1, t), generator=gen), 1)

    return later_layer_input_norms(model.layers, forward)


TTT_STEPS = 3  # the forward that decides a key read for training only: three draft steps, as trained by default


def every_token_forward(model, gen: torch.Generator, positions: int):
    """Its own forward on `positions` positions of seeded target states and every token of the tiny
    vocabulary (parity.extract.built.training_only_keys): TTT_STEPS steps, one past MAX_POSITIONS
    (a long sequence is there for a window, which the first step shows)."""
    ids = every_token(model.embed_tokens.num_embeddings, positions, gen)
    return _forward(model, torch.randn(1, positions, model.fc.in_features, generator=gen), ids,
                    TTT_STEPS if positions <= MAX_POSITIONS else 1)


def _sizes(config) -> dict[str, Any]:
    """The sizes, rope and dtype the release's config (the real one) gives the draft it builds."""
    tl = config.transformer_layer_config
    heads = getattr(tl, "num_attention_heads", None)
    hidden = getattr(tl, "hidden_size", None)
    rope_parameters = getattr(tl, "rope_parameters", None)
    rope_parameters = rope_parameters if isinstance(rope_parameters, dict) else {}
    built: dict[str, Any] = {
        "vocab_size": getattr(tl, "vocab_size", None),
        "draft_vocab_size": getattr(config, "draft_vocab_size", None) or getattr(tl, "vocab_size", None),
        "hidden_size": hidden,
        "target_hidden_size": getattr(config, "target_hidden_size", None) or hidden,
        "num_hidden_layers": getattr(tl, "num_hidden_layers", None),
        "num_attention_heads": heads,
        "num_key_value_heads": getattr(tl, "num_key_value_heads", None),
        "head_dim": getattr(tl, "head_dim", None) or (hidden // heads if hidden and heads else None),
        "intermediate_size": getattr(tl, "intermediate_size", None),
        "max_position_embeddings": getattr(tl, "max_position_embeddings", None),
        "rope_theta": getattr(tl, "rope_theta", None) or rope_parameters.get("rope_theta"),
        "rope_scaling": plain_rope_scaling(getattr(tl, "rope_scaling", None) or rope_parameters),
    }
    dtype = getattr(tl, "dtype", None) or getattr(tl, "torch_dtype", None)
    built["dtype"] = str(dtype).removeprefix("torch.") if dtype is not None else None
    if built["draft_vocab_size"]:
        built["max_token_id"] = None  # the d2t table is the checkpoint's; the served side reads it
    return built


def converter_assumed(built: dict[str, Any], draft: dict) -> list[dict[str, Any]]:
    """Of the sizes the converter gave a config in the served form (`built`, the converted config's),
    those for a key `draft` does not set where the converter takes another value than the EAGLE-3
    draft classes' common default (parity.extract.built.hf_sizes; speculators' Eagle3Converter
    assumes draft_vocab_size 32000 where the engines and the other trainers take vocab_size). The
    converter's guess, not what the trainer that wrote the config built: each such field is set to
    None in `built` (not compared) and listed (parity.contract.AssumedSize)."""
    common = hf_sizes(SimpleNamespace(**draft))
    assumed = []
    for key in SIZE_KEYS:
        value, default = built.get(key), common.get(key)
        if key not in draft and value is not None and default is not None and value != default:
            assumed.append({"key": key, "assumed": value, "common": default})
            built[key] = None
    return assumed


def built_draft(run, request: dict, version: str) -> dict[str, Any]:
    """{BuiltDraft fields} for request {"config": draft config.json, "target": the target's
    config.json (text part is enough), "from": what the config is}."""
    draft, target = request["config"], request["target"]
    # The config keys its own code reads: the converter's reads of the served dict, or every
    # attribute read of the checkpoint's config classes while they load and the model is built.
    converted, attributes = set(), set()
    with tempfile.TemporaryDirectory(prefix="parity-built-") as tmp:
        with recording(attributes):
            config, how = _config(run, draft, target, Path(tmp) / "real", converted)
        built = _sizes(config)

        tiny_draft, tiny_target = shrink_draft_config(draft), shrink_config(target)
        model_cls = run.look_up(run.family.DRAFT_MODEL)

        def tiny_config(served: dict):
            """The release's config for `served` (a tiny draft config), as training reads it."""
            config, _ = _config(run, served, tiny_target, Path(tmp) / "tiny")
            config.transformer_layer_config._attn_implementation = "sdpa"  # noqa: SLF001
            verifier = getattr(getattr(config, "speculators_config", None), "verifier", None)
            if verifier is not None:
                verifier.name_or_path = None  # built from its config alone: no verifier is loaded
            return config

        def draft_model(config):
            return run.family.draft_model(model_cls, config).eval()

        first = tiny_config(tiny_draft)
        with recording(attributes):
            model = draft_model(first)
        built.update(module_facts(model, getattr(model, "embed_tokens", None), getattr(model, "lm_head", None)))
        built["layers_built"] = len(model.layers)
        built["later_layer_input_norms"] = later_layer_wiring(model)
        if is_speculators_format(draft):
            built.update(read_fields(config, draft, attributes))
        else:  # its converter's reads, and the keys it maps to the same config without them
            default = defaults_by_rebuild(  # one work dir: the target's path is part of the config
                lambda served: _config(run, served, target, Path(tmp) / "rebuilt")[0], draft)
            built.update(read_fields(None, draft, converted, default))
            built["converter_assumed"] = converter_assumed(built, draft)
        # of the keys it read off their default, those the draft it builds computes the same without
        off_default = [k for k in built["config_keys_read"] if k not in (built["config_keys_default"] or ())]
        built["config_keys_training_only"] = training_only_keys(
            lambda served: draft_model(tiny_config(served)), every_token_forward, draft, tiny_draft, off_default,
            model.embed_tokens.num_embeddings, nested=("transformer_layer_config",))
    built["built_by"] = f"speculators {version} {type(model).__name__}"
    built["config_from"] = f"{request.get('from', 'the served config.json')} ({how})"
    return built
