"""Injected: the probe does not look for loaded parameters the engine's forward never reads
(cpu_path.unread_parameters answers none).

Run as `python -m tests.drift.serving_unread_parameters_unchecked` under SGLang 0.5.10's
environment in place of the serving probe, with parity's MoE stand-in left out
(serving_no_moe_standin): gpt-oss's captured states, computed by that release's non-CUDA MoE
without the experts' biases, are then only states parity could not name
(`unidentified_state`), not the engine's own non-CUDA forward named as what it is."""

from parity.extract.engines.sglang import cpu_path, probe

from tests.drift import serving_no_moe_standin  # noqa: F401  (the non-CUDA MoE as shipped: biases unread)

cpu_path.unread_parameters = lambda forward, model: []

if __name__ == "__main__":
    raise SystemExit(probe.main())
