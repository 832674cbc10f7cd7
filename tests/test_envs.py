"""envs.toml: one line per release expands into a full environment spec."""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

import pytest

from parity import home
from parity.envs import EnvError, environments, find_env, load_specs

from .helpers import ROOT

TOML = """
[releases.speculators]
"0.8.0" = { transformers = "5.16.0", extra = ["numpy<=2.5"] }

[template.speculators]
path = ".envs/speculators-{version}"
torch = "2.13.0"
no_deps = ["speculators=={version}"]
deps = ["transformers=={transformers}", "pydantic"]
"""


def test_one_line_adds_a_release():
    spec = load_specs(TOML)["speculators-0.8.0"]
    assert spec == {"path": ".envs/speculators-0.8.0", "torch": "2.13.0",
                    "no_deps": ["speculators==0.8.0"],
                    "deps": ["transformers==5.16.0", "pydantic", "numpy<=2.5"]}


def test_a_template_key_about_deriving_lines_stays_out_of_the_spec():
    """`imports_listed` tells parity.ondemand how to derive a new release's line; it is not
    something the environment holds, so no spec (and no spec hash, no lock) changes with it."""
    plain = load_specs(TOML)["speculators-0.8.0"]
    listed = load_specs(TOML.replace('torch = "2.13.0"', 'torch = "2.13.0"\nimports_listed = true'))
    assert listed["speculators-0.8.0"] == plain


def test_a_template_base_reuses_another_release_line():
    """SpecForge's line names the SGLang release it pins; its environment is that one's plus its own."""
    text = TOML + """
[releases.trainer]
"1.0" = { engine = "0.8.0" }

[template.trainer]
base = "speculators-{engine}"
path = ".envs/trainer-{version}"
no_deps = ["trainer=={version}"]
deps = ["pyyaml"]
"""
    spec = load_specs(text)["trainer-1.0"]
    assert spec == {"path": ".envs/trainer-1.0", "torch": "2.13.0",
                    "no_deps": ["speculators==0.8.0", "trainer==1.0"],
                    "deps": ["transformers==5.16.0", "pydantic", "numpy<=2.5", "pyyaml"]}
    with pytest.raises(EnvError, match="builds on 'speculators-9'"):
        load_specs(text.replace('engine = "0.8.0"', 'engine = "9"'))


def test_a_missing_pin_is_named():
    with pytest.raises(EnvError, match="lacks the pin 'transformers'"):
        load_specs(TOML.replace('transformers = "5.16.0", ', ""))


def test_the_shipped_file_names_every_release_once():
    pins = [(e.name, e.packages.get("sglang") or e.packages.get("speculators")) for e in environments()]
    assert ("main", "0.5.23") in pins and ("speculators-0.7.0.2", "0.7.0.2") in pins
    assert ("sglang-0.5.14", "0.5.14") in pins and ("sglang-0.5.12.post1", "0.5.12.post1") in pins
    specforge = {e.name: e.packages for e in environments()}["specforge-0.2.0"]
    assert specforge["specforge"] == "0.2.0" and specforge["sglang"] == "0.5.14"
    assert find_env("sglang", "0.5.14").name == "sglang-0.5.14"  # SGLang's own environment, not SpecForge's


def test_the_user_file_in_parity_home_adds_a_release(tmp_path, monkeypatch):
    """`$PARITY_HOME/envs.toml` adds a release line to the shipped family; its environment is
    built into the home (not yet: its remedy names the command that builds it)."""
    (tmp_path / "envs.toml").write_text('[releases.sglang]\n"0.5.99" = { transformers = "5.20.0", '
                                        'tvm_ffi = "0.1.11", openai = "2.8.0" }\n')
    monkeypatch.setenv("PARITY_HOME", str(tmp_path))
    envs = {e.name: e for e in environments()}
    added = envs["sglang-0.5.99"]
    assert added.path == tmp_path / "sglang-0.5.99" and not added.built
    assert added.packages["sglang"] == "0.5.99" and added.packages["transformers"] == "5.20.0"
    assert "sglang-0.5.14" in envs and "speculators-0.7.0.2" in envs  # the shipped ones stay
    with pytest.raises(EnvError, match=r"is not built: run `\./dev setup sglang-0\.5\.99`"):
        find_env("sglang", "0.5.99")


