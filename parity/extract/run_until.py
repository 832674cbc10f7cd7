"""Run a real engine method only as far as the statement parity needs, then stop.

Older SGLang releases read the draft's aux ids inline in `ModelRunner.__init__` (under a
bare `except:`), not in a function of their own. Rather than re-typing that statement,
`run_until_after` runs the release's own `__init__` on a fresh instance and stops it just
after the top-level statement that assigns the attribute in question: everything up to
and including that statement is the real code; nothing after it (pool allocation,
device buffers, graph capture) is run. The statement is located in the installed
source, so a release where it moved or vanished is a loud `CodePathMoved`, naming what
was looked for, never a silent reproduction.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from typing import Any, Callable


class CodePathMoved(LookupError):
    """The engine code parity runs is not where this adapter looks for it."""


class ModuleAbsent(CodePathMoved):
    """A module the adapter imports does not exist in the installed release."""

    def __init__(self, module: str):
        super().__init__(f"looked for {module}; there is none")
        self.module = module


def require(*qualnames: str) -> None:
    """Each dotted name (`package.module.Class.method`) resolves in the installed source:
    the longest importable module prefix, then attributes. A name written with keywords,
    `package.module.function(a, b)`, must also be a callable that takes each of them. ModuleAbsent
    or CodePathMoved, naming what was looked for, at the first that does not."""
    import importlib
    import importlib.util

    for written in qualnames:
        qualname, _, keywords = written.partition("(")
        parts = qualname.split(".")
        obj, i = None, len(parts)
        while i > 0:
            name = ".".join(parts[:i])
            try:
                found = importlib.util.find_spec(name) is not None
            except (ImportError, ValueError):
                found = False
            if found:
                try:
                    obj = importlib.import_module(name)
                except Exception as exc:  # noqa: BLE001 - there, but it cannot be loaded in this environment
                    raise CodePathMoved(f"looked for {qualname}; importing {name} raised "
                                        f"{type(exc).__name__}: {exc}") from None
                break
            i -= 1
        if obj is None:
            raise ModuleAbsent(parts[0])
        for j in range(i, len(parts)):
            if not hasattr(obj, parts[j]):
                raise CodePathMoved(f"looked for {qualname}; {'.'.join(parts[:j])} has no {parts[j]}")
            obj = getattr(obj, parts[j])
        for keyword in filter(None, (k.strip() for k in keywords.rstrip(")").split(","))):
            if not _takes(obj, keyword):
                raise CodePathMoved(f"looked for {written}; {qualname} takes no argument {keyword!r}")


def _takes(func: Callable, keyword: str) -> bool:
    """Whether `func` accepts the keyword argument `keyword` (a **kwargs catch-all does not count:
    the code would run, but not as the adapter calls it)."""
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    p = params.get(keyword)
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)


def require_absent(why: str, *qualnames: str) -> None:
    """CodePathMoved when one of the dotted names IS in the installed source: code the
    adapter does not run and whose presence would change what it reads (`why`)."""
    for qualname in qualnames:
        try:
            require(qualname)
        except CodePathMoved:
            continue
        raise CodePathMoved(f"found {qualname}, which this adapter assumes absent ({why})")


class _Stop(BaseException):  # BaseException: not swallowed by the engine's `except Exception`
    pass


def _assigns(node: ast.AST, attr: str) -> bool:
    for sub in ast.walk(node):
        targets = (sub.targets if isinstance(sub, ast.Assign)
                   else [sub.target] if isinstance(sub, (ast.AnnAssign, ast.AugAssign)) else [])
        for t in targets:
            if (isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name)
                    and t.value.id == "self"):
                return True
    return False


def stop_line(func: Callable, attr: str) -> tuple[int, str]:
    """(file line of the top-level statement after the one assigning self.<attr>, that statement's text)."""
    where = f"{func.__module__}.{func.__qualname__}"
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError) as exc:
        raise CodePathMoved(f"cannot read the source of {where}: {exc}") from None
    tree = ast.parse(source)
    fn = tree.body[0]
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise CodePathMoved(f"{where} is not a plain function")
    body = fn.body
    hits = [i for i, stmt in enumerate(body) if _assigns(stmt, attr)]
    if not hits:
        raise CodePathMoved(f"looked for a statement assigning self.{attr} in {where}; there is none")
    i = hits[-1]
    if i + 1 >= len(body):
        raise CodePathMoved(f"the statement assigning self.{attr} is the last of {where}: no place to stop")
    nxt = body[i + 1]
    first = func.__code__.co_firstlineno
    return first + nxt.lineno - 1, ast.get_source_segment(source, nxt).splitlines()[0]


def run_until_after(func: Callable, attr: str, obj: Any, **kwargs) -> Any:
    """Run `func(obj, **kwargs)` (the real method) until the statement after the one that
    assigns `self.<attr>`; return `obj`. Required parameters missing from kwargs are a
    CodePathMoved (the method's signature changed)."""
    sig = inspect.signature(func)
    params = list(sig.parameters.values())[1:]
    missing = [p.name for p in params if p.default is inspect.Parameter.empty
               and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in kwargs]
    if missing:
        raise CodePathMoved(f"{func.__qualname__} now requires {missing}, which this adapter does not supply")
    accepted = {k: v for k, v in kwargs.items() if k in sig.parameters}
    line, _ = stop_line(func, attr)
    code = func.__code__

    def local(frame, event, arg):
        if event == "line" and frame.f_lineno == line:
            raise _Stop
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code is code else None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        func(obj, **accepted)
    except _Stop:
        return obj
    finally:
        sys.settrace(previous)
    raise CodePathMoved(f"{func.__qualname__} returned without reaching line {line} (after self.{attr})")


def find_statement(func: Callable, test: str) -> ast.If:
    """The first `if <test>:` statement of `func`'s installed source; CodePathMoved when none."""
    where = f"{func.__module__}.{func.__qualname__}"
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError) as exc:
        raise CodePathMoved(f"the source of {where} cannot be read: {exc}") from None
    found = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.If) and ast.unparse(node.test) == test]
    if not found:
        raise CodePathMoved(f"looked for a statement `if {test}:` in {where}; there is none")
    return found[0]


def run_statement(func: Callable, test: str, obj: Any, **names: Any) -> Any:
    """Run only the `if <test>:` statement of `func` (the real method's source, found in the
    installed code; `test` as `ast.unparse` writes it, e.g. "self.use_aux_hidden_state_outputs")
    with `self` bound to `obj` and the method's locals it reads given as `names`, in the
    method's own module namespace; return `obj`. For a release whose start-up does one thing
    parity needs inside a method that otherwise allocates a GPU (vLLM 0.11's runner sets the
    aux layers at the end of `load_model`). CodePathMoved when no such statement is there."""
    where = f"{func.__module__}.{func.__qualname__}"
    statement = ast.Module(body=[find_statement(func, test)], type_ignores=[])
    ast.increment_lineno(statement, func.__code__.co_firstlineno - 1)  # tracebacks name the installed lines
    code = compile(statement, inspect.getsourcefile(func) or where, "exec")
    exec(code, dict(func.__globals__), {"self": obj, **names})  # noqa: S102 - the engine's own statement
    return obj
