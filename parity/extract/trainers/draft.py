"""Read a draft directory into the contract's vocabulary: layer ids, graph flags, vocab mapping,
embedding. Shared by the trainers (speculators reads its drafts with it, SpecForge the draft it
is checked with), so neither imports the other (.importlinter: trainers are independent).

A draft is read in speculators' format, or as an EAGLE-format config (ids under eagle_config).

The flags are read through the installed speculators' own config class (its field
list and defaults, as `probe.config_schema` reports them), so a key the class does not
know (renamed or newer than this speculators) and a switch the class has that parity
does not map are both findings, never silently dropped. A flag absent from config.json
takes the class default, because that is what speculators builds.

Embedding: speculators' Eagle3DraftModel loads `embed_tokens` from the verifier when the
checkpoint has none (`_load_verifier_weights`: "checkpoint weights take precedence") and
keeps it frozen unless `embed_requires_grad` (`embed_tokens.weight.requires_grad =
config.embed_requires_grad`). A saved checkpoint normally carries that frozen copy, so
having `embed_tokens` weights does not make the embedding the draft's own: the draft's
first layer uses its *own* embedding only when it was trained (`embed_requires_grad`
true); otherwise it is the target's.

d2t: speculators stores offsets (train/vocab_mapping.py: target = d + d2t[d], with the
selected target ids sorted); some exporters write absolute ids (target = d2t[d]). Which
one a table holds is decided from its values, cross-checked against t2d when present.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ...contract import Finding, FindingKind, GraphFlags, VocabMapping
from ...errors import UserError
from ...inputs import Draft
from .config_class import ConfigClassReply, ConfigSchema

CONFIG_CLASS = "parity.extract.trainers.config_class"  # the child that reads the installed class

if TYPE_CHECKING:
    from ...inputs import Draft

FLAG_KEYS = ("norm_before_fc", "fc_norm", "norm_output", "norm_before_residual")
MAPPED_BOOL_FIELDS = frozenset(FLAG_KEYS) | {"embed_requires_grad"}
IDS_KEY = "eagle_aux_hidden_state_layer_ids"


class DraftError(UserError, ValueError):
    """A draft directory that cannot be read: one line naming the file and the problem."""


@dataclass(frozen=True)
class DraftConfig:
    """What a draft directory says about the fc input and the graph around it."""

    path: Path
    ids: tuple[int, ...] | None  # eagle_aux_hidden_state_layer_ids as written (None: absent)
    ids_key: str | None  # where they were read, e.g. "eagle_aux_hidden_state_layer_ids"
    flags: GraphFlags
    vocab: VocabMapping
    target_hidden_size: int | None
    hidden_size: int | None  # the draft layer's width (transformer_layer_config.hidden_size)
    embed_requires_grad: bool | None
    has_weights: bool
    has_embed_tokens: bool
    lm_head_rows: int | None  # the checkpoint's lm_head rows: the output vocabulary it was trained with (None: no head)
    speculators_format: bool  # has speculators_model_type / speculators_config
    config_class: str | None  # "<class> (speculators <version>)" the flags were read through
    written_by: str | None  # the speculators_version recorded in config.json
    findings: tuple[Finding, ...] = field(default=())

    @property
    def num_aux(self) -> int | None:
        """How many aux states the draft's fc expects (len(ids)); None when the config has no ids."""
        return len(self.ids) if self.ids else None

    @property
    def sizes(self) -> dict[str, int | None]:
        """The vocabulary sizes, as `vocab_mapping` read them from the draft's real config.json
        (parity.contract.sources: the sizes a training contract reports)."""
        return {"draft_vocab_size": self.vocab.draft_vocab_size, "target_vocab_size": self.vocab.target_vocab_size}

    @property
    def embedding(self) -> Literal["draft", "target", "unknown"]:
        """Whose embedding the draft's first layer uses (see the module docstring)."""
        if self.embed_requires_grad is None:
            return "unknown"
        return "draft" if self.embed_requires_grad else "target"


