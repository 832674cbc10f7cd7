"""Injected: the serving probe's reference model (transformers', seeded) refuses to be built.

Run as `python -m tests.drift.serving_reference_refused` in place of the serving probe. A
target the engine's own model class cannot build must be refused by that class, before any
reference model is built: with transformers' defaults for every width a trimmed config leaves
out, the reference can take minutes (or all the memory) before the engine's error is seen."""

from parity.extract.engines.sglang import probe


def _refused(*args, **kwargs):
    raise RuntimeError("tests.drift.serving_reference_refused: the reference model was built "
                       "before the engine's own model")


probe.seeded_hf_model = _refused

if __name__ == "__main__":
    raise SystemExit(probe.main())
