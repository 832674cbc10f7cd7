"""Locked contracts: a snapshot of what a draft was trained on, checked against both sides.

A lock file (`contracts/NAME.json`) records the inputs (target config, served draft, dump
layout) and the training contract as extracted when it was written. `check_lock` extracts
BOTH sides afresh from the installed versions: the training contract must still equal
the lock (a speculators bump that changes the data path fails here), and the serving
contract must equal it too (an SGLang bump that changes the capture fails here).
`parity lock --update` rewrites the snapshot, like a snapshot test.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from .contract import TrainingContract, diff, parse_taps
from .contract.diff import ContractDiff
from .gate import CheckResult, Difference, check
from .inputs import InputError, read_config, target_model

LOCK_VERSION = 1


class Lock(BaseModel):
    """What a lock file holds. Paths are relative to the lock file's directory."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    parity_lock: int = Field(LOCK_VERSION, description="Lock format version.")
    name: str = Field(description="A name for the draft/target pair.")
    target_config: str = Field(description="The target's config.json, relative to this file.")
    draft: str = Field(description="The draft directory as it is served, relative to this file.")
    dump_layout: list[str] = Field(description="Which state each dumped slot holds.")
    engine: str = Field("sglang", description="The serving engine checked against.")
    training: TrainingContract = Field(description="The training contract when the lock was written.")

    def resolve(self, base: Path, rel: str) -> Path:
        return (base / rel).resolve()


def extract_for_lock(target_config: Path, draft: Path, layout: list[str],
                     speculators_version: str | None = None, **probe) -> TrainingContract:
    from .extract.training import extract_training

    return extract_training(target_model(target_config), parse_taps(",".join(layout)),
                            draft_dir=draft, speculators_version=speculators_version, **probe)


def write_lock(path: Path, name: str, target_config: Path, draft: Path, layout: list[str]) -> Lock:
    path = Path(path)
    base = path.parent.resolve()
    training = extract_for_lock(target_config, draft, layout)
    lock = Lock(name=name, target_config=_rel(target_config, base), draft=_rel(draft, base),
                dump_layout=layout, training=training)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(lock.model_dump_json(indent=2) + "\n")
    return lock


def _rel(p: Path, base: Path) -> str:
    import os

    return os.path.relpath(Path(p).resolve(), base)


def read_lock(path: Path) -> Lock:
    data = read_config(Path(path), "locked contract")
    try:
        return Lock.model_validate(data)
    except Exception as exc:
        first = str(exc).splitlines()
        raise InputError(f"locked contract {path}: not a parity lock ({' '.join(first[:3])})") from None


def training_drift(locked: TrainingContract, fresh: TrainingContract) -> ContractDiff:
    return diff(locked, fresh)


def check_lock(path: Path, sglang_version: str | None = None,
               speculators_version: str | None = None, verify: bool = True,
               training_probe: str | None = None, serving_probe: str | None = None) -> CheckResult:
    """Both sides, freshly extracted, against the lock; the training drift joins the differences.

    `training_probe`/`serving_probe` swap the probe modules (tests inject drift with them)."""
    path = Path(path)
    lock = read_lock(path)
    base = path.parent.resolve()
    target, draft = lock.resolve(base, lock.target_config), lock.resolve(base, lock.draft)
    fresh = extract_for_lock(target, draft, lock.dump_layout, speculators_version,
                             **({"probe_module": training_probe} if training_probe else {}))
    result = check(lock.training, target, draft, sglang_version=sglang_version, verify=verify,
                   serving_probe=serving_probe)
    moved = training_drift(lock.training, fresh)
    if moved.empty:
        return result
    extra = [Difference(kind="lock", where="training", training=s.expected and s.expected.name,
                        serving=s.actual and s.actual.name,
                        message=f"the installed speculators {fresh.provenance.version} now trains slot "
                                f"{s.slot} on {s.actual.name if s.actual else 'nothing'}, the lock says "
                                f"{s.expected.name if s.expected else 'nothing'} ({s.why})")
             for s in moved.mismatched_slots]
    extra += [Difference(kind="lock", where=f.field, training=f.expected, serving=f.actual,
                         message=f"training {f.field} changed since the lock: {f.expected} -> {f.actual}")
              for f in moved.fields]
    return result.model_copy(update={"verdict": "drift", "differences": result.differences + extra})
