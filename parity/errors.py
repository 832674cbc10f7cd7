"""What a parity command can end in: the exit codes, and the one base class of every error
that means "bad input or an unsupported case" (exit 2, one line, never a traceback).

Each module raises its own subclass of `UserError` (InputError, EnvError, ...); the CLI, the
pytest plugin and the matrix sort errors by this type, never by their message.
"""

from __future__ import annotations

import re
from enum import IntEnum


class ExitCode(IntEnum):
    """The exit status of every `parity` command (the README's table)."""

    OK = 0           # parity (or a command that only reports) succeeded
    DRIFT = 1        # drift, an unservable draft, or a contract with error findings
    BAD_INPUT = 2    # bad input or an unsupported case: one actionable line on stderr
    INTERNAL = 3     # a bug in parity itself (PARITY_DEBUG=1 shows the traceback)
    INTERRUPTED = 130  # 128 + SIGINT: Ctrl-C
    PIPE_CLOSED = 141  # 128 + SIGPIPE: the reader of stdout closed it (`parity schema | head`)
    TERMINATED = 143   # 128 + SIGTERM: e.g. a CI runner cancelling the job


def forget_interrupt() -> None:
    """Let a handled Ctrl-C end in its exit code. CPython marks a KeyboardInterrupt that leaves
    an exec() or eval() of a string (dataclasses and namedtuple build their methods so, and an
    import runs hundreds of them) as unhandled, even when an `except` further out handles it,
    and at exit ends the process by SIGINT instead of the code it was given (status -2, not 130).
    Every exec of a string clears that mark first; one that runs nothing clears it for good."""
    exec("pass")


class Terminated(BaseException):
    """SIGTERM, raised where the command is, so every `finally` (the workspace's) runs."""


def on_sigterm(signum, frame):
    """The SIGTERM handler of a command (parity.entry, parity.cli.main): Terminated."""
    raise Terminated()


# Where a probe's reply names the release of the package it ran (parity.contract.reply.ProbeReply).
RELEASE_KEY = "release"
# A probe's reply says so (`INTERNAL_ERROR_KEY`: the one line, with parity's frame) when parity's
# own code failed on the way (parity.extract.child.parity_fault): read as InternalError, exit 3.
INTERNAL_ERROR_KEY = "internal_error"
# A child's reply says so (`TRANSIENT_KEY: true`) when it met a failure outside its inputs: such
# a reply says nothing about the inputs, and the reply cache never stores it (parity.reply_cache).
TRANSIENT_KEY = "transient"
# OSErrors that name a file's state, which the inputs and the installed files decide: not transient.
_FILE_STATE_ERRORS = (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError)


def transient(exc: BaseException | None) -> bool:
    """Whether `exc` (or one it was raised from, `raise ... from`) is a failure outside the
    inputs, which the same request may not meet again: memory exhausted (`MemoryError`,
    torch's `OutOfMemoryError`), a resource or system failure (`OSError` and kin: no space, too
    many open files, a broken pipe, a timeout, an interrupted call; not a missing file), an
    interrupt, or a subprocess killed by a signal or timed out. Decided by the exception's
    type, never by its message. The child decides it (parity.extract.child, reply_over_stdio)
    and says so in its reply (TRANSIENT_KEY)."""
    import subprocess

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (MemoryError, KeyboardInterrupt, subprocess.TimeoutExpired)):
            return True
        if isinstance(exc, OSError) and not isinstance(exc, _FILE_STATE_ERRORS):
            return True
        if isinstance(exc, subprocess.CalledProcessError) and exc.returncode < 0:
            return True  # killed by a signal (the kernel's OOM killer, a timeout's kill)
        if any(c.__name__ == "OutOfMemoryError" for c in type(exc).__mro__):
            return True  # torch.OutOfMemoryError (torch.cuda.OutOfMemoryError), a RuntimeError
        exc = exc.__cause__  # not __context__: an error raised while handling another is its own
    return False


class UserError(Exception):
    """Bad input or an unsupported case: its first line is shown to the user, exit 2."""


_ADDRESS = re.compile(r"<([^<>]*?) at 0x[0-9a-fA-F]+>")


def no_addresses(text: str) -> str:
    """`text` with each object's memory address dropped from its repr (`<function loads at
    0x7f...>` -> `<function loads>`), as an engine's own message may quote it (vLLM's parser:
    "cannot be converted to <function loads at 0x...>"): an address is never the same twice, so
    it would make the same refusal read differently on every run and key nothing."""
    return _ADDRESS.sub(r"<\1>", text)


class CannotExtract(UserError):
    """The installed release of an engine or trainer cannot be run by parity at all: no
    release family fits it, or its own family's code path moved, or (`engine_lacks`) the
    release itself has no EAGLE-3 (SGLang 0.4.4: its SpeculativeAlgorithm has no EAGLE3), which
    is the release's answer, as on a GPU, not a limit of parity. Read from a probe's reply
    (`cannot_extract`: package, version, reason, engine_lacks); reads 'cannot extract under
    PACKAGE VERSION: REASON', which is what a matrix cell shows for it."""

    def __init__(self, package: str, version: str, reason: str, *, engine_lacks: bool = False,
                 unimportable: bool = False):
        self.package, self.version, self.reason = package, version, reason
        self.engine_lacks, self.unimportable = engine_lacks, unimportable
        super().__init__(f"cannot extract under {package} {version}: {reason}")

    @staticmethod
    def entry(package: str, version: str, reason: str, *, engine_lacks: bool = False,
              unimportable: bool = False) -> dict:
        """What a probe puts in its reply (`reply.update(CannotExtract.entry(...))`): the typed
        entry, and the same sentence as the reply's `error`. `unimportable`: the release's code
        cannot be imported in this interpreter (a dependency missing or too new here), which says
        nothing about the release: parity.extract.installed then runs it in parity's environment
        of that release."""
        return {"cannot_extract": {"package": package, "version": version, "reason": reason,
                                   **({"engine_lacks": True} if engine_lacks else {}),
                                   **({"unimportable": True} if unimportable else {})},
                "error": f"cannot extract under {package} {version}: {reason}"}


class HarnessLimit(UserError):
    """parity's CPU harness cannot run what the engine (or trainer) runs here: a CUDA-only code
    path, or one of parity's stand-ins relied on. A limit of parity, never the engine's refusal
    of the draft, so never a verdict: exit 2, naming the limit (read from a probe's reply,
    parity.extract.child)."""

    def __init__(self, package: str, version: str, limit: str):
        self.package, self.version, self.limit = package, version, limit
        super().__init__(f"parity's CPU harness cannot run {package} {version} here: {limit}. This is a limit of "
                         f"parity's CPU run, not {package} refusing the draft: no verdict is given")


class InternalError(Exception):
    """parity's own code failed while it ran an engine or a trainer (the innermost frame of what
    was raised is parity's, and the interpreter raised it there: parity.extract.child.parity_fault):
    a bug of parity, never the engine's refusal nor a limit of its CPU harness. Not a UserError:
    the CLI ends in exit 3 (internal error); the release table counts the cell "parity cannot
    run". Read from a probe's reply (`INTERNAL_ERROR_KEY`)."""

    def __init__(self, package: str, version: str, fault: str):
        self.package, self.version, self.fault = package, version, fault
        super().__init__(f"parity's own code failed running {package} {version}: {fault}. This is a bug in parity, "
                         f"not {package} refusing the draft: no verdict is given")

