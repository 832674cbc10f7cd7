"""Which of a draft config's keys a side reads while it builds the draft (docs/built-draft.md).

Run inside an extraction child, around the side's own code only (its config reader, its
converter, its draft class's constructor), never around parity's own readers. Every attribute
read of any transformers config object during the block is recorded (a hook on the base
class's `__getattribute__`, so nested configs such as speculators' `transformer_layer_config`
and the copies a side makes count too; `getattr` with a default and `hasattr` go through it);
a config given as a plain dict is wrapped so that its `[]`, `.get` and `in` reads count.

Names are then spelled as the config.json spells them: an alias is mapped by the config class's
own `attribute_map`, and a key the class keeps under other attributes (transformers 5 keeps
`rope_theta` inside `rope_parameters` and `torch_dtype` as `dtype`) is followed by building the
class again without that key and seeing which attributes change: the key counts as read when
one of them was read.
"""

from __future__ import annotations

import contextlib
import copy
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator


class ReadingDict(dict):
    """A config dict that records the keys read from it (`[]`, `.get`, `in`) into `reads`."""

    def __init__(self, data: dict, reads: set[str]):
        super().__init__(data)
        self.reads = reads

    def __getitem__(self, key):
        self.reads.add(str(key))
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.reads.add(str(key))
        return super().get(key, default)

    def __contains__(self, key):
        self.reads.add(str(key))
        return super().__contains__(key)


@contextlib.contextmanager
def reading_dicts(folder: str, reads: dict[str, set[str]]) -> Iterator[dict[str, set[str]]]:
    """While the block runs, the config.json that transformers' `PretrainedConfig.get_config_dict`
    loads from `folder` reaches whoever asked for it as a ReadingDict: the keys read of its top
    level are recorded into `reads[""]`, those of a dict it holds under key K into `reads[K]`
    (a side that reads a config as a dict before it builds a config object from it: vLLM's
    speculators-format converter). The values are those loaded; a config of another folder (the
    target's) is handed out as loaded."""
    from transformers import PretrainedConfig

    original = PretrainedConfig.__dict__["get_config_dict"]
    folder_path = Path(folder).resolve()

    def get_config_dict(cls, path, *args, **kwargs):
        config, rest = original.__func__(cls, path, *args, **kwargs)
        if not isinstance(path, (str, os.PathLike)) or Path(path).resolve() != folder_path or not isinstance(config, dict):
            return config, rest
        held = {k: ReadingDict(v, reads.setdefault(k, set())) if isinstance(v, dict) else v for k, v in config.items()}
        return ReadingDict(held, reads.setdefault("", set())), rest

    PretrainedConfig.get_config_dict = classmethod(get_config_dict)
    try:
        yield reads
    finally:
        PretrainedConfig.get_config_dict = original


def _own_files(cls: type, cache: dict[type, frozenset[str]]) -> frozenset[str]:
    """The source files of `cls` and its bases: a config's own code (its validation, `to_dict`,
    rope standardisation) reads every field, which is the config being read, not the side reading it."""
    if cls not in cache:
        files = set()
        for base in cls.__mro__:
            module = sys.modules.get(base.__module__)
            if getattr(module, "__file__", None):
                files.add(module.__file__)
        cache[cls] = frozenset(files)
    return cache[cls]


# A source line that reads more keys than this goes over the config as a whole (copying one
# config's fields into another, comparing, serialising): it uses none of them in particular.
ONE_LINE_KEYS = 3


