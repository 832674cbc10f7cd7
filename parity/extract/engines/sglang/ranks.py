"""SGLang's capture under a parallel layout: one CPU process per rank (parity.extract.layout), each
running the release's own code for its part (docs/launch.md, "The parallel layout").

Each rank, forked by the probe before the probe starts any process group: its place published in
the server args (`tp_size`, `pp_size`, `SpawnRanks(world_rank=...)`) and the groups made by
SGLang's own `init_distributed_environment` / `initialize_model_parallel` over gloo (the family
adapter's `setup_rank`); the ids resolved by the start-up's own resolver on that rank; the target
built by its own class, whose decoder takes its stage's layers from the engine's own partition
(`make_pp_layers`); the checkpoint loaded through its `load_weights`; the capture set by the
start-up's own call (`configure_aux_hidden_state_capture` -> `set_eagle3_layers_to_capture`, with
whatever rank guard the release has); one EXTEND forward per id list, each stage handing its
proxy tensors on as the scheduler does (`stage_forward`). The states that reach the draft are
what the last stage's output hands it; the probe names them numerically, as in one process.
"""

from __future__ import annotations

from typing import Any

from ... import layout
from ...child import harness_limit, one_line, parity_fault


def run(adapter, plan: layout.Plan, port: int, target_dir: str, draft_dir: str | None, tensors: dict,
        input_ids, id_lists: list[list[int]]) -> list[dict]:
    """Every rank's record (rank_job's), in rank order; a rank that raised past its own handlers
    or was lost is {"error"/"lost": ...} (layout.run_ranks)."""
    def job(rank: int) -> dict:
        return rank_job(adapter, rank, plan, port, target_dir, draft_dir, tensors, input_ids, id_lists)

    return layout.run_ranks(plan.ranks, job, stops=lambda record: bool(record.get("fatal") or record.get("stopped")))


def rank_job(adapter, rank: int, plan: layout.Plan, port: int, target_dir: str, draft_dir: str | None,
             tensors: dict, input_ids, id_lists: list[list[int]]) -> dict[str, Any]:
    """One rank's part: its stage, and per run (first the ids the start-up resolves, then each id
    list of `id_lists`) the capture it set and what its stage's forward handed on (the last
    stage: the aux states, a tensor). An engine error while setting a capture is recorded and the
    forward still runs (every rank runs every forward, so no peer waits forever)."""
    record: dict[str, Any] = {"rank": rank, "runs": []}
    try:
        adapter.setup_rank(port, draft_dir, rank, plan.tp, plan.pp, timeout=int(layout.RANK_TIMEOUT))
        config = adapter.model_config(target_dir)
        use_aux, ids = adapter.resolve_aux_ids(config)
        model = adapter.build_target(config)
        adapter.load_weights(model, tensors)
    except Exception as exc:  # noqa: BLE001 - judged by the probe (the engine's, parity's limit or its bug)
        record["fatal"] = _judged(exc)
        return record
    for n, wanted in enumerate([None, *id_lists]):
        run: dict[str, Any] = {}
        try:
            if n == 0:
                adapter.configure_capture(model, use_aux, ids)
            else:
                adapter.configure_capture(model, True, wanted)
        except Exception as exc:  # noqa: BLE001 - the engine's, judged by the probe
            run["configure_error"] = _judged(exc)
        run["stage"] = adapter.stage(model)
        try:
            run["aux"] = adapter.stage_forward(model, input_ids)
        except Exception as exc:  # noqa: BLE001
            run["forward_error"] = _judged(exc)
            if not run["stage"]["is_last"]:  # the stages after it wait for what it never sends
                record["runs"].append(run)
                record["stopped"] = True
                return record
        record["runs"].append(run)
        layout.keep(record)  # what the probe reads of this rank if a peer's failure stops it later
    record["stage"] = adapter.stage(model)
    return record  # the groups end with the process (os._exit: gloo's teardown can hang)


def _judged(exc: BaseException) -> dict[str, Any]:
    """An error of a rank, with what the probe needs to judge it in its own process: its one line,
    and whether it is a limit of parity's CPU harness or a failure of parity's own code."""
    return {"line": one_line(exc), "limit": harness_limit(exc), "fault": parity_fault(exc),
            "type": type(exc).__name__}


__all__ = ["rank_job", "run"]
