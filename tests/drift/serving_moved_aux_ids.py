"""Injected: the release's ModelRunner.__init__ no longer reads the draft's aux ids inline
(as if the reading had moved to another module, as it did in later releases).

Run as `python -m tests.drift.serving_moved_aux_ids` under an older release's environment
in place of the serving probe; the adapter must fail loudly, naming what it looked for."""

from parity.extract import standins

standins.install()

from parity.extract.engines.sglang.concerns.process import give_standin_interpolation_modes  # noqa: E402

give_standin_interpolation_modes()

from sglang.srt.model_executor.model_runner import ModelRunner  # noqa: E402

from parity.extract.engines.sglang import probe  # noqa: E402

_orig = ModelRunner.__init__


def _moved_init(self, *args, **kwargs):
    return _orig(self, *args, **kwargs)


ModelRunner.__init__ = _moved_init

if __name__ == "__main__":
    raise SystemExit(probe.main())
