"""The matrix's rows: one per release of each side, and the cells they hold.

A training row is one speculators release's training contract (or why it could not be
extracted); a serving row is one SGLang release: the fc states it feeds, and its verdict
against each training contract with the fix the gate found on that release. A row that
could not be computed holds a "cannot extract under X: <what was looked for>" error.
"""

from __future__ import annotations

import shlex
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..contract import LaunchContract, TrainingContract
from ..extract.engines import DEFAULT as DEFAULT_ENGINE
from ..extract.trainers import DEFAULT as DEFAULT_TRAINER
from ..gate import Verdict

CANNOT = "cannot extract under"


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TrainingRow(_Row):
    """One trainer release: what its data path trains the draft on."""

    version: str = Field(description="The trainer's release.")
    fc_input: list[str] | None = Field(default=None, description="The states the fc is trained on, in order.")
    target: str | None = Field(default=None, description="The loss-target state.")
    code_path: str | None = Field(default=None, description="The release's code that was run.")
    release_note: str | None = Field(default=None, exclude_if=lambda v: v is None,
                                     description="Set for a release parity has not verified: "
                                     "which family's adapter extracted it (Provenance.release_note).")
    error: str | None = Field(default=None, description="'cannot extract under speculators X: ...'.")
    internal_error: bool = Field(default=False, exclude_if=lambda v: not v,
                                 description="The error is a failure of parity's own code (InternalError): that "
                                 "row's, the other cells still answered; the command ends in exit 3.")
    lock_drift: list[str] = Field(default_factory=list,
                                  description="Against a lock: how this release's contract differs from it.")
    changed: list[str] = Field(default_factory=list, description="What changed since the previous (older) release.")
    contract: TrainingContract | None = Field(default=None, exclude=True, repr=False,
                                              description="The training contract itself (not in the JSON).")

    def to_json(self) -> dict:
        return self.model_dump(mode="json")


class PairVerdict(_Row):
    """One serving release against one training contract (a speculators release, or the lock)."""

    against: str = Field(description="'speculators 0.9.0' or 'lock'.")
    verdict: Verdict = Field(description="The gate's decision for this pair.")
    differences: list[str] = Field(default_factory=list, description="Why it is not parity, one sentence each.")
    launch_only: bool = Field(default=False, description="Every difference is the serve command's: the engine "
                              "resolves it otherwise than asked or than the lock recorded (docs/launch.md).")
    fix: list[int] | None = Field(default=None, description="The ids the gate found on this release, if any.")
    fix_key: str | None = Field(default=None, exclude_if=lambda v: v is None, description="Where in the draft's "
                                "config.json the fix's ids are written (the engine's key for the draft's kind).")
    fix_verified: bool = Field(default=False, description="A full extraction with the fix written matched.")
    unfixable: str | None = Field(default=None, description="Why no id list makes this release feed the "
                                  "training contract (or why it cannot serve the draft).")


class LaunchCell(_Row):
    """The serve command (--serve-args, or a lock's) under one serving release (docs/launch.md):
    resolved by the release's own code, refused by it, or not resolvable under it."""

    resolved: LaunchContract | None = Field(default=None, description="The launch contract under this release: "
                                            "the arguments as its own parser and resolution read them.")
    refused: str | None = Field(default=None, description="The release's own parser or resolution refused the "
                                "arguments, in its words: bad input under this release, so no verdict.")
    unresolved: str | None = Field(default=None, description="The release's family has no launch resolver (vLLM "
                                   "before 0.11): the arguments are not checked under it, so no verdict.")
    lock_moved: list[str] = Field(default_factory=list, description="Against a lock written with serve arguments: "
                                  "each launch field this release resolves otherwise than the lock recorded.")

    @model_validator(mode="after")
    def _one_outcome(self) -> "LaunchCell":
        if sum(x is not None for x in (self.resolved, self.refused, self.unresolved)) != 1:
            raise ValueError("a launch cell is resolved, refused or unresolved: exactly one")
        if self.lock_moved and self.resolved is None:
            raise ValueError("only resolved arguments can differ from the lock's resolution")
        return self

    @property
    def drift(self) -> bool:
        """The release runs something other than what the arguments ask (a drift of its cell)."""
        r = self.resolved
        return r is not None and bool(r.overrides or r.serves_the_draft is False or self.lock_moved)

    def text(self) -> str:
        """The cell's launch result in one line: 'as asked', 'DRIFT: field asked -> runs (by)',
        'REFUSED: <the engine's words>' or 'NOT RESOLVED: <why>'."""
        if self.refused is not None:
            return f"REFUSED: {self.refused}"
        if self.unresolved is not None:
            return f"NOT RESOLVED: {self.unresolved}"
        r = self.resolved
        if not self.drift:
            return "as asked"
        what = [f"{o.field} {o.requested} -> {o.effective} (by {o.by})" for o in r.overrides]
        if r.serves_the_draft is False:
            answer = r.algorithm_answer or ("its is_dflash_family()" if r.draft_kind == "dflash" else "its is_eagle3()")
            what.append(f"{r.algorithm_field} {r.effective.get(r.algorithm_field)} is not {r.kind_named} "
                        f"({answer} is False)")
        return "DRIFT: " + "; ".join(what + self.lock_moved)

    def fix(self) -> str | None:
        """The engine-verified launch arguments that give what was asked, on a drift."""
        if not self.drift or not self.resolved.fixes:
            return None
        return f"serve with {shlex.join(self.resolved.fixes[0].argv)} (verified on this release)"


