"""The gate: the verdict (parity.verdict) with every fix parity offers, each verified on the
installed engine: the id list to write, or, for a speculators-format draft the engine cannot
load as written, what `parity export` would make of it (found by running export's own gate).

This is what `parity check`, lock checks, the pytest plugin and the matrix call.
"""

from __future__ import annotations

from .contract import TrainingContract
from .export import ExportRefused, is_exportable, plan_export
from .extract.candidates import candidate_id_lists
from .extract.engines import BoundEngine
from .inputs import Draft, Target
from .verdict import (CheckResult, Difference, ExportAdvice, Suggestion, Verdict, decide,
                      unloadable)
from .verdict import check as check_verdict


def check(training: TrainingContract, target: Target, draft: Draft,
          engine: BoundEngine | None = None, verify: bool = True, *,
          retrained: TrainingContract | None = None, serve_args: tuple[str, ...] | None = None) -> CheckResult:
    """parity.verdict.check, with export's advice when the engine cannot load the draft as written.
    `engine`: the serving engine bound to its release (default: the default engine, installed);
    `retrained`: checking a lock, the training contract extracted today (see `decide`);
    `serve_args`: the serve command's arguments (the launch contract)."""
    result = check_verdict(training, target, draft, engine, verify, retrained=retrained, serve_args=serve_args)
    if result.verdict is Verdict.unservable and unloadable(result.serving):
        advice = _export_advice(training, target, draft, engine, verify)
        result = result.model_copy(update={"export": advice})
    return result


def _export_advice(training: TrainingContract, target: Target, draft: Draft, engine: BoundEngine | None,
                   verify: bool) -> ExportAdvice | None:
    """What `parity export` would make of an unloadable draft, by running export's own gate
    (nothing is written). None when the draft is not one export takes, or without --verify."""
    if not verify or not is_exportable(draft.config):
        return None
    try:
        ids, result = plan_export(draft, training, target, engine)
    except ExportRefused as exc:
        return ExportAdvice(exportable=False, reason=exc.reason)
    return ExportAdvice(exportable=True, eagle_aux_hidden_state_layer_ids=list(ids),
                        serving_fc_input=[t.name if t else None for t in result.serving.fc_input])


__all__ = ["CheckResult", "Difference", "ExportAdvice", "Suggestion", "Verdict", "candidate_id_lists",
           "check", "decide"]
