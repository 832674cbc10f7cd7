"""Injected: parity's guard on vLLM's gated-delta-net layers is not installed (gdn_guard.install
replaces nothing), so a Qwen3-Next target's GDN layers run vLLM's CPU path as shipped, whose core
op has no CPU body in the official wheel and leaves the layer's output unset.

Run as `python -m tests.drift.vllm_no_gdn_guard` in place of the vLLM probe: the captured states
then match no state of the model (unidentified), which is what the guard turns into a limit of
parity's CPU run."""

from parity.extract.engines.vllm import gdn_guard, probe

gdn_guard.install = lambda: []

if __name__ == "__main__":
    raise SystemExit(probe.main())