class ServingRow(_Row):
    """One release of the serving engine: what it feeds the draft and how that compares with training."""

    version: str = Field(description="The serving engine's release.")
    fc_input: list[str | None] | None = Field(default=None, description="The states it feeds the fc, in order "
                                              "(None: a slot it never captures).")
    requested_ids: list[int] | None = Field(default=None, description="The ids it reads from the draft config.")
    ids_source: str | None = Field(default=None, description="Where it read them.")
    capture_ids: list[int] | None = Field(default=None, description="The layer indices it captures at.")
    engine_errors: list[str] = Field(default_factory=list, description="What the engine raised or dropped.")
    error: str | None = Field(default=None, description="'cannot extract under sglang X: ...'.")
    internal_error: bool = Field(default=False, exclude_if=lambda v: not v,
                                 description="The error is a failure of parity's own code (InternalError): that "
                                 "row's, the other cells still answered; the command ends in exit 3.")
    verdicts: list[PairVerdict] = Field(default_factory=list, description="One per training contract.")
    launch: LaunchCell | None = Field(default=None, exclude_if=lambda v: v is None,
                                      description="With serve arguments: the launch result under this release.")
    changed: list[str] = Field(default_factory=list, description="What changed since the previous (older) release.")
    code_path: str | None = Field(default=None, description="The release's code that was run.")
    release_note: str | None = Field(default=None, exclude_if=lambda v: v is None,
                                     description="Set for a release parity has not verified: "
                                     "which family's adapter extracted it (Provenance.release_note).")

    @property
    def fix_text(self) -> str:
        return fix_text(self)

    def to_json(self) -> dict:
        return {**self.model_dump(mode="json"), "fix": fix_text(self, long=True)}


class Matrix(_Row):
    """One draft's contract under every installed release of both sides."""

    target: str = Field(description="The target's architecture.")
    num_layers: int = Field(description="Its decoder layers.")
    draft: str = Field(description="The draft directory.")
    dump_layout: list[str] = Field(description="What each dumped slot holds (a capturing trainer: empty).")
    trainer: str = Field(default=DEFAULT_TRAINER, description="The training stack of the training rows.")
    engine: str = Field(default=DEFAULT_ENGINE, description="The serving engine of the serving rows.")
    contract: str | None = Field(description="The lock file the cells are judged against, if any.")
    serve_args: list[str] | None = Field(default=None, description="The serve command's arguments each serving "
                                         "release resolved (--serve-args, or the lock's), if any.")
    training: list[TrainingRow] = Field(description="Speculators releases, oldest first.")
    serving: list[ServingRow] = Field(description="The serving engine's releases, oldest first.")
    wall_s: float = Field(default=0.0, description="Wall time of the whole matrix.")
    timings: list[dict] = Field(default_factory=list,
                                description="Each extraction task: what, start_s, seconds.")

    @property
    def ok(self) -> bool:
        return (all(r.error is None and not r.lock_drift for r in self.training)
                and all(r.error is None and r.verdicts and all(v.verdict is Verdict.parity for v in r.verdicts)
                        for r in self.serving))

    @property
    def internal_errors(self) -> list[str]:
        """The rows' failures of parity's own code (each that row's error), training rows first."""
        return [r.error for r in (*self.training, *self.serving) if r.internal_error and r.error]

    @property
    def serve_args_refused(self) -> bool:
        """No serving release resolved the serve arguments: each refused them or cannot resolve
        any (bad input or unsupported, not a verdict)."""
        return bool(self.serving) and all(r.launch is not None and r.launch.resolved is None for r in self.serving)

    def cell(self, engine_release: str, trainer_release: str | None = None) -> tuple[ServingRow, PairVerdict | None]:
        row = next(r for r in self.serving if r.version == engine_release)
        if trainer_release is None or self.contract:
            return row, (row.verdicts[0] if row.verdicts else None)
        return row, next((v for v in row.verdicts if v.against == f"{self.trainer} {trainer_release}"), None)

    def to_json_dict(self) -> dict[str, Any]:
        return {"target": self.target, "num_hidden_layers": self.num_layers, "draft": self.draft,
                "dump_layout": self.dump_layout, **({"trainer": self.trainer} if self.trainer != DEFAULT_TRAINER else {}),
                **({"engine": self.engine} if self.engine != DEFAULT_ENGINE else {}),
                "contract": self.contract, **({"serve_args": self.serve_args} if self.serve_args is not None else {}),
                "ok": self.ok,
                "wall_s": round(self.wall_s, 1), "timings": self.timings,
                "training": [r.to_json() for r in self.training],
                "serving": [r.to_json() for r in self.serving]}


def fc_text(fc: list | None) -> str:
    """An fc input as the tables print it: '[h0, h3, h31]', '<none>' for a slot never captured."""
    return "-" if fc is None else "[" + ", ".join(x or "<none>" for x in fc) + "]"


def fix_text(row: ServingRow, long: bool = False) -> str:
    """The fix the gate found on this release, per training contract (one text when all agree)."""
    if row.error or not row.verdicts:  # no verdict: a release that refused the serve arguments
        return "-"
    texts = []
    for v in row.verdicts:
        if v.verdict is Verdict.parity:
            t = "none needed"
        elif v.fix is None and not v.unfixable and row.launch is not None and row.launch.drift:
            t = "see launch"  # the serve command drifts, not the ids: its fix is the launch line's
        elif v.fix is not None:
            t = f"write {v.fix}" + ("" if v.fix_verified else " (unverified)")
        elif v.verdict is Verdict.error:
            t = "-"
        else:
            t = f"none: {v.unfixable or 'no fix found'}" if long else "none on this release"
        texts.append(t)
    uniq = list(dict.fromkeys(texts))
    return uniq[0] if len(uniq) == 1 else "; ".join(f"{v.against}: {t}" for v, t in zip(row.verdicts, texts))
