"""Wires the parity pytest plugin into this checkout.

The plugin is registered by the installed package (the `pytest11` entry point named
`parity`); this only loads it when running from a source tree where it is not installed.
"""

from importlib import metadata

_installed = any(ep.name == "parity" for ep in metadata.entry_points(group="pytest11"))
pytest_plugins = [] if _installed else ["parity.pytest_plugin"]