@contextlib.contextmanager
def recording(reads: set[str], skip: list | None = None) -> Iterator[set[str]]:
    """Record into `reads` (filled when the block ends) the name of every attribute read of a
    transformers config during the block, by code other than the config classes' own (and
    huggingface_hub's field validation), aliases mapped through the class's `attribute_map`;
    dunders, private names and the reads of a line that goes over the config as a whole
    (ONE_LINE_KEYS) are left out. `skip`: config objects whose reads do not count (another
    model's, read by the same calls: vLLM's config classes read the target's config and the
    draft's alike); the block may add to it before it ends, once it has built them."""
    from transformers import PretrainedConfig

    original = PretrainedConfig.__dict__["__getattribute__"]
    cache: dict[type, frozenset[str]] = {}
    by_line: dict[tuple[str, int], set[tuple[str, int]]] = {}
    held: dict[int, Any] = {}  # every config read, kept alive so that no id is reused during the block

    def reading(self, key):
        if not key.startswith("_"):
            frame = sys._getframe(1)  # noqa: SLF001 - who reads, not what
            caller = frame.f_code.co_filename
            if caller not in _own_files(type(self), cache) and f"{os.sep}huggingface_hub{os.sep}" not in caller:
                amap = object.__getattribute__(self, "attribute_map") if key != "attribute_map" else {}
                name = amap.get(key, key) if isinstance(amap, dict) else key
                held[id(self)] = self
                by_line.setdefault((caller, frame.f_lineno), set()).add((name, id(self)))
        return original(self, key)

    PretrainedConfig.__getattribute__ = reading
    try:
        yield reads
    finally:
        PretrainedConfig.__getattribute__ = original
        skipped = {id(config) for config in skip or ()}
        for pairs in by_line.values():
            if len({name for name, _ in pairs}) <= ONE_LINE_KEYS:
                reads |= {name for name, owner in pairs if owner not in skipped}


def _built(build: Callable[[dict], Any], raw: dict, view: Callable[[Any], dict]) -> dict[str, Any] | None:
    """`view` of what `build` makes of (a copy of) `raw`, quietly; None where it refuses (a
    reader that cannot build without a key: that key is neither followed nor at its default)."""
    try:
        with contextlib.redirect_stderr(None), contextlib.redirect_stdout(None):
            return dict(view(build(dict(raw))))
    except Exception:  # noqa: BLE001 - any refusal of the side's own reader
        return None


def _rebuilt(cls: type, raw: dict) -> dict[str, Any] | None:
    """The attributes `cls` holds when built from `raw` (None where it refuses)."""
    return _built(cls.from_dict, raw, vars)


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - values that do not compare (tensors): taken as changed
        return False


def keys_read(config: Any, raw: dict, reads: set[str]) -> tuple[set[str], set[str], set[str]]:
    """(the keys of `raw`, a config.json as written, that were read; every key it sets; the keys
    set to their default: the class built again without the key holds the same attributes),
    given `reads` (the attribute names read on config objects) and `config` (the object the side
    built from `raw`, or None for a config read as a dict: names are then taken as spelled, and
    no default is known). A nested config (a dict in `raw` the object holds as a config object,
    speculators' `transformer_layer_config`) has its keys checked the same way, spelled bare, as
    the served EAGLE-3 form writes them."""
    if config is None:
        return {k for k in raw if k in reads}, set(raw), set()
    amap = getattr(type(config), "attribute_map", {}) or {}
    held = dict(vars(config))
    read, every, default = set(), set(raw), set()
    whole = _rebuilt(type(config), raw)
    for key, value in raw.items():
        nested = held.get(key)
        if isinstance(value, dict) and nested is not None and hasattr(nested, "attribute_map"):
            inner = keys_read(nested, value, reads)
            read, every, default = read | inner[0], every | inner[1], default | inner[2]
        without = _rebuilt(type(config), {k: v for k, v in raw.items() if k != key})
        # the attributes that hold the key: its own (alias mapped), else those that change without it
        moved = (set() if whole is None or without is None else
                 {a for a in whole.keys() | without.keys() if not _same(whole.get(a), without.get(a))})
        if whole is not None and without is not None and not moved:
            default.add(key)
        stored = amap.get(key, key)
        # kept elsewhere: read through an attribute that holds it, or by its own name where the
        # class still answers to it (transformers 4.56 on: the `torch_dtype` property returns `dtype`)
        if (stored in reads) if stored in held else bool(moved & reads) or stored in reads:
            read.add(key)
    return read, every, default