def test_a_broken_user_file_is_named(tmp_path, monkeypatch):
    (tmp_path / "envs.toml").write_text("[releases.sglang\n")
    monkeypatch.setenv("PARITY_HOME", str(tmp_path))
    with pytest.raises(EnvError, match=f"{tmp_path / 'envs.toml'}: not valid TOML"):
        load_specs()


def test_the_main_environment_is_the_one_parity_runs_in():
    (main,) = [e for e in environments() if e.current]
    assert main.name == "main" and str(main.python) == sys.executable and main.built
    assert main.packages["sglang"] == metadata.version("sglang")


def test_a_checkout_keeps_its_release_environments_in_envs_dir(monkeypatch, tmp_path):
    """No PARITY_HOME in a checkout: release environments at their envs.toml path (.envs/NAME),
    the fixture cache beside them; PARITY_HOME moves both."""
    monkeypatch.delenv("PARITY_HOME", raising=False)
    assert home.CHECKOUT == ROOT and home.home() == ROOT / ".envs"
    assert {e.name: e.path for e in environments()}["sglang-0.5.14"] == ROOT / ".envs" / "sglang-0.5.14"
    elsewhere = tmp_path / "elsewhere"  # not made yet: parity may make it
    monkeypatch.setenv("PARITY_HOME", str(elsewhere))
    assert {e.name: e.path for e in environments()}["sglang-0.5.14"] == elsewhere / "sglang-0.5.14"
    assert home.cache_dir() == elsewhere / "cache" and not elsewhere.exists()


def _unwritable_dir(tmp_path: Path) -> Path:
    """A directory this user cannot write: a 0555 one, or (as root, who writes anyway) /proc/sys."""
    ro = tmp_path / "read-only"
    ro.mkdir(mode=0o555)
    if not os.access(ro, os.W_OK):
        return ro
    if Path("/proc/sys").is_dir() and not os.access("/proc/sys", os.W_OK):
        return Path("/proc/sys")
    pytest.skip("no directory here that this user cannot write")


