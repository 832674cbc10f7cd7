"""The `parity` command as a process: the console script (`parity = "parity.entry:main"`) and
`python -m parity` (parity/__main__.py) start here.

Ctrl-C and SIGTERM are taken over first, before the CLI's modules are imported (pydantic, the
contracts: seconds on a loaded machine), so that an interrupt at any moment, the imports
included, ends in one line and exit 130 (SIGTERM: 143), never a traceback; the CLI itself is
imported only then. A Ctrl-C that some library's broad `except` swallowed on the way still ends
the command as interrupted, and one raised where Python cannot raise it (a weakref callback)
is delivered again rather than printed and ignored. What runs before this module does (the interpreter's own start-up,
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


def _unraisable(unraisable) -> None:
    """A signal's exception raised where Python cannot raise it (a weakref callback, such as
    importlib's module locks have, or a __del__): CPython would print "Exception ignored in" with
    a traceback and let the command run on. Nothing is printed; the signal is delivered again, so
    that it ends the command where the code can raise, in its one line."""
    errors = sys.modules.get(f"{__package__}.errors")
    ours = (KeyboardInterrupt,) + ((errors.Terminated,) if errors is not None else ())
    if _received and unraisable.exc_type is not None and issubclass(unraisable.exc_type, ours):
        import _thread

        # From another thread, a moment later: the main thread runs the handler at its next step
        # once this hook has returned (armed from here, it would run in here and be ignored again).
        _thread.start_new_thread(_deliver_again, (_received[-1],))
        return
    _hook(unraisable)


_hook = sys.unraisablehook


def _deliver_again(signum: int) -> None:
    import _thread
    import time

    time.sleep(0.01)
    _thread.interrupt_main(signum)


def _take_over() -> list[int]:
    """SIGINT and SIGTERM handled here, each where it is at its default (SIGINT ignored, as a job
    started in the background gets it, stays ignored); the signals taken over."""
    taken = []
    for signum, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(signum) is default:
            signal.signal(signum, _on_signal)
            taken.append(signum)
    if taken:
        sys.unraisablehook = _unraisable
    return taken


def _settle(taken: list[int]) -> None:
    """Once the command has ended (or is ending by a signal): a signal now stops nothing, so it
    is ignored rather than raised in the interpreter's shutdown (a traceback, another code)."""
    for signum in taken:
        signal.signal(signum, signal.SIG_IGN)


# Taken over as this module is imported, before anything else of parity's (even parity.errors):
# on a loaded machine the interpreter reaches this line a second or more after it started.
_TAKEN = _take_over()


def _import_errors():
    """parity.errors, imported after the take-over. A signal that lands during that import ends
    it with the signal's exception, and at this module's top level nothing could catch that but
    the interpreter (a traceback, death by SIGINT): the signal is recorded (`_received`) and the
    import is made again, and main() then ends the command as that signal asks."""
    while True:
        try:
            from . import errors
            return errors
        except KeyboardInterrupt:
            continue
        except Exception:  # noqa: BLE001 - SIGTERM's handler importing the half-imported module
            if not _received:
                raise


_errors = _import_errors()
ExitCode, Terminated, forget_interrupt = _errors.ExitCode, _errors.Terminated, _errors.forget_interrupt


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

        if _received:  # arrived while importing, and swallowed there or met before main()
            return int(_ended_by(_received[0], taken))
        code = run_command()
        if signal.SIGINT in _received and code not in (ExitCode.INTERRUPTED, ExitCode.TERMINATED):  # swallowed in it
            raise KeyboardInterrupt()
        sys.stdout.flush()  # what is still buffered: its reader may have gone (BrokenPipeError)
    except BrokenPipeError:
        code = _pipe_closed()
    except KeyboardInterrupt:
        code = _ended_by(signal.SIGINT, taken)
    except Terminated:
        code = _ended_by(signal.SIGTERM, taken)
    except Exception:
        if not _received:
            raise
        # The signal's exception turned into a library's own error on the way: pydantic-core
        # reports a KeyboardInterrupt raised while it builds a model's serializer (an import of
        # the CLI's contracts) as a SchemaError. The command ended because of the signal.
        code = _ended_by(_received[0], taken)
    finally:
        _settle(taken)
    return int(code)


def _ended_by(signum: int, taken: list[int]) -> ExitCode:
    """The one line and the exit code of a command ended by `signum` (SIGINT: 130, SIGTERM: 143)."""
    _settle(taken)
    if signum == signal.SIGTERM:
        print("parity: terminated", file=sys.stderr)
        return ExitCode.TERMINATED
    print("parity: interrupted", file=sys.stderr)
    forget_interrupt()
    return ExitCode.INTERRUPTED


__all__ = ["main"]