def defaults_by_rebuild(build: Callable[[dict], Any], raw: dict) -> set[str]:
    """The keys of `raw` (a config read as a dict) at their default for `build`, the side's own
    reader from such a dict to its config object: built again without the key, the object holds
    the same (its `to_dict()`, else its attributes). A key without which `build` refuses is not."""
    def held(config: dict) -> dict[str, Any] | None:
        return _built(build, config, lambda built: built.to_dict() if hasattr(built, "to_dict") else vars(built))

    whole = held(dict(raw))
    if whole is None:
        return set()
    return {key for key in raw if _same(held({k: v for k, v in raw.items() if k != key}), whole)}


def replaced(config: Any, written: dict) -> set[str]:
    """The keys of `written` (the config dict a side was given) whose value the config object it
    built from it holds otherwise: the side's own resolution set them before building (SpecForge
    sets tie_word_embeddings false whatever the config says), so the written value never reached
    the draft, whatever reads the attribute afterwards. Only values a config.json can hold compare."""
    held = vars(config)
    plain = (bool, int, float, str, list, type(None))
    return {key for key, value in written.items()
            if key in held and isinstance(held[key], plain) and not isinstance(value, dict) and held[key] != value}


def read_fields(config: Any, raw: dict, reads: set[str], default: set[str] | None = None,
                overridden: set[str] = frozenset()) -> dict[str, list[str]]:
    """BuiltDraft's `config_keys_read`, `config_keys_unread` and `config_keys_default` (sorted)
    for `keys_read`'s arguments; for a config read as a dict (`config` None) the defaults are
    `default` (defaults_by_rebuild's), or unknown (None). `overridden` (`replaced`'s): keys the
    side set itself before building, unread whoever read the attribute."""
    read, every, found = keys_read(config, raw, reads)
    read -= set(overridden)
    default = found if config is not None else default
    return {"config_keys_read": sorted(read), "config_keys_unread": sorted(every - read),
            "config_keys_default": sorted(default) if default is not None else None}


def converted_fields(config: Any, raw: dict, nested: str, convert: Callable[[dict], dict],
                     build: Callable[[dict], Any], reads: set[str], dict_reads: dict[str, set[str]]) -> dict[str, list[str]]:
    """BuiltDraft's config keys of a config.json (`raw`) that a side reads as a dict and converts
    (`convert`: raw -> the dict its config object is built from; `build`: raw -> that object; both
    the side's own code) before it builds the draft from `config`, the object so built. `nested`:
    the key of raw whose dict holds the layer's keys (speculators' transformer_layer_config),
    spelled bare as training spells them; `reads`: the attributes read on config objects;
    `dict_reads`: `reading_dicts`' record of the dict reads. A top-level key the converter read
    and copied unchanged into the converted dict counts as read when its copy was read on the
    object (copying is not using); one it read otherwise (to decide: `speculators_model_type`,
    the nested key itself) is read; a nested key counts as read when the converter read it, or
    when the converted dict holds its value (not overwritten from the top level) and the object's
    attribute was read (`keys_read`). At its default: a copied key the converter, run without it,
    copies the same value for (its own default); a nested key without which `build` gives the
    same object (`defaults_by_rebuild`). A top-level key the converter never copies never reaches
    the config object at all: not at a default (what the engine builds without it is the built
    fields' to judge)."""
    converted = convert(copy.deepcopy(raw))
    on_object = keys_read(config, converted, reads)[0]
    top, inner = dict_reads.get("", set()), dict_reads.get(nested, set())
    layer = raw.get(nested) if isinstance(raw.get(nested), dict) else {}
    copied = {k for k in top if k != nested and k in raw and k in converted and _same(converted[k], raw[k])}
    read = {k for k in raw if (k in on_object if k in copied else k in top)}
    read |= {k for k in layer if k in inner or (k not in copied and k in converted and _same(converted[k], layer[k])
                                                and k in on_object)}
    missing = object()
    default = {k for k in copied
               if _same(convert(copy.deepcopy({j: v for j, v in raw.items() if j != k})).get(k, missing), converted[k])}
    default |= defaults_by_rebuild(lambda d: build(copy.deepcopy({**raw, nested: d})), layer)
    every = set(raw) | set(layer)
    return {"config_keys_read": sorted(read), "config_keys_unread": sorted(every - read),
            "config_keys_default": sorted(default)}
