"""The CLI's promises (issues 12 and 52): honest verdicts, exit 2 with one line on bad input,
exit 130 on Ctrl-C, no hangs on special files, lock files checked before they are trusted.

Each test is named after the promise it keeps; each failed on the code before the fix.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from parity import cli, forkserver
from parity.fixtures import DraftRecipe, speculators_draft

from .helpers import DEEPSEEK, LLAMA, ROOT, ctrl_c_reaches_it, sglang_draft

TINY = str(ROOT / "fixtures" / "targets" / "tiny-llama-32l" / "config.json")
KIMI_LOCK = ROOT / "contracts" / "kimi-k2.5-eagle3.json"
LLAMA_DRAFT = ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3"


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line_exit_2(rc: int, out: str, err: str) -> None:
    assert rc == 2, (rc, out, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("parity: "), err
    assert "Traceback" not in out + err


def parity_subprocess(*argv, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "parity", *map(str, argv)], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, **kw)


def console_script(where: Path, before: str = "") -> list[str]:
    """The `parity` console script as pip writes it from pyproject.toml's [project.scripts] (so
    that a stale installed one tests nothing old), with `before` run first: the command line."""
    import tomllib

    module, function = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["parity"].split(":")
    script = where / "parity-script"
    script.write_text(f"{before}\nimport re\nimport sys\nfrom {module} import {function}\n"
                      f"if __name__ == '__main__':\n    sys.exit({function}())\n")
    return [sys.executable, str(script)]


def python_m_parity(where: Path, before: str = "") -> list[str]:
    """`python -m parity`, with `before` run first (as a module run with -m, as parity is)."""
    (where / "before_parity.py").write_text(f"{before}\nimport runpy; runpy.run_module('parity', run_name='__main__')\n")
    return [sys.executable, "-m", "before_parity"]


ENTRIES = {"console script": console_script, "python -m parity": python_m_parity}


# -- 1. verdicts a CI job can trust -----------------------------------------------------------


@pytest.mark.slow
def test_contract_serving_exits_1_when_a_slot_is_never_captured(tmp_path, capsys):
    draft = sglang_draft(tmp_path / "d", ids=[1, 15, 40])  # a deeper target's ids on a 32-layer one
    rc, out, err = run(capsys, "contract", "serving", "--target-config", LLAMA, "--draft", draft, "--json")
    data = json.loads(out)
    assert rc == 1, err
    assert "not_captured" in [f["kind"] for f in data["findings"]]


@pytest.mark.slow
def test_contract_serving_exits_1_on_a_draft_the_engine_cannot_load(capsys):
    draft = speculators_draft(DraftRecipe())
    capsys.readouterr()
    rc, out, err = run(capsys, "contract", "serving", "--target-config", TINY, "--draft", draft, "--json")
    assert rc == 1, err
    assert "draft_unloadable" in [f["kind"] for f in json.loads(out)["findings"]]


@pytest.mark.slow
def test_contract_serving_exits_0_on_a_servable_draft(tmp_path, capsys):
    rc, out, err = run(capsys, "contract", "serving", "--target-config", LLAMA,
                       "--draft", sglang_draft(tmp_path / "d", ids=[1, 15, 28]))
    assert rc == 0, err


# -- 2. a draft the engine cannot load is 'unservable', and the advice is export's own ---------


@pytest.mark.slow
def test_unservable_verdict_gives_the_reason_first_and_export_checked_advice(capsys):
    draft = speculators_draft(DraftRecipe())
    capsys.readouterr()
    args = ["check", "--target-config", TINY, "--draft", draft, "--dump-layout", "h2,h16,h29,h32"]
    rc, out, _ = run(capsys, *args, "--json")
    data = json.loads(out)
    assert rc == 1 and data["verdict"] == "unservable"
    assert "cannot load" in data["unservable"]
    assert data["suggestion"] is None  # no 'write these ids into the speculators config'
    assert data["export"] == {"exportable": True, "eagle_aux_hidden_state_layer_ids": [1, 15, 28],
                              "serving_fc_input": ["h2", "h16", "h29"], "reason": None}
    rc, out, _ = run(capsys, *args, "--no-verify")
    lines = out.splitlines()
    assert rc == 1 and lines[0].startswith("parity check: UNSERVABLE")
    assert lines[2].strip().startswith("reason") and "MISMATCH" not in out


@pytest.mark.slow
def test_unservable_advice_never_suggests_an_export_that_export_refuses(capsys):
    draft = speculators_draft(DraftRecipe(norm_before_residual=True))  # a flag SGLang drops
    capsys.readouterr()
    rc, out, _ = run(capsys, "check", "--target-config", TINY, "--draft", draft,
                     "--dump-layout", "h2,h16,h29,h32", "--json")
    data = json.loads(out)
    assert rc == 1 and data["verdict"] == "unservable"
    assert data["export"]["exportable"] is False and "norm_before_residual" in data["export"]["reason"]
    assert "parity-export-" not in out  # never an internal temp path


@pytest.mark.slow
def test_unservable_because_the_engine_raises_on_the_ids_still_gets_the_id_fix(tmp_path, capsys):
    """A draft that loads, with ids SGLang 0.5.23 raises on (-1 on DeepSeek): unservable as
    written, and the fix is other ids, found on the engine (not an export)."""
    draft = sglang_draft(tmp_path / "d", ids=[-1, 2, 30], hidden_size=7168)
    rc, out, _ = run(capsys, "check", "--target-config", DEEPSEEK, "--draft", draft,
                     "--dump-layout", "h0,h3,h31,h59", "--no-verify", "--json")
    data = json.loads(out)
    assert rc == 1 and data["verdict"] == "unservable" and data["export"] is None
    assert data["suggestion"]["eagle_aux_hidden_state_layer_ids"] == [0, 3, 31]
    rc, out, _ = run(capsys, "check", "--target-config", DEEPSEEK, "--draft", draft,
                     "--dump-layout", "h0,h3,h31,h59", "--no-verify")
    assert "UNSERVABLE" in out and "FIX: write" in out and "[0, 3, 31]" in out


# -- 5. notes speak the config's own convention ----------------------------------------------


@pytest.mark.slow
def test_notes_on_engine_format_ids_never_read_them_as_datagen_ids(capsys):
    rc, out, err = run(capsys, "check", "--target-config", DEEPSEEK,
                       "--draft", ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3-fixed",
                       "--dump-layout", "h0,h3,h31,h59", "--no-verify")
    assert rc == 0, out + err
    assert "PARITY" in out and "data-generation" not in out
    assert not any(f"parity-{t}-" in out + err for t in ("serving", "draft", "fix", "export", "probe"))  # no internal temp path


# -- 6. bad input: exit 2 and one line -------------------------------------------------------


def _target(tmp_path: Path, **changes) -> Path:
    cfg = json.loads(LLAMA.read_text())
    cfg.update(changes)
    path = tmp_path / "target.json"
    path.write_text(json.dumps(cfg))
    return path


@pytest.mark.parametrize("case", ["deeply nested JSON", "architectures [123]", "architectures a string",
                                  "architectures empty", "hidden_size a string"])
def test_bad_target_config_is_exit_2(tmp_path, capsys, case):
    if case == "deeply nested JSON":
        target = tmp_path / "target.json"
        target.write_text("[" * 100_000 + "]" * 100_000)
    else:
        changes = {"architectures [123]": {"architectures": [123]},
                   "architectures a string": {"architectures": "LlamaForCausalLM"},
                   "architectures empty": {"architectures": []},
                   "hidden_size a string": {"hidden_size": "4096"}}[case]
        target = _target(tmp_path, **changes)
    rc, out, err = run(capsys, "contract", "training", "--target-config", target, "--dump-layout", "h1,h2,h3")
    one_line_exit_2(rc, out, err)


def _lock(tmp_path: Path, **changes) -> Path:
    data = json.loads(KIMI_LOCK.read_text())
    data.update(changes)
    for key in ("target_config", "draft"):
        data[key] = str((KIMI_LOCK.parent / data[key]).resolve())
    path = tmp_path / "lock.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("layout", [["h0", "hx", "h31", "h59"], [], ["h0.delta", "h3"]])
def test_lock_with_a_bad_dump_layout_is_exit_2(tmp_path, capsys, layout):
    rc, out, err = run(capsys, "check", "--contract", _lock(tmp_path, dump_layout=layout))
    one_line_exit_2(rc, out, err)


def test_lock_with_a_bad_dump_layout_fails_the_plugin_item_with_one_reason(tmp_path):
    _lock(tmp_path, dump_layout=["h0", "hx"])
    proc = subprocess.run([sys.executable, "-m", "pytest", "-m", "parity", "-p", "no:cacheprovider",
                           "--parity-contracts", str(tmp_path), str(tmp_path)], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "parity could not check this pair" in proc.stdout and "Traceback" not in proc.stdout


@pytest.mark.parametrize("where", ["a directory", "under a file", pytest.param("a read-only place", marks=pytest.mark.slow),
                                   "the target config"])  # /sys is found unwritable after the speculators probe
def test_lock_onto_an_impossible_place_is_exit_2(tmp_path, capsys, where):
    (tmp_path / "file").write_text("x")
    target = _target(tmp_path)
    out_path = {"a directory": tmp_path, "under a file": tmp_path / "file" / "lock.json",
                "a read-only place": Path("/sys/parity-lock.json"), "the target config": target}[where]
    before = target.read_bytes()
    rc, out, err = run(capsys, "lock", out_path, "--target-config", target,
                       "--draft", sglang_draft(tmp_path / "d", ids=[1, 15, 28]),
                       "--dump-layout", "h2,h16,h29,h32", "--update")
    one_line_exit_2(rc, out, err)
    assert target.read_bytes() == before


def test_lock_onto_a_full_disk_is_exit_2_and_leaves_nothing(tmp_path):
    """A real ENOSPC-like failure: the writer runs under a 100-byte file-size limit."""
    code = ("import resource, signal, sys; from pathlib import Path\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))\n"
            "from parity.lock import write_atomically\n"
            "from parity.inputs import InputError\n"
            "try:\n    write_atomically(Path(sys.argv[1]), 'x' * 10000)\n"
            "except InputError as exc:\n    print('InputError:', exc)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "lock.json")], capture_output=True,
                          text=True, cwd=ROOT, timeout=60)
    assert proc.stdout.startswith("InputError: lock file") and "cannot be written" in proc.stdout, proc
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("what", ["truncated dump", "random dump", "random draft weights"])
def test_replay_with_corrupt_safetensors_is_exit_2(tmp_path, capsys, what):
    import shutil

    src = ROOT / "fixtures" / "replay"
    draft, data = tmp_path / "draft", tmp_path / "data"
    shutil.copytree(src / "draft", draft)
    shutil.copytree(src / "data", data)
    victim = {"truncated dump": data / "hidden_states" / "hs_3.safetensors",
              "random dump": data / "hidden_states" / "hs_0.safetensors",
              "random draft weights": draft / "model.safetensors"}[what]
    if what == "truncated dump":
        victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    else:
        victim.write_bytes(os.urandom(4096))
    rc, out, err = run(capsys, "replay", "--draft", draft, "--data", data, "--verifier", src / "target",
                       "--dump-layout", "h0,h2,h5,h7")
    one_line_exit_2(rc, out, err)
    assert victim.name in err


@pytest.mark.parametrize("argv, command", [
    (["contract", "serving", "--target-config", LLAMA, "--draft", LLAMA_DRAFT, "--serve-args"], "parity contract serving"),
    (["contract", "training", "--dump-layout", "h1,h2"], "parity contract training"),
    (["matrix", "--no-such-flag"], "parity matrix"),
])
def test_a_usage_error_names_the_command_the_user_ran(capsys, argv, command):
    """Before: `(see parity serving --help)`, a command that does not exist, and an unknown flag
    of any command sent the user to `parity --help`."""
    with pytest.raises(SystemExit) as exited:
        cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    one_line_exit_2(exited.value.code, out, err)
    assert err.rstrip().endswith(f"(see {command} --help)"), err


def test_a_config_class_refusal_names_the_key_at_fault():
    """vLLM's config classes are pydantic dataclasses: an unknown `--speculative-config` key is
    refused as "Unexpected keyword argument", the key only in the error's location (before: the
    line gave the message alone)."""
    import pydantic

    from parity.extract.engines.vllm.probe import _words

    @pydantic.dataclasses.dataclass(config=pydantic.ConfigDict(extra="forbid"))
    class SpeculativeConfig:
        method: str | None = None

    with pytest.raises(pydantic.ValidationError) as refused:
        SpeculativeConfig(method="eagle3", draft_max_model_len=2048)
    assert _words(refused.value) == "SpeculativeConfig: draft_max_model_len: Unexpected keyword argument"


# -- 7. Ctrl-C: exit 130, no traceback ---------------------------------------------------------


@pytest.mark.parametrize("entry", ["python -m parity", "console script"])
@pytest.mark.parametrize("after", [0.05, 0.2, 0.5, 1.0,  # importing the CLI, parsing: no probe runs yet
                                   *(pytest.param(s, marks=pytest.mark.slow) for s in (1.5, 3.0, 6.0))])  # a probe may run
def test_sigint_exits_130_without_a_traceback(tmp_path, entry, after):
    """A Ctrl-C at any moment: exit 130, `parity: interrupted` alone on stderr, nothing left in
    TMPDIR. Before, the console script printed a KeyboardInterrupt traceback while it imported
    (up to seconds on a loaded machine)."""
    argv = {"python -m parity": [sys.executable, "-m", "parity"], "console script": console_script(tmp_path)}[entry]
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    # A probe runs when it is hit (no reply cache), in a server of the command's own: the test
    # run's warm ones (forkserver.SHARED) would fork the whole check in under 3 s on a fast machine.
    own_servers = {**{k: v for k, v in os.environ.items() if k != forkserver.SHARED},
                   "PARITY_NO_CACHE": "1", "TMPDIR": str(tmpdir)}
    wait = after
    for _ in range(6):
        proc = subprocess.Popen([*argv, "check", "--target-config", DEEPSEEK,
                                 "--draft", ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3",
                                 "--dump-layout", "h0,h3,h31,h59"], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=ctrl_c_reaches_it,
                                env=own_servers)
        time.sleep(wait)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        # The interrupt can land while the interpreter itself still starts, before any code of
        # parity's exists to handle it: before CPython installs its own handler (the process ends
        # by the signal, saying nothing), or, on a loaded machine, while it imports `site` (which
        # runs the .pth files: an editable install's imports pathlib), CPython's own fatal error,
        # or while it finds and imports the package on its way to parity.entry (CPython's own
        # KeyboardInterrupt traceback, no frame of parity.entry in it, and death by SIGINT).
        # Not what is tested here, so the interrupt is sent again, later.
        before_entry = proc.returncode == -signal.SIGINT and "parity/entry.py" not in err
        # Or after the check had ended on its own (its report out, exit 0 or 1): on a fast machine,
        # with the run's warm servers forking its probes, the whole check takes under 3 s. Not
        # what is tested either: the interrupt is sent again, sooner.
        ended = proc.returncode in (0, 1) and out.startswith("parity check:")
        if ("init_import_site" in err or before_entry) and wait < after * 16:
            wait *= 4  # at most 16 times the moment asked: a fast-tier case stays before any probe answers
        elif ended:
            wait /= 3
        else:
            break
    assert (proc.returncode, err) == (130, "parity: interrupted\n"), (proc.returncode, err[-2000:])
    assert "Traceback" not in out and list(tmpdir.iterdir()) == []


# Where the Ctrl-C lands decides nothing: one that leaves an exec() of a string (dataclasses build
# their methods so, hundreds of times in an import) made CPython end the process by SIGINT
# (status -2) after parity had handled it (CI, once in many runs). Made certain here: the
# interrupt is raised from inside such an exec, in the command (main's handler) or while
# parity.cli is imported (__main__'s).
_INTERRUPT_IN_EXEC = {
    "in the command": "import parity.cli as c; c._main = lambda argv: exec('raise KeyboardInterrupt')",
    "while importing": ("import sys\n"
                        "class Stop:\n"
                        "    def find_spec(self, name, path=None, target=None):\n"
                        "        if name == 'parity.cli': exec('raise KeyboardInterrupt')\n"
                        "sys.meta_path.insert(0, Stop())"),
}


AS_PYTHON_M = "import runpy; runpy.run_module('parity', run_name='__main__')"  # as `python -m parity` is
AS_CONSOLE_SCRIPT = "from parity.entry import main\nraise SystemExit(main())"  # as the console script is


def _interrupted(tmp_path, setup: str, start: str, command: str) -> subprocess.CompletedProcess:
    """`parity COMMAND`, started by `start` after `setup` (which arranges the interrupt), run with
    -m (-c exits from inside its own error printing)."""
    (tmp_path / "interrupted_parity.py").write_text(f"{setup}\n{start}\n")
    return subprocess.run([sys.executable, "-m", "interrupted_parity", command], cwd=ROOT, capture_output=True,
                          text=True, preexec_fn=ctrl_c_reaches_it, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])})


@pytest.mark.parametrize("where", sorted(_INTERRUPT_IN_EXEC))
def test_an_interrupt_inside_an_exec_of_a_string_still_exits_130(tmp_path, where):
    proc = _interrupted(tmp_path, _INTERRUPT_IN_EXEC[where], AS_PYTHON_M, "check")
    assert (proc.returncode, proc.stderr) == (130, "parity: interrupted\n")


# Where the Ctrl-C lands decides nothing (cases met in the suite's Ctrl-C test, made certain here):
# pydantic-core turned a KeyboardInterrupt raised while it built a model's serializer (an engine's
# reply models, imported by the command) into its own SchemaError, which left the CLI with a
# traceback and exit 1; and one landing while parity.entry imported parity.errors ended the
# process by SIGINT with a traceback.
_INTERRUPT_TURNED = {
    "turned into a library's error in the command": (
        "import signal\nimport parity.cli as c\n"
        "def run(argv):\n"
        "    try:\n"
        "        signal.raise_signal(signal.SIGINT)\n"
        "        for _ in range(1000): pass\n"
        "    except KeyboardInterrupt as exc:\n"
        "        raise ValueError('SchemaError: Error building serializer: KeyboardInterrupt') from exc\n"
        "c._main = run"),
    "while parity.entry imports parity.errors": (
        "import signal, sys\n"
        "class Hit:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'parity.errors' and 'parity.entry' in sys.modules:\n"
        "            sys.meta_path.remove(self)\n"
        "            signal.raise_signal(signal.SIGINT)\n"
        "sys.meta_path.insert(0, Hit())"),
    # A Ctrl-C landing in a weakref callback (importlib's module locks have one): CPython cannot
    # raise there, prints "Exception ignored in" with a traceback, and the command ran on to its
    # end (a CI run of the timed test met it, its check running the probes after the Ctrl-C).
    "in a weakref callback, where CPython cannot raise it": (
        "import signal, time, weakref\nimport parity.cli as c\n"
        "class Held: pass\n"
        "def run(argv):\n"
        "    held = Held()\n"
        "    kept = weakref.ref(held, lambda ref: [signal.raise_signal(signal.SIGINT)] + [0 for _ in range(1000)])\n"
        "    del held\n"
        "    time.sleep(3)\n"
        "    print('ran on after the Ctrl-C')\n"
        "    return 0\n"
        "c._main = run"),
}


@pytest.mark.parametrize("where", sorted(_INTERRUPT_TURNED))
def test_an_interrupt_wherever_it_lands_exits_130_in_one_line(tmp_path, where):
    proc = _interrupted(tmp_path, _INTERRUPT_TURNED[where], AS_CONSOLE_SCRIPT, "schema")
    assert (proc.returncode, proc.stderr) == (130, "parity: interrupted\n")
    assert "ran on" not in proc.stdout  # ended where the interrupt landed, not at the command's end


# A real signal sent to the process while the CLI's imports run (pydantic's, the traceback
# went through it), or one a library's broad `except` swallows there.
_WHILE_IMPORTING = """
import os, signal, sys
class Hit:
    def find_spec(self, name, path=None, target=None):
        if name == "pydantic":
            sys.meta_path.remove(self)
            {send}
