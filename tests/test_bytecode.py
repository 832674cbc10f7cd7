"""parity.bytecode: release environments share the bytecode of the packages they installed as
the same files, and never run bytecode compiled from another file."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from parity import bytecode

SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"


def _env(home: Path, name: str) -> Path:
    env = home / name
    (env / SITE).mkdir(parents=True)
    return env


def _install(env: Path, dist: str, files: dict[str, str], like: Path | None = None) -> None:
    """Install `files` (path in site-packages: text) as distribution `dist`, as hard links of
    `like`'s files (one cached wheel installed twice) where `like` is given."""
    site = env / SITE
    for path, text in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        if like is not None:
            os.link(like / SITE / path, site / path)
        else:
            (site / path).write_text(text)
    info = site / f"{dist}.dist-info"
    info.mkdir()
    (info / "RECORD").write_text("".join(f"{p},,\n" for p in files) + f"{dist}.dist-info/RECORD,,\n")


def _run(env: Path, code: str) -> str:
    """`code` run with `env`'s site-packages on the path and its bytecode kept, as
    parity.envs.keep_bytecode keeps a child's."""
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**environ, "PYTHONPATH": str(env / SITE), "PYTHONPYCACHEPREFIX": str(env / ".pycache")})
    return out.stdout.strip()


def _import(env: Path, module: str) -> str:
    bytecode.share(env, env / ".pycache")
    return _run(env, f"import {module}; print({module}.VALUE)")


