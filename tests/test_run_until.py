"""Running one statement of an engine's own method, and importing an engine module as on a GPU
(parity.extract.run_until), on toy modules: what runs, what does not, and that a statement that
is not where it is looked for is a loud CodePathMoved. No engine runs."""

from __future__ import annotations

import sys
import textwrap

import pytest

from parity.extract import standins
from parity.extract.run_until import (CodePathMoved, import_as_on_gpu, require, run_call,
                                      run_until_after_call)


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """Write modules under a fresh import root; each is removed from sys.modules afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written: list[str] = []

    def write(name: str, source: str):
        path = tmp_path.joinpath(*name.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.parents:
            if parent == tmp_path:
                break
            (parent / "__init__.py").touch()
        path.write_text(textwrap.dedent(source))
        written.append(name)

    yield write
    tops = {w.split(".")[0] for w in written}
    for name in [n for n in sys.modules if n.split(".")[0] in tops]:
        del sys.modules[name]


RUNNER = """
    published = {}
    calls = []

    def initialize_dp_attention(**kwargs):
        calls.append(kwargs)

    class Runner:
        def __init__(self, size):
            self.size = size
            published.update({"size": self.size})
            self.after = "ran"  # must not run

        def init_distributed(self):
            self.before = "ran"  # must not run
            if self.size:
                initialize_dp_attention(size=self.size, port=port)
"""


def test_run_until_after_call_stops_right_after_that_statement(toy):
    toy("toy_runner", RUNNER)
    import toy_runner

    runner = toy_runner.Runner.__new__(toy_runner.Runner)
    run_until_after_call(toy_runner.Runner.__init__, "published.update", runner, size=3)
    assert toy_runner.published == {"size": 3} and runner.size == 3 and not hasattr(runner, "after")
    with pytest.raises(CodePathMoved, match=r"calling missing\(\.\.\.\)"):
        run_until_after_call(toy_runner.Runner.__init__, "missing", runner, size=3)


def test_run_call_runs_that_one_call_with_the_engines_own_arguments(toy):
    toy("toy_runner", RUNNER)
    import toy_runner

    runner = toy_runner.Runner.__new__(toy_runner.Runner)
    runner.size = 2
    run_call(toy_runner.Runner.init_distributed, "initialize_dp_attention", runner, port=7)
    assert toy_runner.calls == [{"size": 2, "port": 7}] and not hasattr(runner, "before")
    with pytest.raises(CodePathMoved, match=r"looked for one statement calling gone\(\.\.\.\).*found 0"):
        run_call(toy_runner.Runner.init_distributed, "gone", runner)


def test_import_as_on_gpu_keeps_the_modules_own_classes(toy):
    toy("toy_other.layers", """
        class RMSNorm:
            origin = "other engine"
    """)
    toy("toy_engine.layernorm", """
        _is_cuda = False

        class RMSNorm:
            origin = "own"

        if not (_is_cuda or False):
            from toy_other.layers import RMSNorm  # noqa: F811
    """)
    module = import_as_on_gpu("toy_engine.layernorm", package="toy_other")
    assert module.RMSNorm.origin == "own" and sys.modules["toy_engine.layernorm"] is module
    assert sys.modules["toy_engine"].layernorm is module
    assert import_as_on_gpu("toy_engine.layernorm", package="toy_other") is module  # once per process


def test_import_as_on_gpu_is_loud_where_there_is_no_fallback_or_it_is_too_late(toy):
    toy("toy_plain.layernorm", """
        class RMSNorm:
            pass
    """)
    with pytest.raises(CodePathMoved, match="there is none"):
        import_as_on_gpu("toy_plain.layernorm", package="toy_other")
    import toy_plain.layernorm  # noqa: F401

    with pytest.raises(CodePathMoved, match="imported before parity could"):
        import_as_on_gpu("toy_plain.layernorm", package="toy_other")


def test_import_as_on_gpu_names_why_a_module_cannot_be_loaded_here(toy):
    toy("toy_old.layernorm", """
        _is_cuda = False
        from toy_not_installed_anywhere import helper

        if not (_is_cuda or False):
            from toy_other.layers import RMSNorm
    """)
    with pytest.raises(CodePathMoved, match="importing it raised ModuleNotFoundError: No module named "
                                            "'toy_not_installed_anywhere'"):
        import_as_on_gpu("toy_old.layernorm", package="toy_other")
    assert "toy_old.layernorm" not in sys.modules


def test_require_names_a_package_that_cannot_be_imported_here(toy):
    toy("toy_broken.srt.layers", "X = 1\n")
    toy("toy_broken.__init__", "import toy_not_installed_anywhere\n")  # the package's own import fails
    for _ in range(2):  # the second time its import already failed once in this process
        with pytest.raises(CodePathMoved) as exc:
            require("toy_broken.srt.layers.X")
        assert "No module named 'toy_not_installed_anywhere'" in str(exc.value), exc.value


def test_absent_names_are_stand_ins_that_raise_when_used(toy):
    toy("toy_lib.cache", "def kept():\n    return 1\n")
    import toy_lib.cache as cache

    assert standins.absent_names("toy_lib.cache", "kept", "gone") == ["gone"]
    assert cache.kept() == 1
    with pytest.raises(standins.StandInUsed, match="toy_lib.cache.gone was used"):
        cache.gone()