sys.meta_path.insert(0, Hit())
"""
_SENDS = {
    "SIGINT while importing": ("signal.raise_signal(signal.SIGINT)", 130, "parity: interrupted\n"),
    "SIGTERM while importing": ("signal.raise_signal(signal.SIGTERM)", 143, "parity: terminated\n"),
    "SIGINT swallowed by a library while importing": (
        "try:\n                signal.raise_signal(signal.SIGINT)\n                for _ in range(1000): pass\n"
        "            except BaseException: pass", 130, "parity: interrupted\n"),
}


@pytest.mark.parametrize("entry, case", [(e, c) for e in ENTRIES for c in _SENDS
                                         if (e, c) != ("python -m parity", "SIGINT while importing")])  # kept before
def test_a_signal_while_the_cli_is_imported_ends_in_its_code_and_one_line(tmp_path, entry, case):
    """Before: the console script (`parity`, pyproject's parity.cli:main) imported the CLI before
    any handler existed: a Ctrl-C there printed a KeyboardInterrupt traceback through pydantic, a
    SIGTERM killed it with no line (-15), and an interrupt a library swallowed was lost (the command
    ran on, here `schema`: exit 0)."""
    send, code, line = _SENDS[case]
    argv = ENTRIES[entry](tmp_path, _WHILE_IMPORTING.format(send=send)) + ["schema"]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, preexec_fn=ctrl_c_reaches_it,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])})
    assert (proc.returncode, proc.stderr) == (code, line), (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout == ""


# -- 8. no hangs, no runaway memory ------------------------------------------------------------


@pytest.mark.parametrize("what", ["a FIFO", "/dev/zero"])
def test_special_files_are_refused_not_read(tmp_path, what):
    if what == "a FIFO":
        target = tmp_path / "config.json"
        os.mkfifo(target)
    else:
        target = Path("/dev/zero")
    proc = parity_subprocess("contract", "training", "--target-config", target, "--dump-layout", "h1,h2",
                             timeout=60)
    assert proc.returncode == 2 and "not a regular file" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_an_oversized_config_is_refused(tmp_path, capsys):
    target = tmp_path / "config.json"
    with target.open("wb") as f:
        f.truncate(64 * 1024 * 1024)  # sparse: 64 MiB of nothing
    rc, out, err = run(capsys, "contract", "training", "--target-config", target, "--dump-layout", "h1,h2")
    one_line_exit_2(rc, out, err)
    assert "more than the" in err  # refused by its size, before reading 64 MiB


@pytest.mark.parametrize("n", [18446744073709551616, 5000])
def test_an_absurd_layer_count_is_refused_before_any_model_is_built(tmp_path, capsys, n):
    rc, out, err = run(capsys, "contract", "training", "--target-config", _target(tmp_path, num_hidden_layers=n),
                       "--dump-layout", "h1,h2")
    one_line_exit_2(rc, out, err)
    assert "num_hidden_layers" in err


@pytest.mark.parametrize("argv", [
    ["replay", "--draft", "fixtures/replay/draft", "--data", "fixtures/replay/data", "--steps", "1000"],
    ["forward", "--fixture", "llama-8l", "--steps", "1000"],
    ["forward", "--fixture", "llama-8l", "--seq-len", "100000000"],
])
def test_unbounded_work_is_refused_with_the_reason(capsys, argv):
    rc, out, err = run(capsys, *argv)
    one_line_exit_2(rc, out, err)
    assert "1..16" in err or "at most 4096" in err  # refused by the bound, with its reason
    # before any work: this fast-tier test fails if it asks for an engine, forward or replay
    # child (tests/conftest.py); no wall-clock bound, which a loaded machine broke


def test_an_unknown_architecture_is_refused_before_any_extraction(tmp_path, capsys):
    """Refused first: with a speculators release that has no environment, an extraction run
    before the architecture check would fail on that instead (it used to take 30-51 s)."""
    target = _target(tmp_path, architectures=["FooForCausalLM"], model_type="foo")
    draft = sglang_draft(tmp_path / "d", ids=[1, 15, 28])
    for command in (["check", "--target-config", target, "--draft", draft, "--dump-layout", "h2,h16,h29,h32",
                     "--speculators", "0.0.0"],
                    ["contract", "serving", "--target-config", target, "--draft", draft]):
        rc, out, err = run(capsys, *command)
        one_line_exit_2(rc, out, err)
        assert "FooForCausalLM" in err and "not supported" in err, err


def _bounded_memory() -> None:
    """A subprocess `preexec_fn`: at most 2 GiB of address space (a read of /dev/zero then ends in
    a MemoryError, not in the machine's memory), SIGINT at its default."""
    import resource

    ctrl_c_reaches_it()
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def _run_bounded(argv: list, tmpdir: Path, timeout: float = 60) -> tuple[subprocess.CompletedProcess, float]:
    """`python -m parity ARGV` with TMPDIR=tmpdir, bounded memory and its own process group,
    ended when it outlives `timeout` (SIGTERM, so that parity ends its probes, then SIGKILL);
    (the result, its seconds)."""
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "parity", *map(str, argv)], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=_bounded_memory, env={**os.environ, "TMPDIR": str(tmpdir)})
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
        raise AssertionError(f"parity {' '.join(map(str, argv))} still ran after {timeout} s") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), time.monotonic() - t0