def _twins(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(home, a, b): two environments in one home holding pkg 1.0 as the same files on disk."""
    home = tmp_path / "home"
    a, b = _env(home, "a"), _env(home, "b")
    files = {"pkg/__init__.py": "VALUE = 'one'\n"}
    _install(a, "pkg-1.0", files)
    _install(b, "pkg-1.0", files, like=a)
    return home, a, b


def test_environments_with_the_same_files_share_one_bytecode_folder(tmp_path):
    home = tmp_path / "home"
    a, b, c = _env(home, "a"), _env(home, "b"), _env(home, "c")
    files = {"pkg/__init__.py": "VALUE = 'one'\n", "pkg/inner.py": "X = 1\n"}
    _install(a, "pkg-1.0", files)
    _install(b, "pkg-1.0", files, like=a)  # the same files on disk
    _install(c, "pkg-1.0", files)  # copies: other files, however alike
    assert _import(a, "pkg") == "one"
    store = sorted((home / bytecode.STORE).iterdir())
    compiled = list((home / bytecode.STORE).rglob("*.pyc"))
    assert len(compiled) == 1, compiled
    stamp = compiled[0].stat().st_mtime_ns
    assert _import(b, "pkg") == "one"
    assert sorted((home / bytecode.STORE).iterdir()) == store  # b met a's folder
    assert compiled[0].stat().st_mtime_ns == stamp  # and used its bytecode as it was
    assert _import(c, "pkg") == "one"
    assert len(list((home / bytecode.STORE).iterdir())) == 2  # c has its own
    link = b / ".pycache" / str((b / SITE).absolute()).lstrip("/") / "pkg"
    assert link.is_symlink() and link.resolve() == (home / bytecode.STORE / store[0].name / "pkg").resolve()


def test_an_edited_file_is_compiled_again_never_run_from_the_shared_bytecode(tmp_path):
    home, a, b = _twins(tmp_path)
    assert _import(a, "pkg") == "one"
    edited = b / SITE / "pkg" / "__init__.py"
    edited.unlink()  # an edit that replaces the file (as editors and patch do)
    edited.write_text("VALUE = 'two, edited'\n")
    assert _import(b, "pkg") == "two, edited"
    assert _import(a, "pkg") == "one"


def test_what_is_not_one_distributions_folder_stays_in_the_environment(tmp_path):
    home = tmp_path / "home"
    a = _env(home, "a")
    _install(a, "first-1.0", {"space/first.py": "VALUE = 1\n"})
    _install(a, "second-1.0", {"space/second.py": "VALUE = 2\n"})  # a namespace package: two owners
    _install(a, "single-1.0", {"single.py": "VALUE = 3\n"})  # a single-file module
    assert _import(a, "space.first") == "1" and _import(a, "single") == "3"
    assert not (home / bytecode.STORE).exists() or not any((home / bytecode.STORE).iterdir())
    here = a / ".pycache" / str((a / SITE).absolute()).lstrip("/")
    assert not (here / "space").is_symlink() and any((here / "space").glob("first.*.pyc"))
    assert any(here.glob("single.*.pyc"))


def test_a_folder_compiled_before_moves_into_the_store_once(tmp_path):
    home, a, b = _twins(tmp_path)
    _run(a, "import pkg")  # compiled before parity shared anything
    (before,) = (a / ".pycache").rglob("pkg/__init__.*.pyc")
    compiled = before.read_bytes()
    assert _import(a, "pkg") == "one"
    (after,) = (home / bytecode.STORE).rglob("*.pyc")
    assert after.read_bytes() == compiled
    assert _import(b, "pkg") == "one"
    assert len(list((home / bytecode.STORE).rglob("*.pyc"))) == 1


def test_a_reinstall_in_place_is_linked_again(tmp_path):
    """An environment rebuilt in place (another release of a package, parity.ondemand's step
    back) gets a link to its new copy's folder; the other environment keeps the old one. A
    store removed since is made again."""
    home, a, b = _twins(tmp_path)
    assert _import(a, "pkg") == "one" and _import(b, "pkg") == "one"
    shutil.rmtree(b / SITE / "pkg")
    shutil.rmtree(b / SITE / "pkg-1.0.dist-info")
    _install(b, "pkg-2.0", {"pkg/__init__.py": "VALUE = 'two'\n"})
    assert _import(b, "pkg") == "two"
    site = lambda env: env / ".pycache" / str((env / SITE).absolute()).lstrip("/")  # noqa: E731
    assert (site(a) / "pkg").resolve() != (site(b) / "pkg").resolve()
    assert (site(b) / "pkg").resolve().parent.name.startswith("pkg-2.0-")
    shutil.rmtree(home / bytecode.STORE)
    assert _import(a, "pkg") == "one"
    assert any((site(a) / "pkg").glob("__init__.*.pyc"))  # kept again, in a store made again


def test_only_a_release_environment_built_in_the_home_is_shared(tmp_path, monkeypatch):
    """Not the main environment, not a link in a home to an environment elsewhere (a test's
    private home linking the real one: its links would point into that home's store)."""
    from parity.envs import _release_env_in_home, environments

    home = tmp_path / "home"
    monkeypatch.setenv("PARITY_HOME", str(home))
    built = _env(home, "sglang-9.9.9")
    (home / "linked").symlink_to(_env(tmp_path / "elsewhere", "real"))
    assert _release_env_in_home(built)
    assert not _release_env_in_home(home / "linked")
    assert not _release_env_in_home(environments()[0].path)  # the main one


def test_a_link_to_the_same_copys_folder_in_another_store_is_kept(tmp_path):
    """A copy of an environment in a test's private home links its original's compiled folders
    (tests/helpers.share_bytecode): kept, not replaced by an empty folder of its own store."""
    a = _env(tmp_path / "home", "a")
    _install(a, "pkg-1.0", {"pkg/__init__.py": "VALUE = 'one'\n"})
    assert _import(a, "pkg") == "one"
    copy = _env(tmp_path / "private", "a")
    _install(copy, "pkg-1.0", {"pkg/__init__.py": ""}, like=a)
    site = lambda env: env / ".pycache" / str((env / SITE).absolute()).lstrip("/")  # noqa: E731
    site(copy).mkdir(parents=True)
    (site(copy) / "pkg").symlink_to(site(a) / "pkg")  # a link to a link into a's store
    assert _import(copy, "pkg") == "one"
    assert os.readlink(site(copy) / "pkg") == str(site(a) / "pkg")
    assert not (tmp_path / "private" / bytecode.STORE).exists() or not any(
        (tmp_path / "private" / bytecode.STORE).rglob("*.pyc"))
