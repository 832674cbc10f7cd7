"""Injected: the release's ModelRunner.initialize no longer holds the statement that reads the
draft's aux ids and sets the capture (as if it had moved to a method of its own, as it did in
0.5.8).

Run as `python -m tests.drift.serving_moved_initialize_statement` under SGLang 0.5.7's
environment in place of the serving probe; the adapter must fail loudly, naming what it
looked for."""

from parity.extract import standins

standins.install()

from parity.extract.engines.sglang.families.v0_5_7 import Adapter  # noqa: E402

Adapter().before_engine_imports()

from sglang.srt.model_executor.model_runner import ModelRunner  # noqa: E402

from parity.extract.engines.sglang import probe  # noqa: E402


def _initialize_without_the_statement(self, min_per_gpu_memory: float):
    return None


ModelRunner.initialize = _initialize_without_the_statement

if __name__ == "__main__":
    raise SystemExit(probe.main())
