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
from types import ModuleType
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
            found = _find_spec(name, qualname) is not None
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


def _find_spec(name: str, qualname: str):
    """importlib.util.find_spec(name), None where a prefix of it is absent or not a package;
    CodePathMoved naming why when a parent package exists but cannot be imported here
    (find_spec imports a dotted name's parents)."""
    import importlib
    import importlib.util

    try:
        return importlib.util.find_spec(name)
    except ImportError as exc:
        _raise_if_a_parent_failed(qualname, exc)
        return None
    except KeyError:  # a parent package failed to import earlier in this process: import it to say why
        top = name.split(".")[0]
        try:
            importlib.import_module(top)
        except Exception as exc:  # noqa: BLE001 - why it cannot be loaded here
            raise CodePathMoved(f"looked for {qualname}; importing {top} raised "
                                f"{type(exc).__name__}: {exc}") from None
        return None
    except ValueError:
        return None


def installed_spec(name: str):
    """The installed module `name`'s spec, None where it or a parent package is absent (never
    find_spec's ModuleNotFoundError for an absent parent); CodePathMoved where a parent exists but
    cannot be imported here."""
    return _find_spec(name, name)


def _raise_if_a_parent_failed(qualname: str, exc: ImportError) -> None:
    """find_spec imports a dotted name's parents: a module missing that is not the name or
    one of its prefixes (fastapi, imported by sglang's package) is why the code cannot be
    loaded here, not a moved name."""
    missing = getattr(exc, "name", None)
    parts = qualname.split(".")
    if missing and missing not in {".".join(parts[:i]) for i in range(1, len(parts) + 1)}:
        raise CodePathMoved(f"looked for {qualname}; importing its package raised "
                            f"{type(exc).__name__}: {exc}") from None


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


def _calls(node: ast.AST, callee: str) -> bool:
    return any(isinstance(sub, ast.Call) and ast.unparse(sub.func) == callee for sub in ast.walk(node))


def _source(func: Callable) -> tuple[str, str]:
    """(`module.qualname` of `func`, its installed source, dedented); CodePathMoved when unreadable."""
    where = f"{func.__module__}.{func.__qualname__}"
    try:
        return where, textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError) as exc:
        raise CodePathMoved(f"cannot read the source of {where}: {exc}") from None


def _run_alone(func: Callable, statement: ast.stmt, obj: Any, names: dict) -> Any:
    """Run one statement of `func`'s source alone, `self` bound to `obj` and the method's locals
    it reads given as `names`, in the method's module namespace; tracebacks name its installed lines."""
    _exec_alone(func, statement, {"self": obj, **names})
    return obj


def _exec_alone(func: Callable, statement: ast.stmt, scope: dict) -> dict:
    """Run one statement of `func`'s source alone with `scope` as its locals (updated in place:
    what it assigns is there after), in the function's module namespace."""
    module = ast.Module(body=[statement], type_ignores=[])
    ast.increment_lineno(module, func.__code__.co_firstlineno - 1)
    code = compile(module, inspect.getsourcefile(func) or func.__qualname__, "exec")
    exec(code, dict(func.__globals__), scope)  # noqa: S102 - the installed code's own statement
    return scope


def _stop_after(func: Callable, matches: Callable[[ast.AST], bool], what: str) -> tuple[int, str]:
    """(file line of the top-level statement after the last one `matches`, that statement's text)."""
    where, source = _source(func)
    tree = ast.parse(source)
    fn = tree.body[0]
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise CodePathMoved(f"{where} is not a plain function")
    body = fn.body
    hits = [i for i, stmt in enumerate(body) if matches(stmt)]
    if not hits:
        raise CodePathMoved(f"looked for a statement {what} in {where}; there is none")
    i = hits[-1]
    if i + 1 >= len(body):
        raise CodePathMoved(f"the statement {what} is the last of {where}: no place to stop")
    nxt = body[i + 1]
    first = func.__code__.co_firstlineno
    return first + nxt.lineno - 1, ast.get_source_segment(source, nxt).splitlines()[0]


def stop_line(func: Callable, attr: str) -> tuple[int, str]:
    """(file line of the top-level statement after the one assigning self.<attr>, that statement's text)."""
    return _stop_after(func, lambda stmt: _assigns(stmt, attr), f"assigning self.{attr}")


def call_stop_line(func: Callable, callee: str) -> tuple[int, str]:
    """(file line of the top-level statement after the one calling `callee` (as written, e.g.
    "global_server_args_dict.update"), that statement's text)."""
    return _stop_after(func, lambda stmt: _calls(stmt, callee), f"calling {callee}(...)")


def run_until_after(func: Callable, attr: str, obj: Any, **kwargs) -> Any:
    """Run `func(obj, **kwargs)` (the real method) until the statement after the one that
    assigns `self.<attr>`; return `obj`. Required parameters missing from kwargs are a
    CodePathMoved (the method's signature changed)."""
    return _run_to(func, stop_line(func, attr)[0], f"after self.{attr}", obj, kwargs)


def run_until_after_call(func: Callable, callee: str, obj: Any, **kwargs) -> Any:
    """As run_until_after, stopping after the top-level statement that calls `callee`."""
    return _run_to(func, call_stop_line(func, callee)[0], f"after {callee}(...)", obj, kwargs)


