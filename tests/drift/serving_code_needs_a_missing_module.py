"""Injected: the installed SGLang's code paths import a module this environment lacks (as
SGLang 0.4.x's do through compressed-tensors, which needs a newer transformers than they pin).

Run as `python -m tests.drift.serving_code_needs_a_missing_module` in place of the serving
probe: the extraction must be refused in one line naming the module, never crash."""

from parity.extract.engines.sglang import probe
from parity.extract.engines.sglang.families import v0_5_23


def _check_code_paths(self) -> None:
    import parity_test_module_that_is_not_installed  # noqa: F401


v0_5_23.Adapter.check_code_paths = _check_code_paths

if __name__ == "__main__":
    raise SystemExit(probe.main())
