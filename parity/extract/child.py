"""What every probe (the child processes that run an engine or a trainer) shares: its errors
on one line, its findings as reply entries, and telling a limit of parity's CPU harness from
the engine's own refusal. Stdlib only: a probe imports it before torch.

A limit of the harness is a failure the engine would not have on the hardware it is built for:
a CUDA-only code path (anything raised from inside `torch.cuda`, or torch saying it was not
compiled with CUDA), or one of parity's own stand-ins being relied on (its CPU kernel bodies,
its import-time stand-ins). Every error a probe reports through `one_line` is looked at; the
first limit found goes into the reply (`HARNESS_LIMIT_KEY`, by reply_over_stdio), and the
parent reads it as exit 2 naming the limit, never as a verdict on the draft (docs/engines-on-cpu.md).

An engine's probe adds its own limits (`LIMIT_RULES`: vLLM's CPU platform branch, its unloaded
CUDA op libraries, a module its wheel requires that parity's environment leaves out; SGLang's
start-up arithmetic on the GPU's memory), each decided from the exception and its frames.

A failure of parity's own code is neither the engine's refusal nor a limit: `parity_fault`
types an exception by the frame that raised it (its innermost frame in the parity package, the
interpreter raising it there: an attribute read, a call, a subscript, an assert), from the
traceback's code objects and file paths, never from its message; the reply carries the first
(`INTERNAL_ERROR_KEY`), read by the parent as InternalError (exit 3; "parity cannot run" in the
release table).

A failure outside the inputs (`parity.errors.transient`: memory, a resource, a killed
subprocess) met on the way is remembered the same way (`note`, which `one_line` calls), and the
reply says so (`TRANSIENT_KEY`): the reply cache never stores it. The child knows the
exception's type; the parent never reads it from the message.
"""

from __future__ import annotations

import dis
import functools
import json
import socket
import traceback
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from ..contract.models import FindingKind

from ..errors import INTERNAL_ERROR_KEY, RELEASE_KEY, TRANSIENT_KEY, transient
from ..registry import provides_module
from .named import laid_out, unnamed

HARNESS_LIMIT_KEY = "harness_limit"
PARITY_ROOT = Path(__file__).resolve().parents[1]  # the parity package's own folder
# The installed packages this process runs (an engine's or a trainer's): a frame inside one of them
# is its code. Each probe names its own, from its own folder, when it wraps its handler
# (`with_limits(handler, package)`); the child knows no engine or trainer by name.
RUN_PACKAGES: list[str] = []
STAND_IN_ERRORS = ("StandInUsed", "KernelStandInError")  # parity's own stand-ins, relied on
_GPU_RUNTIMES = ("/torch/cuda/", "/triton/runtime/")  # code that runs only with a GPU and its driver
_CUDA_WORDS = ("not compiled with CUDA", "Found no NVIDIA driver", "No CUDA GPUs are available",
               "CUDA driver initialization failed")

limits: list[str] = []  # the harness limits this process has met, in order
transients: list[str] = []  # the failures outside the inputs this process has met (type names)
faults: list[str] = []  # the failures of parity's own code this process has met (parity_fault), in order
# Engine-specific harness limits (each: exception -> what is missing, or None), registered by an
# engine's probe at import (the vLLM probe: its CPU platform's branches, its unloaded op libraries).
LIMIT_RULES: list[Callable[[BaseException], str | None]] = []


def harness_limit(exc: BaseException) -> str | None:
    """What about parity's CPU harness `exc` (or an exception it came from) shows, or None
    when it is not a limit of the harness."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        frames = traceback.extract_tb(exc.__traceback__)
        # torch's CUDA module, or Triton's GPU runtime (which looks up the one active GPU driver
        # when a Triton kernel is launched, and finds none on a CPU machine)
        cuda = [i for i, f in enumerate(frames) if any(part in f.filename.replace("\\", "/") for part in _GPU_RUNTIMES)]
        if type(exc).__name__ in STAND_IN_ERRORS:
            return f"it relied on one of parity's CPU stand-ins ({type(exc).__name__}: {' '.join(str(exc).split())})"
        if cuda or any(word in str(exc) for word in _CUDA_WORDS):
            caller = frames[cuda[0] - 1] if cuda and cuda[0] > 0 else (frames[-1] if frames else None)
            where = f" from {_short(caller.filename)}:{caller.lineno} {caller.name}" if caller else ""
            return f"a CUDA-only code path{where} ({type(exc).__name__}: {' '.join(str(exc).split())})"
        if "found no compiled frames" in str(exc) and "Dynamo tracing is disabled" in str(exc):
            return ("a code path that needs torch.compile (fullgraph: flex attention's, here), which parity's CPU "
                    "children turn off (TORCH_COMPILE_DISABLE=1, docs/engines-on-cpu.md)")
        for rule in LIMIT_RULES:
            found = rule(exc)
            if found:
                return found
        exc = exc.__cause__ or exc.__context__
    return None


@functools.cache
def package_roots(name: str) -> tuple[Path, ...]:
    """The folders of the installed package `name` here (found, not imported); () when absent."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return ()
    return tuple(Path(p).resolve() for p in (spec.submodule_search_locations or ())) if spec else ()


