"""The `parity` command line."""

from __future__ import annotations

import argparse
import sys
from importlib import metadata

from . import __version__


def _installed(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def version_text() -> str:
    parts = [f"parity {__version__}"]
    parts += [f"{p} {_installed(p)}" for p in ("sglang", "speculators", "torch", "transformers")]
    return "\n".join(parts)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="parity", description=__doc__)
    p.add_argument("--version", action="version", version=version_text())
    p.add_subparsers(dest="command")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    return 0
