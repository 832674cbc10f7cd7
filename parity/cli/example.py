"""`parity example`: `parity check` on the bundled drift case (the Kimi-K2.5 draft)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .check import add_check_parser, run_check
from .common import UsageError
from ..envs import load_specs
from ..extract import engines, trainers
from ..extract.installed import installed_release
from ..home import shipped

# The bundled example: the case this project was born from (README, "The bundled example").
EXAMPLE_TARGET = ("fixtures", "targets", "kimi-k2.5", "config.json")
EXAMPLE_DRAFT = ("fixtures", "drafts", "kimi-k2.5-eagle3")
EXAMPLE_DUMP = "h0,h3,h31,h59"


def add_example_parser(sub):
    eg = sub.add_parser("example", help="run `parity check` on the bundled drift case (the Kimi-K2.5 draft); "
                        "exit 1: it drifts")
    eg.add_argument("--no-verify", action="store_true",
                    help="skip the second extraction that confirms the suggested fix")
    eg.add_argument("--json", action="store_true")
    return eg


def needs_installed() -> None:
    """The example runs the default engine and trainer installed here: one line saying what to
    install when one is not (the releases the example was made with, envs.toml's main pins)."""
    sides = [engines.engine(), trainers.trainer()]
    missing = [s.distribution for s in sides if installed_release(s.distribution) is None]
    if missing:
        pins = load_specs().get("main", {}).get("no_deps", [])
        wanted = [next((p for p in pins if p.split("==")[0] == name), name) for name in missing]
        raise UsageError(f"parity example runs the {' and '.join(s.distribution for s in sides)} installed here, and "
                         f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed in "
                         f"{sys.executable}: install {'it' if len(missing) == 1 else 'them'} "
                         f"(pip install {' '.join(wanted)}, the release{'s' if len(wanted) > 1 else ''} it was made "
                         "with)")


def run_example(args) -> int:
    """`parity check` on the bundled example, wherever parity is installed; its paths are shown
    relative to the working directory when they are inside it (`./dev example` in a checkout)."""

    def shown(path: Path) -> str:
        rel = os.path.relpath(path)
        return str(path) if rel.startswith(os.pardir) else rel

    needs_installed()
    argv = ["check", "--target-config", shown(shipped(*EXAMPLE_TARGET)),
            "--draft", shown(shipped(*EXAMPLE_DRAFT)), "--dump-layout", EXAMPLE_DUMP]
    argv += ["--no-verify"] * args.no_verify + ["--json"] * args.json
    parser = argparse.ArgumentParser(prog="parity")
    add_check_parser(parser.add_subparsers(dest="command"))
    return run_check(parser.parse_args(argv))
