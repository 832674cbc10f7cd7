"""A failure is typed by the frame that raised it, never by its words: an exception the
interpreter raised inside parity's own code (the innermost frame that is parity's or a run
package's is parity's) is a bug of parity (InternalError, exit 3; "parity cannot run" in the
release table), never the engine's refusal (parity.extract.child.parity_fault). The case that
asked for it: publishing the phase backends of an SGLang release whose ModelRunner has no
`_get_attention_backend` handed None to run_until's source reader, and the AttributeError
raised there read as the engine's refusal for 14 releases."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from parity.contract.reply import stop_from_reply
from parity.errors import INTERNAL_ERROR_KEY, InternalError, UserError
from parity.extract import child
from parity.extract.child import parity_fault
from parity.extract.run_until import stop_line
from parity.sweep.outcome import Outcome, of_error
from parity.sweep.run import refused


def raised(fn, *args) -> BaseException:
    with pytest.raises(Exception) as info:
        fn(*args)
    return info.value


def parity_bug() -> AttributeError:
    """The regression itself: run_until's source reader handed None (parity's AttributeError)."""
    exc = raised(stop_line, None, "attn_backend")
    assert isinstance(exc, AttributeError)
    return exc


def engine_statement(source: str, **names) -> BaseException:
    """An exception raised by a statement run as the installed engine's own code: compiled under
    the file name of the installed SGLang's server_args.py, as parity's run_until runs the
    engine's statements (found, not imported: importing SGLang takes half a minute)."""
    [root] = child.package_roots("sglang")
    code = compile(source, str(root / "srt" / "server_args.py"), "exec")
    return raised(exec, code, dict(names))


def test_an_error_the_interpreter_raised_in_parity_s_code_is_parity_s_bug():
    fault = parity_fault(parity_bug())
    assert fault is not None and fault.startswith("AttributeError: ")
    assert "(at parity/extract/run_until.py:" in fault and "_source)" in fault


def test_an_error_raised_in_the_engine_s_code_is_the_engine_s_even_when_parity_called_it():
    exc = engine_statement("limit = None\nlimit <= 1")
    assert isinstance(exc, TypeError)
    assert child.owner(exc.__traceback__.tb_next.tb_frame.f_code.co_filename, ("sglang",)) == "sglang"
    assert parity_fault(exc) is None


def test_a_third_party_raising_below_parity_s_call_is_not_decided_parity_s():
    """A library raising inside a call parity made (pathlib here; pydantic running the engine's
    own validators in vLLM's config classes) may be judging what the engine handed it: not
    called parity's bug from the frames (it keeps the class its reader gives it)."""
    exc = raised(child.owner, None)  # Path(None): TypeError raised inside pathlib
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_frame.f_code.co_filename.endswith("pathlib.py")
    assert parity_fault(exc) is None


def test_a_raise_statement_of_parity_is_typed_where_it_was_raised_and_judged_by_its_cause():
    """`raise X(...)` in parity's code is a typed error (a stand-in relied on, a family's
    CodePathMoved), not a bug; one raised `from` another error is judged by that error: parity's
    bug underneath stays parity's bug, the engine's own error stays the engine's."""
    from parity.extract.run_until import CodePathMoved, require

    deliberate = raised(require, "json.no_such_name_here")
    assert isinstance(deliberate, CodePathMoved) and parity_fault(deliberate) is None

    namespace: dict = {}  # a translation as parity's code writes one (compiled under a parity module's name)
    exec(compile("def translate(inner):\n    raise ValueError('the draft could not be built') from inner\n",
                 child.__file__, "exec"), namespace)
    translate = namespace["translate"]

    assert parity_fault(raised(translate, parity_bug())) is not None
    assert parity_fault(raised(translate, engine_statement("None.speculative_num_steps"))) is None


def test_an_assert_of_parity_failing_is_parity_s_bug():
    import parity.extract.child as module

    code = compile("assert False, 'a parity invariant'", module.__file__, "exec")
    assert parity_fault(raised(exec, code, {})).startswith("AssertionError: a parity invariant (at parity/extract/child.py:1")


def test_the_class_comes_from_the_frames_not_the_words():
    """The same type and the same sentence, raised by the interpreter in parity's code, by a
    raise statement of parity's, and by the engine's own code: only the first is parity's bug.
    A classifier that read the message would give all three the same class, and fail here."""
    bug = parity_bug()
    same_words = AttributeError(str(bug))

    def parity_raises():
        raise same_words

    by_statement = raised(parity_raises)
    by_engine = engine_statement(f"raise AttributeError({str(bug)!r})")
    assert str(bug) == str(by_statement) == str(by_engine)
    assert parity_fault(bug) is not None
    assert parity_fault(by_statement) is None
    assert parity_fault(by_engine) is None


