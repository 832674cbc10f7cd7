"""`parity example`: `parity check` on the bundled drift case (the Kimi-K2.5 draft)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .check import add_check_parser, run_check
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


def run_example(args) -> int:
    """`parity check` on the bundled example, wherever parity is installed; its paths are shown
    relative to the working directory when they are inside it (`./dev example` in a checkout)."""

    def shown(path: Path) -> str:
        rel = os.path.relpath(path)
        return str(path) if rel.startswith(os.pardir) else rel

    argv = ["check", "--target-config", shown(shipped(*EXAMPLE_TARGET)),
            "--draft", shown(shipped(*EXAMPLE_DRAFT)), "--dump-layout", EXAMPLE_DUMP]
    argv += ["--no-verify"] * args.no_verify + ["--json"] * args.json
    parser = argparse.ArgumentParser(prog="parity")
    add_check_parser(parser.add_subparsers(dest="command"))
    return run_check(parser.parse_args(argv))
