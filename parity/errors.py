"""What a parity command can end in: the exit codes, and the one base class of every error
that means "bad input or an unsupported case" (exit 2, one line, never a traceback).

Each module raises its own subclass of `UserError` (InputError, EnvError, ...); the CLI, the
pytest plugin and the matrix sort errors by this type, never by their message.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The exit status of every `parity` command (the README's table)."""

    OK = 0           # parity (or a command that only reports) succeeded
    DRIFT = 1        # drift, an unservable draft, or a contract with error findings
    BAD_INPUT = 2    # bad input or an unsupported case: one actionable line on stderr
    INTERNAL = 3     # a bug in parity itself (PARITY_DEBUG=1 shows the traceback)
    INTERRUPTED = 130  # 128 + SIGINT: Ctrl-C
    TERMINATED = 143   # 128 + SIGTERM: e.g. a CI runner cancelling the job


class UserError(Exception):
    """Bad input or an unsupported case: its first line is shown to the user, exit 2."""