# -- config.json ----------------------------------------------------------------------------


def load_config(draft_dir: "Path | str | Draft") -> tuple[Path, dict[str, Any]]:
    """(config.json path, its object); DraftError for a missing dir/file or malformed JSON. A
    draft already read at the boundary (parity.inputs.Draft) is not read again."""

    if isinstance(draft_dir, Draft):
        return draft_dir.config_file, draft_dir.config
    path = Path(draft_dir)
    if not path.is_dir():
        raise DraftError(f"{path}: no such draft directory")
    file = path / "config.json"
    if not file.is_file():
        raise DraftError(f"{file}: missing (a draft directory needs config.json)")
    try:
        config = json.loads(file.read_text())
    except json.JSONDecodeError as exc:
        raise DraftError(f"{file}: malformed JSON at line {exc.lineno} column {exc.colno}: "
                         f"{exc.msg}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DraftError(f"{file}: unreadable: {exc}") from None
    if not isinstance(config, dict):
        raise DraftError(f"{file}: expected a JSON object, got {type(config).__name__}")
    return file, config


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check(file: Path, key: str, value: Any, kind: str) -> Any:
    """Type-check one value from config.json; DraftError naming the file and key."""
    ok = {"bool": isinstance(value, bool),
          "int": _int(value) and value >= 1,
          "ids": isinstance(value, list) and all(_int(v) for v in value),
          "object": isinstance(value, dict)}[kind]
    if value is None or ok:
        return value
    want = {"bool": "true or false", "int": "a positive integer", "ids": "a list of integers",
            "object": "a JSON object"}[kind]
    raise DraftError(f"{file}: '{key}' must be {want}, got {json.dumps(value)}")


def is_speculators_format(config: dict) -> bool:
    return "speculators_model_type" in config or "speculators_config" in config


def read_ids(file: Path, config: dict) -> tuple[tuple[int, ...] | None, str | None]:
    """The aux layer ids: top level (speculators format) or eagle_config (EAGLE/SGLang format)."""
    if IDS_KEY in config:
        ids = _check(file, IDS_KEY, config[IDS_KEY], "ids")
        return (tuple(ids) if ids is not None else None), IDS_KEY
    eagle = _check(file, "eagle_config", config.get("eagle_config"), "object")
    if eagle and IDS_KEY in eagle:
        ids = _check(file, f"eagle_config.{IDS_KEY}", eagle[IDS_KEY], "ids")
        return (tuple(ids) if ids is not None else None), f"eagle_config.{IDS_KEY}"
    return None, None


def draft_ids(draft_dir: "Path | str | Draft") -> tuple[tuple[int, ...] | None, str | None]:
    """Just the aux layer ids of a draft directory (and the key they came from)."""
    file, config = load_config(draft_dir)
    return read_ids(file, config)


# -- the installed config class ---------------------------------------------------------------


@lru_cache(maxsize=1)
def installed_schema() -> ConfigSchema | None:
    """The current interpreter's speculators Eagle3 config class (None if speculators is absent),
    read in a child of this interpreter (config_class: its reply is remembered while the installed
    code it read is unchanged; this process never imports speculators)."""
    from ...envs import run_module

    reply = run_module(sys.executable, CONFIG_CLASS, {"model_type": "eagle3"}, cache=True)
    read = ConfigClassReply.read(reply)
    if read.error:
        raise RuntimeError(f"reading the installed speculators config class failed: {read.error}")
    return read.config_schema


def _finding(kind: FindingKind, message: str, severity: str = "warning") -> Finding:
    return Finding(kind=kind, message=message, severity=severity)


def schema_findings(file: Path, config: dict, schema: ConfigSchema) -> list[Finding]:
    """Keys the class does not know, and flag fields of the class parity does not map."""
    cls = schema.short
    known = set(schema.defaults) | set(schema.base_keys)
    out = [_finding(FindingKind.unknown_config_key,
                    f"{file.name} has '{key}', which {cls} does not define: speculators ignores "
                    "it (a renamed, misspelled or newer setting)")
           for key in config if key not in known]
    out += [_finding(FindingKind.unmapped_flag_field,
                     f"{cls} has the switch '{name}' (default {schema.defaults.get(name)}) that "
                     "parity does not map into the contract: its effect on the draft graph is unchecked")
            for name in schema.bool_fields if name not in MAPPED_BOOL_FIELDS]
    return out


def read_flag(file: Path, config: dict, key: str, schema: ConfigSchema | None,
              findings: list[Finding]) -> bool | None:
    """A graph flag as speculators would build it: the written value, else the class default."""
    nested = config.get("eagle_config") if not is_speculators_format(config) else None
    if key in config:
        return _check(file, key, config[key], "bool")
    if isinstance(nested, dict) and key in nested:
        return _check(file, f"eagle_config.{key}", nested[key], "bool")
    if schema is None or key not in schema.defaults:
        return None
    default = schema.defaults[key]
    findings.append(_finding(FindingKind.flag_default, f"'{key}' is absent from {file.name}: "
                             f"{schema.short} builds it as {default}", "info"))
    return default


# -- weights --------------------------------------------------------------------------------


def read_weights(path: Path) -> tuple[list[str], dict[str, Any]]:
    """(every tensor name, the d2t/t2d tensors and "lm_head_rows", the rows of the checkpoint's
    lm_head, from its header) from the directory's *.safetensors."""
    from safetensors import safe_open

    names: list[str] = []
    maps: dict[str, Any] = {}
    for f in sorted(path.glob("*.safetensors")):
        try:
            with safe_open(str(f), framework="pt") as fh:
                for name in fh.keys():
                    names.append(name)
                    if name.split(".")[-1] in ("d2t", "t2d"):
                        maps[name.split(".")[-1]] = fh.get_tensor(name)
                    elif name.endswith("lm_head.weight"):
                        maps["lm_head_rows"] = fh.get_slice(name).get_shape()[0]
        except Exception as exc:  # noqa: BLE001 - safetensors raises several kinds
            raise DraftError(f"{f}: unreadable safetensors: {str(exc).splitlines()[0]}") from None
    return names, maps


def classify_d2t(d2t, t2d, target_vocab: int | None) -> tuple[str, str]:
    """('offsets' | 'absolute' | 'unknown', why): which reading maps draft ids to valid target ids.

    A reading is valid when its target ids are distinct, inside the target vocab, and
    (with t2d) exactly the ids t2d marks."""
    import torch

    d2t = d2t.long().flatten()  # [D]
    vocab = target_vocab if target_vocab is not None else (t2d.numel() if t2d is not None else None)
    readings = {"offsets": torch.arange(d2t.numel()) + d2t, "absolute": d2t}

    def valid(ids) -> bool:
        if ids.min() < 0 or (vocab is not None and ids.max() >= vocab):
            return False
        if ids.unique().numel() != ids.numel():
            return False
        if t2d is not None:
            marked = t2d.bool().flatten().nonzero().flatten()
            return torch.equal(ids.sort().values, marked)
        return True

    ok = [name for name, ids in readings.items() if valid(ids)]
    if len(ok) == 1:
        return ok[0], f"only the {ok[0]} reading gives distinct target ids in range" + (
            " that match t2d" if t2d is not None else "")
    if not ok:
        return "unknown", "neither reading (offsets or absolute) gives distinct target ids in range"
    return "unknown", "both readings are plausible (no t2d to decide)"


def vocab_mapping(file: Path, config: dict, layer: dict, maps: dict, has_weights: bool,
                  schema: ConfigSchema | None, findings: list[Finding]) -> VocabMapping:
    draft_vocab = _check(file, "draft_vocab_size", config.get("draft_vocab_size"), "int")
    if draft_vocab is None and schema is not None and is_speculators_format(config):
        draft_vocab = schema.defaults.get("draft_vocab_size")
    source = layer if is_speculators_format(config) else config
    target_vocab = _check(file, "vocab_size", source.get("vocab_size"), "int")
    d2t, t2d = maps.get("d2t"), maps.get("t2d")
    if not has_weights:
        return VocabMapping(draft_vocab_size=draft_vocab, target_vocab_size=target_vocab)
    kind: str = "absent"
    if d2t is not None:
        kind, why = classify_d2t(d2t, t2d, target_vocab)
        if kind == "unknown":
            findings.append(_finding(FindingKind.d2t_ambiguous, f"d2t in {file.parent.name}: {why}"))
    elif draft_vocab and target_vocab and draft_vocab < target_vocab:
        findings.append(_finding(FindingKind.vocab_mapping_missing,
                                 f"draft vocab {draft_vocab} < target vocab {target_vocab} but the "
                                 "checkpoint has no d2t: draft tokens cannot be mapped to target ids"))
    mapping = {"offsets": "target id = d + d2t[d] (speculators' offsets)",
               "absolute": "target id = d2t[d] (absolute ids, not speculators' format)",
               "absent": "identity (no d2t)"}.get(kind)
    return VocabMapping(draft_vocab_size=draft_vocab, target_vocab_size=target_vocab, d2t=kind,
                        t2d="present" if t2d is not None else "absent", mapping=mapping)


# -- the whole directory ----------------------------------------------------------------------


def read_draft(draft_dir: "Path | str | Draft",
               schema: ConfigSchema | dict | None | Literal["installed"] = "installed") -> DraftConfig:
    """Read a draft directory. `schema`: a `config_class.config_schema()` reply (e.g. the
    speculators probe's, from another speculators environment), "installed" for this
    interpreter's speculators, or None."""
    file, config = load_config(draft_dir)
    path = file.parent
    if schema == "installed":
        schema = installed_schema()
    elif isinstance(schema, dict):  # a probe's reply as sent
        schema = ConfigSchema.model_validate(schema)
    findings: list[Finding] = []
    spec = is_speculators_format(config)
    ids, ids_key = read_ids(file, config)
    if not spec:
        findings.append(_finding(FindingKind.not_speculators_format,
                                 f"{file} has no speculators_model_type/speculators_config: read as an "
                                 f"EAGLE-format config (ids from {ids_key or 'nowhere'})", "info"))
    elif schema is not None:
        findings += schema_findings(file, config, schema)
    if schema is None:
        findings.append(_finding(FindingKind.no_config_class, "speculators is not importable here: flags absent "
                                 "from config.json are left unknown, unknown keys unchecked", "info"))
    layer = _check(file, "transformer_layer_config", config.get("transformer_layer_config"), "object") or {}
    flags = GraphFlags(**{k: read_flag(file, config, k, schema, findings) for k in FLAG_KEYS})
    embed_grad = read_flag(file, config, "embed_requires_grad", schema, findings)
    names, maps = read_weights(path)
    vocab = vocab_mapping(file, config, layer, maps, bool(names), schema, findings)
    hidden = _check(file, "hidden_size", (layer if spec else config).get("hidden_size"), "int")
    return DraftConfig(
        path=path, ids=ids, ids_key=ids_key, flags=flags, vocab=vocab,
        target_hidden_size=_check(file, "target_hidden_size", config.get("target_hidden_size"), "int"),
        hidden_size=hidden, embed_requires_grad=embed_grad, has_weights=bool(names),
        has_embed_tokens=any(n.endswith("embed_tokens.weight") for n in names),
        lm_head_rows=maps.get("lm_head_rows"),
        speculators_format=spec,
        config_class=(f"{schema.class_} (speculators {schema.release})" if schema else None),
        written_by=config.get("speculators_version"), findings=tuple(findings))