def owner(filename: str, packages: "tuple[str, ...] | list[str] | None" = None) -> str | None:
    """Whose code a traceback frame's file is: "parity" (inside this package's folder), the name
    of an installed package parity runs (`packages`, else `RUN_PACKAGES`, inside that package's
    folder), or None (torch, transformers, the standard library, generated code)."""
    try:
        path = Path(filename).resolve()
    except (OSError, ValueError):
        return None
    if path.is_relative_to(PARITY_ROOT):
        return "parity"
    for name in (RUN_PACKAGES if packages is None else packages):
        if any(path.is_relative_to(root) for root in package_roots(name)):
            return name
    return None


def innermost(exc: BaseException, *owners: str):
    """The innermost traceback entry of `exc` whose file is code of one of `owners` (`owner`;
    all of parity's and the run packages' when none is named: a third-party frame below it,
    torch's or transformers', counts for whoever called it), with its owner; (None, None) when
    it has none."""
    found, who = None, None
    tb = exc.__traceback__
    while tb is not None:
        name = owner(tb.tb_frame.f_code.co_filename, owners or None)
        if name is not None and (not owners or name in owners):
            found, who = tb, name
        tb = tb.tb_next
    return found, who


def _raised_by_statement(tb) -> bool:
    """Whether the traceback entry stops at a `raise` statement of its code (parity's own
    deliberate, typed error), not at an operation the interpreter failed (an attribute read, a
    call, a subscript). Read from the code object's instruction at the entry, not from any text."""
    for instruction in dis.get_instructions(tb.tb_frame.f_code):
        if instruction.offset == tb.tb_lasti:
            return instruction.opname in ("RAISE_VARARGS", "RERAISE")
    return False


