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

from ... import layout


def run(adapter, plan: layout.Plan, port: int, target_dir: str, speculative: dict, input_ids,
        id_lists: list[list[int]], runner: str) -> list[dict]:
    """Every rank's record (rank_job's), in rank order (layout.run_ranks)."""
    def job(rank: int) -> dict:
        return rank_job(adapter, rank, plan, port, target_dir, speculative, input_ids, id_lists, runner)

    return layout.run_ranks(plan.ranks, job, stops=layout.stops)


def rank_job(adapter, rank: int, plan: layout.Plan, port: int, target_dir: str, speculative: dict, input_ids,
             id_lists: list[list[int]], runner: str) -> dict:
    """One rank's part: per run (first the start-up of `runner`, then each id list of `id_lists`)
    the capture it set and what its stage's forward handed on (the last stage: the aux states).
    The start-up refusing (vLLM's own check) ends the rank: a server would not start; an error
    of a later run is recorded and the forward still runs, so that no peer waits forever."""
    def setup():
        adapter.setup_rank(rank, plan.tp, plan.pp)
        vllm_config = adapter.config(target_dir, speculative, port)
        return adapter.build_target(vllm_config), vllm_config

    def configure(built, n: int) -> None:
        model, vllm_config = built
        if n == 0:
            adapter.set_capture(model, vllm_config, runner)
        else:
            adapter.set_ids(model, id_lists[n - 1])

    def forward(built):
        aux = adapter.stage_forward(built[0], built[1], input_ids)
        return None if aux is None else [a.detach().clone() for a in aux]

    return layout.lockstep(1 + len(id_lists), setup, configure, lambda built: adapter.stage(built[0]), forward,
                           start_refuses=True)


__all__ = ["rank_job", "run"]
