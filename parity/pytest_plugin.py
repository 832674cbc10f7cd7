"""pytest plugin (registered through the `pytest11` entry point): the `parity` marker.

A thin shell over the library: it registers the marker and options; the gate's
generated tests are added by parity.gate (see that module)."""

from __future__ import annotations


def pytest_configure(config):
    config.addinivalue_line("markers", "parity: train/serve parity checks (select with -m parity)")
    config.addinivalue_line("markers", "gpu: needs CUDA; skipped without it")