def parity_fault(exc: BaseException) -> str | None:
    """Where `exc` shows a failure of parity's own code, or None. Decided from the traceback, never
    from a message: its innermost frame is in the parity package (`owner`), and the interpreter
    raised it there (an AttributeError of parity reading an attribute, a TypeError of a call
    parity made with arguments the callee does not take, a KeyError of its subscript, an `assert`
    of parity failing), not a `raise` statement of parity's: that is a typed error (a stand-in
    relied on, a family's CodePathMoved, a translation of the engine's error), judged by what it
    was raised from (`raise ... from exc`), or left to its type where it came from nothing. One
    whose innermost frame is the engine's own code is the engine's; one raised inside a third
    party's code (torch, pydantic) is not decided here: the library may be judging what the
    engine gave it (pydantic running the engine's own validators). A bug of parity: the parent
    reads it as an internal error (exit 3), never as the engine's refusal."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None and owner(tb.tb_frame.f_code.co_filename) != "parity":
            return None  # the engine's (or trainer's) own code raised it, or a third party's
        if tb is None or (_raised_by_statement(tb) and not isinstance(exc, AssertionError)):
            exc = exc.__cause__  # a translation: judged by what it was raised from; None: parity's own type
            continue
        frame = traceback.extract_tb(tb, limit=1)[0]
        where = f"{PARITY_ROOT.name}/{Path(frame.filename).resolve().relative_to(PARITY_ROOT).as_posix()}"
        text = " ".join(str(exc).split())
        return f"{type(exc).__name__}{': ' + text if text else ''} (at {where}:{frame.lineno} {frame.name})"
    return None


def requirement_not_installed(exc: BaseException, package: str, version: str, requires: list[str],
                              importer: str = "its code") -> str | None:
    """Why `package`'s code could not import a module, when `exc` (or what it was raised from)
    is a ModuleNotFoundError for a top-level module that is not installed and one of `requires`
    (the installed package's `Requires-Dist`, unconditional ones only) is a distribution that is
    not installed either and whose name is the module's, or has it as one of its words
    (`lm-format-enforcer` for `lmformatenforcer`, `nvidia-cutlass-dsl` for `cutlass`): the
    release requires it and parity's environment leaves it out, a limit of parity's CPU run.
    None otherwise (the engine's own import of something it does not require stays its own)."""
    import importlib.util
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    while exc is not None and not isinstance(exc, ModuleNotFoundError):
        exc = exc.__cause__
    name = getattr(exc, "name", None)
    if not name:
        return None
    top = name.split(".")[0]
    if importlib.util.find_spec(top) is not None:
        return None
    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if not provides_module(req.name, top):
            continue
        try:
            metadata.version(req.name)
        except metadata.PackageNotFoundError:
            return (f"{importer} imports {top!r}, from {req}, which {package} {version} requires and parity's CPU "
                    f"environment does not install ({type(exc).__name__}: {exc})")
    return None


def missing_dependency(exc: BaseException | None, own: "tuple[str, ...]") -> ImportError | None:
    """The ImportError behind `exc` (itself, or what it was raised from or while handling, as
    `require` wraps it) that is not about a module of the `own` packages: a dependency the
    interpreter lacks, or has in another release (`cannot import name X from transformers`),
    or an import the release's own code refused (an ImportError naming no module). None when
    there is none, or when the module missing is the release's own (a code path that moved:
    its placement says so)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ImportError):
            top = (exc.name or "").split(".")[0]
            return None if top in own else exc
        exc = exc.__cause__ or exc.__context__
    return None


def imports_failing(check: Callable[[], object], *own: str) -> str | None:
    """Why the installed release's code cannot be imported in this interpreter, or None: runs
    `check` (the release family's imports), and when it fails for want of a dependency
    (`missing_dependency`), says so in the words the probes use, 'its code cannot be imported
    here: ...' (its reply's `cannot_extract` marks it `unimportable`: parity.extract.installed
    then runs the release in parity's environment of it). Any other failure is left for the
    extraction itself to meet and report."""
    try:
        check()
    except Exception as exc:  # noqa: BLE001 - sorted below
        missing = missing_dependency(exc, own)
        if missing is not None:
            return f"its code cannot be imported here: {words(missing)}"
    return None


def _short(path: str) -> str:
    path = path.replace("\\", "/")
    return path.split("site-packages/", 1)[1] if "site-packages/" in path else path


def note(exc: BaseException) -> None:
    """Remember `exc` when it is a failure outside the inputs (`transients`), or a failure of
    parity's own code that is no limit of its CPU harness (`parity_fault`: `faults`): the reply
    then says so. Every error a probe reports, through `one_line` or in its own words, is noted
    (`words`: the one line of an error the probe has already judged, noting nothing)."""
    if transient(exc):
        transients.append(type(exc).__name__)
    fault = parity_fault(exc) if harness_limit(exc) is None else None
    if fault is not None and fault not in faults:
        faults.append(fault)


def words(exc: BaseException) -> str:
    """`Type: message` on one line, noting nothing: for an error the probe has judged itself
    (SGLang's model class lacking the capture hook its EAGLE-3 start-up calls)."""
    text = " ".join(str(exc).split())
    if len(text) > 400:  # e.g. SGLang's list of every supported architecture after the missing one
        text = text[:400] + " ..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def one_line(exc: BaseException) -> str:
    """`Type: message` on one line (a multi-line message keeps all its lines, joined). A limit
    of the harness behind it is remembered (`limits`), and so is a failure outside the inputs
    (`note`)."""
    note(exc)
    limit = harness_limit(exc)
    if limit is not None and limit not in limits:
        limits.append(limit)
    return words(exc)


def _release_of(package: str) -> dict[str, str]:
    """`{RELEASE_KEY: version}` of the installed `package` the probe runs, so that a reply made
    from an escaped exception still says which release stopped; {} when it is not installed."""
    try:
        return {RELEASE_KEY: metadata.version(package)}
    except metadata.PackageNotFoundError:
        return {}


def with_limits(handler, package: str, dist: str | None = None):
    """A probe's handler (of the installed `package`, e.g. an engine's) whose reply carries the
    first harness limit met on the way (HARNESS_LIMIT_KEY); one raised out of the handler becomes
    that reply, with its error and the package's release. A reply after a failure outside the
    inputs (`note`) says so: `TRANSIENT_KEY: true`. `package` counts among the packages this
    process runs (`RUN_PACKAGES`) from here on; `dist`: its distribution, where its name differs
    (`nvidia-modelopt` for `modelopt`), whose release a reply names."""
    if package not in RUN_PACKAGES:
        RUN_PACKAGES.append(package)

    def run(request: dict) -> dict:
        try:
            reply = handler(request)
        except Exception as exc:
            limit, fault = harness_limit(exc), parity_fault(exc)
            if limit is None and fault is None:
                raise  # the engine's own error: reply_over_stdio reports it (and whether transient)
            reply = {**_release_of(dist or package), "error": one_line(exc),
                     **({HARNESS_LIMIT_KEY: limit} if limit else {})}
        if faults and isinstance(reply, dict):
            reply.setdefault(INTERNAL_ERROR_KEY, faults[0])
        if limits and isinstance(reply, dict):
            reply.setdefault(HARNESS_LIMIT_KEY, limits[0])
        if transients and isinstance(reply, dict):
            reply[TRANSIENT_KEY] = True
        if isinstance(reply, dict) and laid_out():  # the user's files, never the folder the engine was shown
            reply = json.loads(unnamed(json.dumps(reply)))
        return reply
    return run


def finding(kind: "FindingKind", message: str, severity: str = "warning", slot: int | None = None) -> dict:
    """A finding as a child's reply carries it; `kind` a FindingKind (a name no kind has raises
    here, in the child, not when the parent builds the contract). Imported here: the rest of this
    module runs where pydantic is not installed (a child of another interpreter, tests.reply_echo)."""
    from ..contract.models import FindingKind

    return {"kind": FindingKind(kind).value, "message": message, "severity": severity, "slot": slot}


__all__ = ["HARNESS_LIMIT_KEY", "INTERNAL_ERROR_KEY", "LIMIT_RULES", "TRANSIENT_KEY", "faults", "finding",
           "harness_limit", "innermost", "limits", "note", "one_line", "owner", "package_roots", "parity_fault",
           "requirement_not_installed", "transients", "with_limits", "words"]


def jsonable(value: Any) -> Any:
    """An engine object's value as plain JSON: numbers, strings and None as they are, lists item
    by item, an enum by its value, anything else by its string."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return str(getattr(value, "value", value))


def free_port() -> int:
    """A local TCP port free when asked (the rendezvous port of a probe's one-process group)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def warm_family(dist: str, family_for: Callable[[str], Any]) -> None:
    """A probe's import-only first steps before any request (parity.forkserver): the family of the
    installed `dist` and the modules it runs; nothing is set up or computed. No family: the run
    itself reports it."""
    import importlib

    try:
        family = family_for(metadata.version(dist))
    except LookupError:
        return
    for name in family.IMPORTS:
        importlib.import_module(name)


def place_family(run, dist: str, package: str, family_for: Callable[[str], Any]) -> None:
    """A probe's first step for a side with no engine under it (a trainer that hooks a transformers
    model itself): the release's family (`family_for(run.version)`) with its IMPORTS checked here,
    named in the reply with its CODE_PATHS; a release this interpreter cannot import, or no family
    runs, completes the reply (Answered)."""
    import importlib

    from ..errors import CannotExtract
    from .families import family_name

    def imports() -> None:
        for name in family_for(run.version).IMPORTS:
            importlib.import_module(name)

    unimportable = imports_failing(imports, package)
    if unimportable is not None:  # this interpreter cannot run it (parity.extract.installed)
        run.reply.update(CannotExtract.entry(dist, run.version, unimportable, unimportable=True))
        raise Answered
    try:
        run.family = family_for(run.version)
    except LookupError as exc:
        run.reply.update(CannotExtract.entry(dist, run.version, str(exc)))
        raise Answered from None
    run.reply["family"] = family_name(run.family)
    run.reply["code_paths"] = dict(run.family.CODE_PATHS)


def refused_by(run, package: str, exc: BaseException) -> None:
    """The release's own code raised on the run's inputs (not parity's code, not a limit of its
    harness: those propagate to `with_limits`): its refusal completes the reply, in its words."""
    if parity_fault(exc) is not None or harness_limit(exc) is not None:
        raise exc
    run.reply["error"] = f"{package} {run.version} refuses this run: {one_line(exc)}"
    run.reply["refused"] = True
    raise Answered from None


class Answered(Exception):
    """A step of a probe's extraction completed the reply early (a refusal, a limit, an error it
    names): the reply is what the probe sends."""


def run_steps(run, place, *steps) -> dict:
    """`run.reply` after `place(run)` (the release's family, its imports checked) and, unless the
    request asks for its imports only (parity.extract.installed), each of `steps` in order; a step
    that completes the reply early raises Answered."""
    try:
        place(run)
        if not run.request.get("imports_only"):
            for step in steps:
                step(run)
    except Answered:
        pass
    return run.reply
