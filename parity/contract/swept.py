"""releases.json, the sweep's results (`parity sweep`), as a model: read once where it is read
(docs/releases.md's tables, parity.report.releases; the lines environments are built from,
parity.ondemand), checked before it is written (parity.sweep.run.save), so a key misspelled on
either side is refused, never read as missing.

The file: `format`, each swept package's cases described (`cases`), the sweep's runs, and one
section per swept package (its name as the key: `sglang`, `vllm`, `speculators`, ...), a row per
release holding its build and a cell per case.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue


class Outcome(StrEnum):
    """What one cell is (parity.sweep.outcome decides it when the cell is extracted)."""

    extracted = "extracted"
    engine_refuses = "engine refuses"
    parity_cannot_run = "parity cannot run"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Build(_Record):
    """How the release's environment was built (or why it was not)."""

    seconds: float | None = Field(default=None, description="Seconds to build it (download included).")
    extra_bytes: int | None = Field(default=None, description="The disk it adds beyond the shared package cache.")
    line: dict[str, str | list[str]] | None = Field(default=None, description="The envs.toml line it was built "
                                                    "from: each package's pin, `extra` the packages added unpinned.")
    line_from: str | None = Field(default=None, description="Where that line came from (parity.ondemand.LineSource).")
    compile_seconds: float | None = Field(default=None, description="Seconds compiling the bytecode its probe "
                                          "imports.")
    error: str | None = Field(default=None, description="Why it could not be built (the row then has no cases).")


class Cell(_Record):
    """One case under one release: the states it feeds (or trains on, or dumps), else its error,
    and the outcome (None: saved before cells were classified)."""

    outcome: Outcome | None = Field(default=None, description="What the cell is (None: not classified).")
    fc: list[str | None] | None = Field(default=None, description="The states fed to the fc, slot by slot (None: "
                                        "a slot not named), on the GPU-default runner.")
    runners: dict[str, list[str | None]] | None = Field(default=None, description="Each model runner's fc states, "
                                                        "where a release has several.")
    default: bool | None = Field(default=None, description="The engine fell back to its default layers.")
    ids: list[int] | None = Field(default=None, description="The ids the engine read.")
    ids_source: str | None = Field(default=None, description="Where it read them, in words.")
    target: str | None = Field(default=None, description="A training case: the loss target's state.")
    layout: list[str | None] | None = Field(default=None, description="A dump case: the dump's slots.")
    launch_ids: list[int] | None = Field(default=None, description="A dump case: the ids the launch gave.")
    method: str | None = Field(default=None, description="A dump case: how the states were dumped.")
    family: str | None = Field(default=None, description="The release family of parity's that ran it.")
    note: str | None = Field(default=None, description="The family's release note (an unverified release).")
    error: str | None = Field(default=None, description="What stopped it, in one line.")

    @property
    def named(self) -> bool:
        """The case named at least one state (fc slots or dump slots), whatever else went wrong."""
        return bool((self.fc and any(self.fc)) or self.layout)


class Override(_Record):
    """A field of the seed launch the engine's own code changed."""

    field: str = Field(description="The field, as the engine names it.")
    requested: JsonValue = Field(description="The value the seed asked for.")
    effective: JsonValue = Field(description="The value the engine runs with.")
    by: str = Field(description="The function that changed it.")


class SeedLaunch(_Record):
    """The release's own parser and resolution run on the sweep's seed launch (docs/launch.md)."""

    argv: list[str] = Field(description="The seed launch's arguments.")
    outcome: Outcome | None = Field(default=None, description="Resolved, or who refused it.")
    requested: dict[str, JsonValue] | None = Field(default=None, description="Each field the seed gives.")
    effective: dict[str, JsonValue] | None = Field(default=None, description="Each field as the release runs it.")
    overrides: list[Override] | None = Field(default=None, description="The fields the release changed.")
    error: str | None = Field(default=None, description="Why it was not resolved.")


class Row(_Record):
    """One release: its build and, where it was built, a cell per case."""

    version: str = Field(description="The release, as the registry spells it.")
    build: Build = Field(description="Its environment's build.")
    cases: dict[str, Cell] | None = Field(default=None, description="A cell per case name (None: not run).")
    launch: SeedLaunch | None = Field(default=None, description="The seed launch (an engine; None: not swept).")
    family: str | None = Field(default=None, description="The release family that ran its cases.")
    note: str | None = Field(default=None, description="That family's release note.")
    seconds: float | None = Field(default=None, description="Seconds its cases took.")


class Section(_Record):
    """One swept package's releases, oldest first."""

    releases: list[Row] = Field(default_factory=list, description="A row per release swept.")
    cases: None = Field(default=None, description="Unused (an early format's; kept readable).")


class Run(_Record):
    """One run of `parity sweep`."""

    releases: int = Field(description="The releases it ran.")
    seconds: float = Field(description="Its wall time.")


class Swept(BaseModel):
    """releases.json: the cases, the runs, and a Section per swept package, keyed by its name."""

    model_config = ConfigDict(extra="allow", frozen=True)
    __pydantic_extra__: dict[str, Section] = Field(init=False)

    format: int = Field(description="The file's format.")
    cases: dict[str, dict[str, str]] = Field(default_factory=dict, description="Each swept package's cases, "
                                             "name to description, in the tables' order.")
    runs: list[Run] = Field(default_factory=list, description="The sweep's runs.")

    def section(self, package: str) -> Section | None:
        """`package`'s section, None where it was not swept."""
        return (self.__pydantic_extra__ or {}).get(package)

    def sections(self) -> dict[str, Section]:
        return dict(self.__pydantic_extra__ or {})

    @classmethod
    def read(cls, data: "Swept | dict[str, Any]") -> "Swept":
        return data if isinstance(data, Swept) else cls.model_validate(data)
