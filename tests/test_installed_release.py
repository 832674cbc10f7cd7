"""Which release runs, and where (parity.extract.installed, parity.record; issue 47).

No engine runs here: a side that is not installed (vLLM and SpecForge are not in the checkout's
main environment) is refused before any child starts (the fast tier's guard fails a test that
starts one); the RECORD comparison runs on a real installed distribution copied into a folder of
the test's; the lock's release line and the message clean-up are plain functions. The run itself
(the installed code imported here, else parity's environment of the release, a bump caught by a
lock) is tests/test_ci_recipe.py.
"""

from __future__ import annotations

import json
import shutil
import sys
from importlib import metadata
from pathlib import Path

import pytest

from parity import cli, record
from parity.errors import no_addresses
from parity.extract.child import imports_failing, missing_dependency
from parity.lock import read_lock, releases_changed

from .helpers import LLAMA, ROOT

DRAFT = ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3"


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("side, flag, argv", [
    ("--engine vllm", "--vllm", ["check", "--engine", "vllm", "--dump-layout", "h2,h16,h29,h32"]),
    ("--engine vllm", "--vllm", ["contract", "serving", "--engine", "vllm"]),
    ("--engine vllm", "--vllm", ["lock", "NAME.json", "--engine", "vllm", "--dump-layout", "h2,h16,h29,h32"]),
    ("--trainer specforge", "--specforge", ["check", "--trainer", "specforge"]),
])
def test_a_side_neither_installed_nor_named_is_one_line_before_anything_runs(side, flag, argv, capsys, tmp_path):
    argv = [str(tmp_path / a) if a.endswith(".json") else a for a in argv]
    rc, out, err = run(capsys, *argv, "--target-config", LLAMA, "--draft", DRAFT)
    dist = side.split()[1]
    verb = "serve" if side.startswith("--engine") else "train with"
    assert (rc, out) == (2, "")
    assert err == (f"parity: {side}: {dist} is not installed in {sys.executable}; install the release you {verb} "
                   f"(pip install {dist}==VERSION) or name one with {flag} VERSION\n")
    assert not list(tmp_path.iterdir())  # no lock written


def test_version_lists_each_engine_and_trainer_with_its_installed_release(capsys):
    rc, out, _ = run(capsys, "--version")
    lines = out.splitlines()
    assert rc == 0 and lines[0].startswith("parity ") and "torch" in lines[0] and "transformers" in lines[0]
    here = f"installed; runs in this interpreter ({sys.executable}), or, where its code cannot be imported here, in " \
           "parity's environment "
    sides = {line.split(":")[0].strip(): line for line in lines[1:]}
    assert sides["engine  sglang 0.5.23"].endswith(f"{here}sglang-0.5.23 (built)")
    assert sides["trainer speculators 0.9.0"].endswith(f"{here}speculators-0.9.0 (built)")
    assert sides["engine  vllm"] == "  engine  vllm: not installed (--vllm VERSION runs parity's environment of a release)"
    assert sides["trainer specforge"].endswith("not installed (--specforge VERSION runs parity's environment of a "
                                               "release)")


