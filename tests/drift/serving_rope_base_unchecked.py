"""Injected: the serving probe no longer compares the engine's rotary bases with the config's rope
theta (rope_base.misread answers None), as before parity named SGLang 0.5.6.post1's own misread.

Run as `python -m tests.drift.serving_rope_base_unchecked` under an SGLang environment in place
of the serving probe: the states 0.5.6.post1 captures then read as unidentified only, a state
parity cannot name (the table's "parity cannot run it"), not the engine's own model."""

from parity.extract.engines.sglang import probe, rope_base

rope_base.misread = lambda *args, **kwargs: None

if __name__ == "__main__":
    raise SystemExit(probe.main())
