"""From what the extractions returned to the matrix's rows: each cell decided by the gate."""

from __future__ import annotations

from ..contract import FindingKind, LaunchContract, TrainingContract, diff
from ..errors import CannotExtract, InternalError
from ..inputs import LaunchRefused
from ..lock import launch_moved
from ..releases import Release
from .changes import mark_changes
from .rows import CANNOT, LaunchCell, PairVerdict, ServingRow, TrainingRow
from .schedule import Extractions, message_line
from ..gate import Verdict, decide


def matrix_rows(trainer_releases: list[Release], engine_releases: list[Release], extractions: Extractions,
                locked: TrainingContract | None, locked_launch: LaunchContract | None = None
                ) -> tuple[list[TrainingRow], list[ServingRow]]:
    """Every row, oldest release first, with what changed since the release above marked.
    Serving is judged against the lock's training contract, or each trainer release's, and
    (`locked_launch`) the launch contract the lock's serve arguments resolved to."""
    training = [training_row(r.version, extractions.training[r.version], locked) for r in trainer_releases]
    names = {r.version: r.package for r in trainer_releases}  # the trainer: speculators, or e.g. specforge
    against = ([("lock", locked, None)] if locked is not None else
               [(f"{names[row.version]} {row.version}", row.contract, row.error) for row in training])
    serving = [serving_row(r, against, extractions, locked_launch) for r in engine_releases]
    mark_changes(training, serving)
    return training, serving


# Error findings a serving row lists under itself: what the engine raised, dropped, could not
# name, or (vLLM) its two model runners disagree on.
ENGINE_ERRORS = (FindingKind.engine_error, FindingKind.not_captured, FindingKind.unidentified_state,
                 FindingKind.runners_differ)


def training_row(version: str, extracted: TrainingContract | str | InternalError,
                 locked: TrainingContract | None) -> TrainingRow:
    """One trainer release's row; against a lock, how its contract differs from the lock's."""
    if isinstance(extracted, InternalError):
        return TrainingRow(version=version, error=message_line(extracted), internal_error=True)
    if isinstance(extracted, str):
        return TrainingRow(version=version, error=extracted)
    row = TrainingRow(version=version, contract=extracted, fc_input=[t.name for t in extracted.fc_input],
                      target=extracted.target.name, code_path=extracted.provenance.code_path,
                      release_note=extracted.provenance.release_note)
    if locked is not None:
        moved = diff(locked, extracted)
        row.lock_drift = [f"slot {s.slot}: lock {s.expected.name if s.expected else '-'}, now "
                          f"{s.actual.name if s.actual else '-'} ({s.why})" for s in moved.mismatched_slots]
        row.lock_drift += [f"{f.field}: lock {f.expected}, now {f.actual}" for f in moved.fields]
    return row


def serving_row(release: Release, against: list[tuple[str, TrainingContract | None, str | None]],
                extractions: Extractions, locked_launch: LaunchContract | None = None) -> ServingRow:
    """One SGLang release's row: its verdict against each (name, training contract, why there
    is none) and, from its first check, what it feeds and how it resolves the serve arguments.
    A release that refuses them (or cannot resolve any) has that launch cell and no verdict."""
    if release.problem:
        return ServingRow(version=release.version, error=serving_error(release))
    row, first = ServingRow(version=release.version), None
    for name, training, training_error in against:
        if training is None:  # that training release could not be extracted
            row.verdicts.append(PairVerdict(against=name, verdict="error",
                                            differences=[training_error or "no training contract"]))
            continue
        result, exc = extractions.check(release.version, training)
        if isinstance(exc, LaunchRefused):  # bad input under this release, in its own words: no verdict
            words = message_line(exc)
            return ServingRow(version=release.version, launch=LaunchCell(**{
                "unresolved" if exc.unresolved else "refused": words}))
        error = serving_error(release, result, exc)
        if error:
            return ServingRow(version=release.version, error=error, internal_error=isinstance(exc, InternalError))
        first = first or result
        moved = launch_moved(locked_launch, result.serving.launch)
        row.verdicts.append(pair_verdict(result, training, name, moved))
    if first is not None:
        s = first.serving
        row.fc_input = [t.name if t else None for t in s.fc_input]
        row.requested_ids = list(s.requested_ids) if s.requested_ids is not None else None
        row.ids_source, row.code_path = s.ids_source, s.provenance.code_path
        row.release_note = s.provenance.release_note
        row.capture_ids = list(s.capture_ids) if s.capture_ids is not None else None
        row.engine_errors = [f.message for f in s.findings
                             if f.severity == "error" and f.kind in ENGINE_ERRORS]
        if s.launch is not None:
            row.launch = LaunchCell(resolved=s.launch,
                                    lock_moved=[d.message for d in launch_moved(locked_launch, s.launch)])
    return row


def pair_verdict(result, training: TrainingContract, against: str, moved: list | None = None) -> PairVerdict:
    """The gate's decision for `training` from a check run against an equivalent contract;
    `moved`: the launch fields resolved otherwise than the lock recorded (lock.launch_moved)."""

    verdict, _, diffs, unservable = decide(training, result.serving)
    launch_only = all(x.kind == "launch" for x in diffs)  # `moved` are launch fields too
    if moved:
        diffs = [*diffs, *moved]
        verdict = Verdict.drift if verdict is Verdict.parity else verdict
    s = result.suggestion
    bad = verdict is not Verdict.parity
    return PairVerdict(against=against, verdict=verdict,
                       differences=[unservable] if unservable else [x.message for x in diffs],
                       fix=list(s.eagle_aux_hidden_state_layer_ids) if s and bad else None,
                       fix_key=s.config_key if s and bad else None,
                       fix_verified=bool(s and s.verified),
                       launch_only=bad and not unservable and launch_only,
                       unfixable=(unservable or result.unfixable) if bad else None)


def serving_error(release: Release, result=None, exc: BaseException | None = None) -> str | None:
    """Why `release` gave no serving contract ('cannot extract under sglang X: ...'), or None."""
    if release.problem:
        return f"{CANNOT} {release.package} {release.version}: {release.problem}"
    if isinstance(exc, CannotExtract | InternalError):  # each names the release in its own words
        return message_line(exc)
    if exc is not None:
        return f"{CANNOT} {release.package} {release.version}: {message_line(exc)}"
    found = result.serving.provenance.version
    if found != release.version:
        return (f"{CANNOT} {release.package} {release.version}: its environment ran {release.package} {found} "
                f"(looked for {release.version})")
    return None