@pytest.mark.parametrize("case", ["a file", "under a file", "unwritable", "not creatable"])
def test_a_parity_home_that_cannot_be_one_is_named_exit_2(tmp_path, monkeypatch, capsys, case):
    """PARITY_HOME set to a file (or a place it cannot be made, or one this user cannot write):
    one line saying so about PARITY_HOME, exit 2, not 'the environment ... is not built' naming
    a path under the file; nothing is created."""
    from parity import cli

    (tmp_path / "file").write_text("x")
    given = {"a file": tmp_path / "file", "under a file": tmp_path / "file" / "home",
             "unwritable": _unwritable_dir(tmp_path) if case == "unwritable" else None,
             "not creatable": _unwritable_dir(tmp_path) / "home" if case == "not creatable" else None}[case]
    monkeypatch.setenv("PARITY_HOME", str(given))
    before = sorted(tmp_path.rglob("*"))
    rc = cli.main(["check", "--target-config", str(ROOT / "fixtures" / "targets" / "kimi-k2.5" / "config.json"),
                   "--draft", str(ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3"),
                   "--dump-layout", "h0,h3,h31,h59", "--sglang", "0.5.14"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"parity: PARITY_HOME={given}: "), err
    assert ("not a directory" if "file" in case else "not writable") in err and "not built" not in err, err
    assert sorted(tmp_path.rglob("*")) == before


def test_children_of_a_built_environment_keep_their_bytecode_inside_it(tmp_path):
    """A child of an environment parity built writes the bytecode of what it imports under
    ENV/.pycache (PYTHONDONTWRITEBYTECODE dropped), never beside the sources; another
    interpreter's environment is left as it was."""
    import os
    import subprocess

    from parity.envs import PYCACHE, keep_bytecode

    main = environments()[0]
    assert main.name == "main"
    python = main.path / "bin" / "python"
    src = tmp_path / "src"
    src.mkdir()
    (src / "parity_bytecode_probe.py").write_text("VALUE = 1\n")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(src)}
    keep_bytecode(python, env)
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["PYTHONPYCACHEPREFIX"] == str(main.path / PYCACHE)
    subprocess.run([str(python), "-c", "import parity_bytecode_probe"], env=env, check=True)
    kept = main.path / PYCACHE / str(src.resolve()).lstrip("/")
    assert any(kept.glob("parity_bytecode_probe.*.pyc")), f"no bytecode under {kept}"
    assert sorted(p.name for p in src.iterdir()) == ["parity_bytecode_probe.py"]  # nothing beside it
    for pyc in kept.glob("parity_bytecode_probe.*.pyc"):
        pyc.unlink()

    other = {"PYTHONDONTWRITEBYTECODE": "1"}
    keep_bytecode(tmp_path / "elsewhere" / "bin" / "python", other)
    assert other == {"PYTHONDONTWRITEBYTECODE": "1"}


def test_compile_ahead_keeps_the_bytecode_a_probe_would_compile(tmp_path, monkeypatch):
    """The sweep compiles a fresh environment's bytecode in its builder (parity.envs.compile_ahead):
    what the probe module imports, what its warm() imports and the package itself land under
    ENV/.pycache, as the probe's own child would leave them; a failing warm() is left for the
    probe to report; an interpreter parity did not build is not touched."""
    from parity.envs import PYCACHE, compile_ahead

    main = environments()[0]
    python = main.path / "bin" / "python"
    src = tmp_path / "src"
    src.mkdir()
    (src / "parity_ahead_probe.py").write_text("def warm():\n    import parity_ahead_warmed\n")
    (src / "parity_ahead_warmed.py").write_text("VALUE = 1\n")
    (src / "parity_ahead_pkg.py").write_text("VALUE = 2\n")
    (src / "parity_ahead_broken.py").write_text("def warm():\n    raise RuntimeError('moved')\n")
    monkeypatch.setenv("PYTHONPATH", str(src))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    kept = main.path / PYCACHE / str(src.resolve()).lstrip("/")
    try:
        assert compile_ahead(python, "parity_ahead_probe", "parity_ahead_pkg")
        assert sorted(p.name.split(".")[0] for p in kept.glob("*.pyc")) == [
            "parity_ahead_pkg", "parity_ahead_probe", "parity_ahead_warmed"]
        assert not compile_ahead(python, "parity_ahead_broken", "parity_ahead_pkg")
    finally:
        for pyc in kept.glob("*.pyc"):
            pyc.unlink()
    assert not compile_ahead(tmp_path / "elsewhere" / "bin" / "python", "parity_ahead_probe", "parity_ahead_pkg")
    assert sorted(p.name for p in src.iterdir()) == sorted(
        ["parity_ahead_probe.py", "parity_ahead_warmed.py", "parity_ahead_pkg.py", "parity_ahead_broken.py"])


def test_setup_into_a_parity_home_that_is_a_file_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    from parity.build_env import main as setup

    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("PARITY_HOME", str(tmp_path / "file"))
    assert setup(["sglang-0.5.14"]) == 2
    err = capsys.readouterr().err
    assert err == f"[setup] PARITY_HOME={tmp_path / 'file'}: not a directory (it is a file); point PARITY_HOME " \
                  "at a directory you can write, or unset it\n", err
    assert [p.name for p in tmp_path.iterdir()] == ["file"]
