"""The `parity` command line: the parser assembled from one module per command (check, contract,
lock, export, matrix and can-i-deploy, forward, replay, sweep, example, setup/schema/conventions),
and the dispatch every exit path goes through.

Exit codes: 0 parity (or success), 1 drift, 2 bad input or an unsupported case,
3 an internal error in parity itself (a bug: please report it).
Every error is one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from importlib import metadata

from .. import __version__
from ..errors import ExitCode, Terminated, UserError, forget_interrupt, no_addresses, on_sigterm
from ..extract import engines, trainers
from ..extract.installed import where
from .check import add_check_parser, run_check
from .common import UsageError, add_dump_args
from .contract import add_contract_parser
from .example import EXAMPLE_DRAFT, EXAMPLE_DUMP, EXAMPLE_TARGET, add_example_parser, run_example
from .export import add_export_parser, run_export
from .forward import add_forward_parser, run_forward
from .info import add_info_parsers
from .lock import add_lock_parser, run_lock
from .matrix import add_matrix_parsers
from .replay import add_replay_parser, run_replay
from .sweep import add_sweep_parser, run_sweep
from ..workspace import workspace


def _installed(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def version_text() -> str:
    """parity's version, torch's and transformers', then every registered engine and trainer: its
    installed release (or none) and where it runs (parity.extract.installed)."""
    deps = ", ".join(f"{p} {_installed(p)}" for p in ("torch", "transformers"))
    sides = [(kind, bound) for kind, group in (("engine", engines.engines()), ("trainer", trainers.trainers()))
             for bound in group]
    return "\n".join([f"parity {__version__} ({deps})",
                      *(f"  {kind:8s}{where(bound.impl)}" for kind, bound in sides)])


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors are bad input: one line, exit 2, naming the command's help
        self.exit(ExitCode.BAD_INPUT, f"parity: {message} (see {self.prog} --help)\n")

    def parse_args(self, args=None, namespace=None):
        """argparse's, except that arguments no parser took are refused by the command the user
        ran (`see parity contract serving --help`), not by the top-level parser."""
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            self._command(ns).error(f"unrecognized arguments: {' '.join(extras)}")
        return ns

    def _command(self, ns) -> argparse.ArgumentParser:
        """The innermost (sub)command parser `ns` was parsed by."""
        parser: argparse.ArgumentParser = self
        while True:
            sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)  # noqa: SLF001
            chosen = getattr(ns, sub.dest, None) if sub is not None else None
            if chosen not in (sub.choices if sub is not None else {}):
                return parser
            parser = sub.choices[chosen]


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="parity", description="EAGLE-3 train/serve parity checks.")
    p.add_argument("--version", action="store_true", help="print versions and exit")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    add_contract_parser(sub, _Parser)
    add_check_parser(sub).set_defaults(func=run_check)
    add_lock_parser(sub).set_defaults(func=run_lock)
    add_export_parser(sub).set_defaults(func=run_export)
    add_matrix_parsers(sub)
    add_forward_parser(sub, _Parser).set_defaults(func=run_forward)
    add_replay_parser(sub, add_dump_args).set_defaults(func=run_replay)
    add_sweep_parser(sub).set_defaults(func=run_sweep)
    add_example_parser(sub).set_defaults(func=run_example)
    add_info_parsers(sub)
    return p


def run(args) -> int:
    """Run the parsed command (each subcommand's parser set its `func`)."""
    return args.func(args)


def main(argv: list[str] | None = None) -> int:
    """The whole command: every exit path, Ctrl-C and SIGTERM included, ends in an exit code,
    never a traceback, and runs the cleanup of what the command made."""
    import signal
    import threading

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("parity: interrupted", file=sys.stderr)
        forget_interrupt()
        return ExitCode.INTERRUPTED
    except Terminated:
        print("parity: terminated", file=sys.stderr)
        return ExitCode.TERMINATED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        print(version_text())
        return ExitCode.OK
    if not args.command:
        parser.print_help()
        return ExitCode.BAD_INPUT
    try:

        with workspace():  # one temp dir for the command and its probes, removed on every exit
            return run(args)
    except UsageError as exc:
        print(f"parity: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except BrokenPipeError:  # stdout's reader went away (`| head`): parity.entry ends the command
        raise
    except Exception as exc:  # noqa: BLE001 - sorted below: bad input (2) or a bug (3)
        if isinstance(exc, UserError):
            lines = no_addresses(str(exc)).strip().splitlines() or [type(exc).__name__]
            if getattr(args, "json", False):
                print(json.dumps({"verdict": "error", "error": lines[0]}))
            print(f"parity: {lines[0]}", file=sys.stderr)
            if len(lines) > 1 and os.environ.get("PARITY_DEBUG"):
                print("\n".join(lines[1:]), file=sys.stderr)
            return ExitCode.BAD_INPUT
        if os.environ.get("PARITY_DEBUG"):
            raise
        first = (no_addresses(str(exc)).strip().splitlines() or [""])[0]
        print(f"parity: internal error: {type(exc).__name__}: {first} (PARITY_DEBUG=1 shows the "
              "traceback; please report it)", file=sys.stderr)
        return ExitCode.INTERNAL


__all__ = ["EXAMPLE_DRAFT", "EXAMPLE_DUMP", "EXAMPLE_TARGET", "build_parser", "main", "run", "version_text"]
