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

from ... import layout


def run(adapter, plan: layout.Plan, port: int, target_dir: str, draft_dir: str | None, tensors: dict,
        input_ids, id_lists: list[list[int]]) -> list[dict]:
    """Every rank's record (rank_job's), in rank order; a rank that raised past its own handlers
    or was lost is {"error"/"lost": ...} (layout.run_ranks)."""
    def job(rank: int) -> dict:
        return rank_job(adapter, rank, plan, port, target_dir, draft_dir, tensors, input_ids, id_lists)

    return layout.run_ranks(plan.ranks, job, stops=layout.stops)


def rank_job(adapter, rank: int, plan: layout.Plan, port: int, target_dir: str, draft_dir: str | None,
             tensors: dict, input_ids, id_lists: list[list[int]]) -> dict:
    """One rank's part: its stage, and per run (first the ids the start-up resolves, then each id
    list of `id_lists`) the capture it set and what its stage's forward handed on (the last
    stage: the aux states, a tensor). An engine error while setting a capture is recorded and the
    forward still runs (every rank runs every forward, so no peer waits forever)."""
    def setup():
        adapter.setup_rank(port, draft_dir, rank, plan.tp, plan.pp, timeout=int(layout.RANK_TIMEOUT))
        config = adapter.model_config(target_dir)
        use_aux, ids = adapter.resolve_aux_ids(config)
        model = adapter.build_target(config)
        adapter.load_weights(model, tensors)
        return model, use_aux, ids

    def configure(built, n: int) -> None:
        model, use_aux, ids = built
        adapter.configure_capture(model, *((use_aux, ids) if n == 0 else (True, id_lists[n - 1])))

    return layout.lockstep(1 + len(id_lists), setup, configure, lambda built: adapter.stage(built[0]),
                           lambda built: adapter.stage_forward(built[0], input_ids))


__all__ = ["rank_job", "run"]