def _run_to(func: Callable, line: int, what: str, obj: Any, kwargs: dict) -> Any:
    sig = inspect.signature(func)
    params = list(sig.parameters.values())[1:]
    missing = [p.name for p in params if p.default is inspect.Parameter.empty
               and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in kwargs]
    if missing:
        raise CodePathMoved(f"{func.__qualname__} now requires {missing}, which this adapter does not supply")
    accepted = {k: v for k, v in kwargs.items() if k in sig.parameters}
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
    raise CodePathMoved(f"{func.__qualname__} returned without reaching line {line} ({what})")


def find_statement(func: Callable, test: str) -> ast.If:
    """The first `if <test>:` statement of `func`'s installed source; CodePathMoved when none."""
    where, source = _source(func)
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
    return _run_alone(func, find_statement(func, test), obj, names)


def run_assignment(func: Callable, attr: str, obj: Any, **names: Any) -> Any:
    """Run only the top-level statement of `func` (its installed source) that assigns
    `self.<attr>`, with `self` bound to `obj` and the method's locals it reads given as
    `names`, in the method's module namespace; return `obj`. For an engine release whose one
    statement parity needs sits in a constructor that otherwise starts a server (SGLang up to
    0.4.8's `TpModelWorker.__init__` builds its ModelConfig from the server args). CodePathMoved
    when there is no such statement, or more than one."""
    where, source = _source(func)
    fn = ast.parse(source).body[0]
    found = [stmt for stmt in getattr(fn, "body", []) if _assigns(stmt, attr)]
    if len(found) != 1:
        raise CodePathMoved(f"looked for one statement assigning self.{attr} in {where}; found {len(found)}")
    return _run_alone(func, found[0], obj, names)


def local_value(func: Callable, name: str, **names: Any) -> Any:
    """The value the one top-level statement of `func` (its installed source) that assigns the local
    `name` gives it, run alone with the function's locals it reads given as `names`, in its module
    namespace. For a trainer whose one choice parity needs sits in a training entry point that
    otherwise starts a run (speculators' `train.cli.main` picks a speculator type's preprocess).
    CodePathMoved when there is no such statement, or more than one."""
    where, source = _source(func)
    fn = ast.parse(source).body[0]
    found = [stmt for stmt in getattr(fn, "body", []) if isinstance(stmt, (ast.Assign, ast.AnnAssign))
             and any(isinstance(t, ast.Name) and t.id == name
                     for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]))]
    if len(found) != 1:
        raise CodePathMoved(f"looked for one statement assigning {name} in {where}; found {len(found)}")
    return _exec_alone(func, found[0], dict(names))[name]


def run_call(func: Callable, callee: str, obj: Any, **names: Any) -> Any:
    """Run only the statement of `func` (at any depth of its installed source) that is a call
    of `callee` (as written, e.g. "initialize_dp_attention"), with `self` bound to `obj` and
    the method's locals it reads given as `names`, in the method's module namespace: the
    engine's own arguments, whatever its release's signature. CodePathMoved when there is no
    such statement, or more than one."""
    where, source = _source(func)
    found = [node for node in ast.walk(ast.parse(source))
             if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == callee]
    if len(found) != 1:
        raise CodePathMoved(f"looked for one statement calling {callee}(...) in {where}; found {len(found)}")
    return _run_alone(func, found[0], obj, names)


def _imports_from(node: ast.AST, package: str) -> bool:
    return any(isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == package
               for n in ast.walk(node))


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def import_as_on_gpu(name: str, flag: str = "_is_cuda", *, package: str) -> ModuleType:
    """Import module `name` from its installed source as it runs on a GPU: without its
    top-level fallbacks `if not (<... flag ...>): from <package>... import ...`, the statements
    that on a machine without `flag` re-bind the module's own classes to another engine's
    (SGLang up to 0.5.7 takes RMSNorm and SiluAndMul from vLLM when it is not on CUDA). With
    `flag` true the statement does nothing; leaving it out keeps the module's own classes, as
    a GPU launch has them (their dispatch still picks the CPU-native forward here). Every
    other statement is the installed code, compiled from its own file, so tracebacks name its
    lines. CodePathMoved when the module has no such statement or was already imported (too
    late to keep its classes)."""
    import importlib.util

    if name in sys.modules:
        if getattr(sys.modules[name], "__parity_as_on_gpu__", False):
            return sys.modules[name]
        raise CodePathMoved(f"{name} was imported before parity could import it as on a GPU")
    spec = _find_spec(name, name)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise ModuleAbsent(name)
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read(), spec.origin)
    kept = [node for node in tree.body
            if not (isinstance(node, ast.If) and isinstance(node.test, ast.UnaryOp)
                    and isinstance(node.test.op, ast.Not) and flag in _names(node.test)
                    and _imports_from(node, package))]
    if len(kept) == len(tree.body):
        raise CodePathMoved(f"looked for a top-level `if not (... {flag} ...): from {package} import ...` "
                            f"in {name}; there is none")
    tree.body = kept
    module = importlib.util.module_from_spec(spec)
    module.__parity_as_on_gpu__ = True
    sys.modules[name] = module
    try:
        exec(compile(tree, spec.origin, "exec"), module.__dict__)  # noqa: S102 - the engine's own module
    except Exception as exc:  # it cannot be loaded in this environment (a missing or older dependency)
        del sys.modules[name]
        raise CodePathMoved(f"looked for {name}; importing it raised {type(exc).__name__}: {exc}") from None
    except BaseException:
        del sys.modules[name]
        raise
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
    return module