def _copied(name: str, where: Path) -> record.Installed:
    """A real installed distribution (`name`, from this interpreter) copied into `where`, as a
    site-packages folder holding it alone."""
    dist = metadata.distribution(name)
    site = Path(str(dist.locate_file("")))
    for f in dist.files:
        if str(f).startswith(".."):
            continue
        (where / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(site / f, where / f)
    found = record.installed(name, where)
    assert found is not None and found.version == dist.version and found.editable is None
    return found


def test_an_edited_or_removed_installed_file_is_named_against_its_record(tmp_path):
    mine = _copied("tomlkit", tmp_path / "site")
    assert mine.hashes and record.edited(mine) == []
    (mine.site / "tomlkit" / "api.py").write_text((mine.site / "tomlkit" / "api.py").read_text() + "\n# local\n")
    (mine.site / "tomlkit" / "toml_file.py").unlink()
    assert record.edited(mine) == ["tomlkit/api.py", "tomlkit/toml_file.py (removed)"]


def test_two_installations_of_a_release_differ_where_their_records_do(tmp_path):
    mine, theirs = _copied("tomlkit", tmp_path / "a"), _copied("tomlkit", tmp_path / "b")
    assert record.differing(mine, theirs) == []
    rec = next((theirs.site).glob("tomlkit-*.dist-info")) / "RECORD"
    rec.write_text(rec.read_text().replace("tomlkit/api.py,sha256=", "tomlkit/api.py,sha256=X"))
    assert record.differing(mine, record.installed("tomlkit", theirs.site)) == ["tomlkit/api.py"]
    assert record.named([f"f{i}" for i in range(5)]) == "f0, f1, f2 and 2 more"


def test_an_editable_install_says_where_it_is(tmp_path):
    mine = _copied("tomlkit", tmp_path / "site")
    info = next(mine.site.glob("tomlkit-*.dist-info"))
    (info / "direct_url.json").write_text(json.dumps({"url": "file:///src/tomlkit", "dir_info": {"editable": True}}))
    assert record.installed("tomlkit", mine.site).editable == "/src/tomlkit"


def test_a_lock_under_another_release_says_which():
    lock = read_lock(ROOT / "contracts" / "llama-3.1-8b-eagle3.json")
    assert lock.engine_release == "0.5.23" and lock.trainer_release == "0.9.0"
    assert releases_changed(lock, "0.5.23", "0.9.0") is None
    assert releases_changed(lock, "0.5.22", "0.9.0") == "locked under sglang 0.5.23, checked under sglang 0.5.22"
    assert releases_changed(lock.model_copy(update={"engine_release": None}), "0.5.22", "0.8.1") == \
        "locked under speculators 0.9.0, checked under speculators 0.8.1"


def test_bundled_locks_hold_no_path_of_the_machine_they_were_made_on():
    for path in (ROOT / "contracts").glob("*.json"):
        data = json.loads(path.read_text())
        provenance = data["training"]["provenance"]
        assert provenance["python"] is None and "source" not in provenance and data["engine_release"], path


def test_no_message_shows_a_memory_address():
    said = "Value {bad cannot be converted to <function loads at 0x7f3a2b1c4d60>."
    assert no_addresses(said) == "Value {bad cannot be converted to <function loads>."
    assert no_addresses("<a.B object at 0xDEAD> and <c at 0x1>") == "<a.B object> and <c>"
    assert no_addresses("at 0x10 is an offset") == "at 0x10 is an offset"


def _raise(exc: BaseException):
    def go():
        raise exc
    return go


def test_a_missing_dependency_is_told_from_a_code_path_that_moved():
    dep = ModuleNotFoundError("No module named 'cbor2'", name="cbor2")
    assert missing_dependency(dep, ("vllm",)) is dep
    assert missing_dependency(ModuleNotFoundError("x", name="vllm.v1.gone"), ("vllm",)) is None  # its own: moved
    try:  # wrapped as the code-path check wraps it (raise ... from None keeps the context)
        try:
            raise dep
        except ImportError:
            raise LookupError("looked for vllm.config; importing vllm.config raised ModuleNotFoundError") from None
    except LookupError as wrapped:
        assert missing_dependency(wrapped, ("vllm",)) is dep
    assert imports_failing(_raise(dep), "vllm") == ("its code cannot be imported here: ModuleNotFoundError: No "
                                                      "module named 'cbor2'")
    assert imports_failing(_raise(ImportError("cannot import name 'X' from 'transformers'", name="transformers")),
                           "vllm").startswith("its code cannot be imported here: ImportError: cannot import name")
    assert imports_failing(_raise(RuntimeError("CUDA")), "vllm") is None  # not an import: the run meets it
    assert imports_failing(lambda: None, "vllm") is None


def test_the_report_says_where_each_side_ran_and_the_releases_a_lock_was_made_under():
    from parity.report import render_check

    from .test_rendering import check_result, serving, training

    s = serving(("h2", "h30", "h58"))
    moved = s.provenance.model_copy(update={"source": "environment", "environment": "sglang-0.5.23"})
    flagged = training().provenance.model_copy(update={"source": "flag", "environment": "speculators-0.8.1"})
    result = check_result(training().model_copy(update={"provenance": flagged}),
                          s.model_copy(update={"provenance": moved}))
    text = render_check(result.model_copy(update={"releases": "locked under sglang 0.5.22, checked under sglang 0.5.23"}))
    assert "  training  speculators 0.9.0 (the release named, run in parity's environment speculators-0.8.1): " in text
    assert "  serving   sglang 0.5.23 (installed, run in parity's environment sglang-0.5.23): ids [2, 30, 58]" in text
    assert "  lock      locked under sglang 0.5.22, checked under sglang 0.5.23: what changed is below" in text
    assert json.loads(result.model_dump_json())["serving"]["provenance"]["source"] == "environment"
