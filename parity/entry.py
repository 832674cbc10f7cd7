"""The `parity` command as a process: the console script (`parity = "parity.entry:main"`) and
`python -m parity` (parity/__main__.py) start here.

Ctrl-C and SIGTERM are taken over first, before the CLI's modules are imported (pydantic, the
contracts: seconds on a loaded machine), so that an interrupt at any moment, the imports
included, ends in one line and exit 130 (SIGTERM: 143), never a traceback; the CLI itself is
imported only then. A Ctrl-C that some library's broad `except` swallowed on the way still ends
the command as interrupted. What runs before this module does (the interpreter's own start-up,
its `site` import) is out of parity's reach. Imports here: stdlib and parity.errors only.
"""

from __future__ import annotations

import os
import signal
import sys

_received: list[int] = []  # the signals taken over here that arrived (SIGINT, SIGTERM)


def _on_signal(signum, frame):
    _received.append(signum)
    if signum == signal.SIGTERM:
        from .errors import Terminated

        raise Terminated()
    raise KeyboardInterrupt()


def _take_over() -> list[int]:
    """SIGINT and SIGTERM handled here, each where it is at its default (SIGINT ignored, as a job
    started in the background gets it, stays ignored); the signals taken over."""
    taken = []
    for signum, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(signum) is default:
            signal.signal(signum, _on_signal)
            taken.append(signum)
    return taken


def _settle(taken: list[int]) -> None:
    """Once the command has ended (or is ending by a signal): a signal now stops nothing, so it
    is ignored rather than raised in the interpreter's shutdown (a traceback, another code)."""
    for signum in taken:
        signal.signal(signum, signal.SIG_IGN)


# Taken over as this module is imported, before anything else of parity's (even parity.errors):
# on a loaded machine the interpreter reaches this line a second or more after it started.
_TAKEN = _take_over()

from .errors import ExitCode, Terminated, forget_interrupt  # noqa: E402 - after the take-over, on purpose


def _pipe_closed() -> ExitCode:
    """The reader of stdout closed it (`parity schema | head`): nothing more is printed, and the
    interpreter's own flush at exit, pointed at /dev/null, raises nothing either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return ExitCode.PIPE_CLOSED


def main() -> int:
    """The exit code of `parity` with sys.argv's arguments (parity.cli.main), every signal that
    arrives after this module was imported ending in its own code and one line."""
    taken = _TAKEN
    try:
        from .cli import main as run_command

        if signal.SIGINT in _received:  # raised while importing and swallowed there
            raise KeyboardInterrupt()
        code = run_command()
        if signal.SIGINT in _received and code not in (ExitCode.INTERRUPTED, ExitCode.TERMINATED):  # swallowed in it
            raise KeyboardInterrupt()
        sys.stdout.flush()  # what is still buffered: its reader may have gone (BrokenPipeError)
    except BrokenPipeError:
        code = _pipe_closed()
    except KeyboardInterrupt:
        _settle(taken)
        print("parity: interrupted", file=sys.stderr)
        forget_interrupt()
        code = ExitCode.INTERRUPTED
    except Terminated:
        _settle(taken)
        print("parity: terminated", file=sys.stderr)
        code = ExitCode.TERMINATED
    finally:
        _settle(taken)
    return int(code)


__all__ = ["main"]
