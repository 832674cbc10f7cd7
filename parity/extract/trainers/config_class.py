"""The installed speculators config class of a draft: its fields and their defaults, which the
draft reader (parity.extract.trainers.draft) checks a draft's config.json against. Run by the
speculators probe in each release's own environment (its reply's `config_schema`), and as a
child of its own (`python -m parity.extract.trainers.config_class`, draft.installed_schema) for
the interpreter parity runs in: importing speculators there took 15-18 s of a command's parent
and set TORCHINDUCTOR_CACHE_DIR in its environment, where a child's reply is remembered by the
installed code it read (parity.reply_cache). Pydantic and the stdlib until called; then the
installed speculators and transformers."""

from __future__ import annotations

import importlib
import json
from importlib import metadata
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from ...contract.reply import TypedReply


class ConfigSchema(BaseModel):
    """The installed speculators config class of a draft, as `config_schema` reads it: what the
    draft reader checks a config.json against (its keys, its switches, their defaults)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    class_: str = Field(alias="class", description="The class, by qualified name (e.g. "
                        "'speculators.models.eagle3.Eagle3SpeculatorConfig').")
    release: str = Field(description="The speculators release whose class this is.")
    defaults: dict[str, JsonValue] = Field(description="Each field of the class and its default (None for a "
                                           "required field or a default that is not JSON).")
    required: tuple[str, ...] = Field(description="The fields the class requires.")
    own_fields: tuple[str, ...] = Field(description="The fields the class adds over SpeculatorModelConfig (the "
                                        "algorithm's own switches).")
    bool_fields: tuple[str, ...] = Field(description="Those of its own fields that are switches (bool).")
    base_keys: tuple[str, ...] = Field(description="Keys any speculators or transformers config may carry.")

    @property
    def short(self) -> str:
        """'Eagle3SpeculatorConfig (speculators 0.9.0)': the class as a message names it."""
        return f"{self.class_.rsplit('.', 1)[-1]} (speculators {self.release})"


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return None


def config_schema(model_type: str = "eagle3") -> dict[str, Any]:
    """The installed speculators config class for `model_type`: its fields and their defaults.

    `own_fields` are those the class adds over SpeculatorModelConfig (the algorithm's
    own switches); `base_keys` are keys any speculators/transformers config may carry.
    ImportError or AttributeError when this interpreter has no speculators (or none with the
    class); LookupError when no class is registered for `model_type`."""
    base = importlib.import_module("speculators").SpeculatorModelConfig
    registry = getattr(base, "registry", None) or {}
    cls = registry.get(model_type)
    if cls is None:
        raise LookupError(f"no speculators config class registered for {model_type!r}")
    from transformers import PretrainedConfig

    fields = cls.model_fields
    own = [k for k in fields if k not in base.model_fields]
    return {
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "release": metadata.version("speculators"),  # the installed speculators whose class this is
        "defaults": {k: (None if f.is_required() else _jsonable(f.get_default(call_default_factory=False)))
                     for k, f in fields.items()},
        "required": [k for k, f in fields.items() if f.is_required()],
        "own_fields": own,
        "bool_fields": [k for k in own if fields[k].annotation is bool],
        "base_keys": sorted(set(base.model_fields) | set(PretrainedConfig().to_dict())
                            | {"auto_map", "model_type", "_name_or_path", "torch_dtype"}),
    }


class ConfigClassReply(TypedReply):
    """This child's reply: the installed class, or None where this interpreter has no speculators."""

    config_schema: ConfigSchema | None = Field(default=None, description="The installed speculators config "
                                               "class (None: speculators is not importable here).")


def _reply(request: dict) -> dict[str, Any]:
    """The child's reply: {"config_schema": config_schema(...)}, None when this interpreter has no speculators."""
    try:
        return {"config_schema": config_schema(request.get("model_type", "eagle3"))}
    except ImportError:
        return {"config_schema": None}


def main() -> None:
    from parity.envs import reply_over_stdio

    reply_over_stdio(ConfigClassReply.checked(_reply))


__all__ = ["ConfigClassReply", "ConfigSchema", "config_schema"]

if __name__ == "__main__":
    main()