def test_a_probe_s_reply_carries_parity_s_bug_and_the_parent_reads_an_internal_error(monkeypatch):
    """with_limits: a handler stopped by parity's own bug replies with INTERNAL_ERROR_KEY (and a
    bug met on the way and reported as a finding too); the parent raises InternalError (not a
    UserError: exit 3), and the sweep counts the cell "parity cannot run", never "engine refuses"."""
    monkeypatch.setattr(child, "faults", [])
    monkeypatch.setattr(child, "limits", [])

    def handler(request):
        stop_line(None, "attn_backend")

    reply = child.with_limits(handler, "sglang")({})
    assert "run_until.py" in reply[INTERNAL_ERROR_KEY]
    reply["release"] = "0.4.6"
    stop = stop_from_reply(reply, "sglang")
    assert isinstance(stop, InternalError) and not isinstance(stop, UserError)
    assert str(stop).startswith("parity's own code failed running sglang 0.4.6: AttributeError")
    assert of_error(stop) is Outcome.parity_cannot_run
    assert refused(stop)["outcome"] == "parity cannot run"

    def reports_it(request):  # the probe caught it and reported it in its own words (a finding)
        try:
            stop_line(None, "attn_backend")
        except Exception as exc:  # noqa: BLE001
            return {"findings": [child.finding("engine_error", child.one_line(exc), "error")]}

    monkeypatch.setattr(child, "faults", [])
    assert INTERNAL_ERROR_KEY in child.with_limits(reports_it, "sglang")({})

    def engine_refuses(request):
        raise engine_statement("None.speculative_num_steps")

    monkeypatch.setattr(child, "faults", [])
    with pytest.raises(AttributeError):  # the engine's own error: reply_over_stdio reports it as the engine's
        child.with_limits(engine_refuses, "sglang")({})
    assert child.faults == []


def test_owner_reads_module_paths(monkeypatch):
    """Whose code a file is: parity's, a package this process runs (RUN_PACKAGES, which with_limits
    fills: set here, as a probe's would be, not left to whichever test ran before in this worker)."""
    monkeypatch.setattr(child, "RUN_PACKAGES", ["sglang"])
    assert child.owner(child.__file__) == "parity"
    assert child.owner(importlib.util.find_spec("json").origin) is None
    [root] = child.package_roots("sglang")
    assert child.owner(str(root / "srt" / "server_args.py")) == "sglang"
    assert child.owner(str(root / "srt" / "server_args.py"), ["vllm"]) is None  # a package this process does not run
    assert child.owner(str(Path(root).parent / "torch" / "nn" / "modules" / "module.py")) is None


@pytest.mark.slow  # runs SGLang 0.5.23's probe, with parity's own bug injected
def test_parity_s_bug_inside_a_real_probe_is_exit_3_and_parity_cannot_run(tmp_path, monkeypatch):
    """The regression end to end: parity's run_until raising inside the real SGLang probe, where
    the probe reports a failure as the engine's (setting the capture). The CLI ends in exit 3
    (internal error, one line, no traceback), never a verdict or exit 2; the sweep's cell is
    "parity cannot run", never "engine refuses"."""
    from parity.extract.engines import engine
    from parity.sweep.cases import SERVING_CASES
    from parity.sweep.run import serving_cell

    from .helpers import LLAMA, ROOT, drift_overrides, run_parity

    overrides = drift_overrides("tests.drift.serving_parity_bug_in_run_until")
    proc = run_parity("contract", "serving", "--target-config", str(LLAMA), "--draft",
                      str(ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3"), overrides=overrides)
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("parity: internal error: InternalError: parity's own code failed running sglang "), line
    assert "AttributeError" in line and "(at parity/extract/run_until.py:" in line and "Traceback" not in proc.stderr
    monkeypatch.setenv("PARITY_PROBE_OVERRIDES", overrides)
    monkeypatch.setenv("PARITY_NO_CACHE", "1")
    cell = serving_cell(SERVING_CASES[0], engine("sglang"), tmp_path)
    assert cell["outcome"] == "parity cannot run" and "fc" not in cell, cell
    assert cell["error"].startswith("parity's own code failed running sglang"), cell
