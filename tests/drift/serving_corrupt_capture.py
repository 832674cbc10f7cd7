"""Injected drift: the capture hands over a different tensor (the state scaled by 0.5).

Run as `python -m tests.drift.serving_corrupt_capture` in place of the serving probe."""

from parity.extract import standins

standins.install()

from sglang.srt.layers.aux_hidden_states import AuxHiddenStateList  # noqa: E402

from parity.extract.engines.sglang import probe  # noqa: E402

_orig = AuxHiddenStateList.capture


def _capture_scaled(self, hidden, *, owned=False):
    # Corrupt what is captured (scaled), as a capture that took the wrong tensor would.
    _orig(self, hidden * 0.5, owned=False)


AuxHiddenStateList.capture = _capture_scaled

if __name__ == "__main__":
    raise SystemExit(probe.main())