@pytest.mark.parametrize("what, says", [
    ("/dev/zero", "not a regular file"),
    ("a link to /dev/zero", "not a regular file"),
    ("a FIFO", "not a regular file"),
    ("a 64 MiB file", "more than the 262144 a serve command can reasonably hold"),
    ("200,000 repeated flags", "more than the 262144 a serve command can reasonably hold"),
    ("1,025 short flags", "more than 1024 arguments"),
])
def test_a_serve_args_file_is_refused_by_its_limit_before_it_is_read_whole(tmp_path, what, says):
    """Before: MemoryError (exit 3) for /dev/zero and a link to it, a FIFO blocked for ever, and
    200,000 flags went to the SGLang probe and ran into its 600 s timeout (exit 3)."""
    file = tmp_path / "serve.args"
    if what == "/dev/zero":
        file = Path("/dev/zero")
    elif what == "a link to /dev/zero":
        file.symlink_to("/dev/zero")
    elif what == "a FIFO":
        os.mkfifo(file)
    elif what == "a 64 MiB file":
        with file.open("wb") as f:
            f.truncate(64 * 1024 * 1024)  # sparse
    elif what == "200,000 repeated flags":
        file.write_text("--speculative-num-steps 3\n" * 200_000)
    else:
        file.write_text("-x\n" * 1025)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    proc, seconds = _run_bounded(["contract", "serving", "--target-config", LLAMA, "--draft", LLAMA_DRAFT,
                                  "--serve-args", f"@{file}"], tmpdir)
    one_line_exit_2(proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.startswith(f"parity: --serve-args file {file}: ") and says in proc.stderr, proc.stderr
    assert seconds < 30 and list(tmpdir.iterdir()) == []


def test_serve_args_past_the_count_limit_are_refused_before_any_extraction(capsys):
    """Given on the command line (one argument of the shell's, up to 128 KiB): the same bound."""
    rc, out, err = run(capsys, "contract", "serving", "--target-config", LLAMA, "--draft", LLAMA_DRAFT,
                       "--serve-args", "--speculative-num-steps 3 " * 600)
    one_line_exit_2(rc, out, err)
    assert "--serve-args: more than 1024 arguments" in err


# -- 9. lock files ------------------------------------------------------------------------------


@pytest.mark.parametrize("changes,says", [
    ({"parity_lock": 999}, "newer parity"),
    ({"parity_lock": -5}, "does not exist"),
    ({"engine": "trtllm"}, "unknown engine 'trtllm'"),  # any registered engine's name, none other
    ({"serve_args": ["-x"] * 1025}, "serve_args: List should have at most 1024 items"),  # as --serve-args (issue 52)
])
def test_a_lock_this_parity_cannot_check_is_exit_2(tmp_path, capsys, changes, says):
    rc, out, err = run(capsys, "check", "--contract", _lock(tmp_path, **changes))
    one_line_exit_2(rc, out, err)
    assert says in err


def test_conflicting_flags_with_a_lock_are_exit_2(capsys):
    rc, out, err = run(capsys, "check", "--contract", KIMI_LOCK, "--target-config", LLAMA)
    one_line_exit_2(rc, out, err)
    assert "--target-config" in err


@pytest.mark.parametrize("command", [["schema"], ["conventions"], ["--version"]])
def test_a_reader_that_closes_stdout_ends_the_command_in_141_and_no_traceback(command):
    """`parity schema | head -1`: the reader goes after one line; parity stops printing and exits
    141 (128 + SIGPIPE), with nothing on stderr (it was exit 3, 'internal error: BrokenPipeError')."""
    read, write = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "parity", *command], stdout=write, stderr=subprocess.PIPE,
                            cwd=ROOT)
    os.close(write)
    os.close(read)  # the reader is gone before parity prints
    err = proc.communicate(timeout=120)[1].decode()
    assert (proc.returncode, err) == (141, ""), (proc.returncode, err)
