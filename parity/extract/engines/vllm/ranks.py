"""vLLM's capture under a parallel layout: one CPU process per rank (parity.extract.layout), each
running the release's own code for its part (docs/launch.md, "The parallel layout").

Each rank, forked by the probe before the probe starts any process group: the VllmConfig with the
ParallelConfig of the layout and the groups made by vLLM's own `init_distributed_environment` /
`initialize_model_parallel` over gloo (the family adapter's `setup_rank`, then `config`); the target
built by its loader, whose model takes its stage's layers from vLLM's own partition; V2's start-up
(`set_eagle3_aux_hidden_state_layers(model, spec, use_pp)`: under pipeline parallelism it asks the
model whether it carries aux states over stages, `verify_supports_aux_hidden_states_over_pp`, and
refuses one that does not, in vLLM's words); one prefill per id list, each stage's intermediate
tensors passed on as vLLM's worker and runner pass them (`stage_forward`). The states that reach
the draft are what the last stage hands it; the probe names them numerically, as in one process.
"""

from __future__ import annotations

from typing import Any

from ... import layout
from ...child import harness_limit, one_line, parity_fault


def run(adapter, plan: layout.Plan, port: int, target_dir: str, speculative: dict, input_ids,
        id_lists: list[list[int]], runner: str) -> list[dict]:
    """Every rank's record (rank_job's), in rank order (layout.run_ranks)."""
    def job(rank: int) -> dict:
        return rank_job(adapter, rank, plan, port, target_dir, speculative, input_ids, id_lists, runner)

    return layout.run_ranks(plan.ranks, job, stops=lambda record: bool(record.get("fatal") or record.get("stopped")
                                                                       or record.get("refused")))


def rank_job(adapter, rank: int, plan: layout.Plan, port: int, target_dir: str, speculative: dict, input_ids,
             id_lists: list[list[int]], runner: str) -> dict[str, Any]:
    """One rank's part: per run (first the start-up of `runner`, then each id list of `id_lists`)
    the capture it set and what its stage's forward handed on (the last stage: the aux states).
    The start-up refusing (vLLM's own check) ends the rank: a server would not start; an error
    of a later run is recorded and the forward still runs, so that no peer waits forever."""
    record: dict[str, Any] = {"rank": rank, "runs": []}
    try:
        adapter.setup_rank(rank, plan.tp, plan.pp)
        vllm_config = adapter.config(target_dir, speculative, port)
        model = adapter.build_target(vllm_config)
    except Exception as exc:  # noqa: BLE001 - judged by the probe (the engine's, parity's limit or its bug)
        record["fatal"] = _judged(exc)
        return record
    for n, wanted in enumerate([None, *id_lists]):
        run: dict[str, Any] = {}
        try:
            if n == 0:
                adapter.set_capture(model, vllm_config, runner)
            else:
                adapter.set_ids(model, wanted)
        except Exception as exc:  # noqa: BLE001 - the engine's, judged by the probe
            run["configure_error"] = _judged(exc)
            if n == 0:  # the start-up refuses: no server starts, so nothing is served
                run["stage"] = adapter.stage(model)
                record["runs"].append(run)
                record["refused"] = True
                return record
        run["stage"] = adapter.stage(model)
        try:
            aux = adapter.stage_forward(model, vllm_config, input_ids)
            run["aux"] = None if aux is None else [a.detach().clone() for a in aux]
        except Exception as exc:  # noqa: BLE001
            run["forward_error"] = _judged(exc)
            if not run["stage"]["is_last"]:  # the stages after it wait for what it never sends
                record["runs"].append(run)
                record["stopped"] = True
                return record
        record["runs"].append(run)
        layout.keep(record)  # what the probe reads of this rank if a peer's failure stops it later
    return record  # the groups end with the process (os._exit: gloo's teardown can hang)


def _judged(exc: BaseException) -> dict[str, Any]:
    """An error of a rank, with what the probe needs to judge it in its own process."""
    return {"line": one_line(exc), "limit": harness_limit(exc), "fault": parity_fault(exc),
            "type": type(exc).__name__}


__all__ = ["rank_job", "run"]
