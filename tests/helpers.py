"""Shared test helpers: fixture paths, tiny draft directories, and injected drift."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The bytecode prefix of the interpreter running the tests (parity.envs.keep_bytecode gives its
# children the same): a test's `parity` command run under it compiles nothing again.
MAIN_BYTECODE = str(Path(sys.prefix) / ".pycache")
# `./dev test --all`: the `exhaustive` tests run too (tests/conftest.py), and the fixtures that
# serve only them compute their part.
EXHAUSTIVE = os.environ.get("PARITY_EXHAUSTIVE") == "1"
TARGETS = ROOT / "fixtures" / "targets"
LLAMA = TARGETS / "llama-3.1-8b" / "config.json"
QWEN3 = TARGETS / "qwen3-8b" / "config.json"
DEEPSEEK = TARGETS / "deepseek-v3-61l" / "config.json"
QWEN2 = TARGETS / "qwen2-7b" / "config.json"
QWEN3_MOE = TARGETS / "qwen3-30b-a3b" / "config.json"
GPT_OSS = TARGETS / "gpt-oss-20b" / "config.json"

SERVING_PROBE = "parity.extract.engines.sglang.probe"
TRAINING_PROBE = "parity.extract.trainers.speculators.probe"
SPECFORGE_PROBE = "parity.extract.trainers.specforge.probe"
VLLM_PROBE = "parity.extract.engines.vllm.probe"


def ctrl_c_reaches_it() -> None:
    """A subprocess `preexec_fn`: SIGINT at its default, as a terminal's shell leaves it. A test
    run started in the background (`nohup ... &`, a CI step) hands its children SIGINT ignored,
    and Python then installs no handler: a Ctrl-C test would be killed or ignore it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def drift_overrides(*drifts: str) -> str:
    """The PARITY_PROBE_OVERRIDES value that runs each `tests.drift` module in place of the
    probe it wraps (`serving_*` the serving probe, `training_*` the training probe, `specforge_*`
    the SpecForge trainer's probe, `vllm_*` the vLLM probe)."""
    prefixes = {"serving_": SERVING_PROBE, "training_": TRAINING_PROBE, "specforge_": SPECFORGE_PROBE,
                "vllm_": VLLM_PROBE}
    entries = []
    for module in drifts:
        name = module.rsplit(".", 1)[-1]
        probe = next((p for prefix, p in prefixes.items() if name.startswith(prefix)), None)
        if probe is None:
            raise ValueError(f"{module}: a drift module's name starts with one of {sorted(prefixes)}")
        entries.append(f"{probe}={module}")
    return ",".join(entries)


def sglang_draft(tmp: Path, *, ids=None, top_level_ids=None, hidden_size=4096, vocab_size=128256,
                 **extra) -> Path:
    """A draft directory in SGLang's config format (config.json only), declaring the Llama-3.1
    target's 131072 positions (a config without them has transformers' 2048, which SGLang's
    start-up refuses on that target: a positions_short note, docs/built-draft.md)."""
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "max_position_embeddings": 131072,
           "hidden_size": hidden_size, "intermediate_size": 4 * hidden_size,
           "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 1,
           "vocab_size": vocab_size, "draft_vocab_size": 32000, "rms_norm_eps": 1e-5, **extra}
    if ids is not None:
        cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": ids}
    if top_level_ids is not None:
        cfg["eagle_aux_hidden_state_layer_ids"] = top_level_ids
    return shared_folder(tmp, {"config.json": json.dumps(cfg)})


def shared_folder(tmp: Path, files: dict[str, str]) -> Path:
    """A folder holding `files` (name -> text), at a path named by its contents in this test
    run's temp root (the parent of `tmp`'s pytest-N folder, shared by the xdist workers): the
    same draft is the same folder, under the same name, in every test. Engines read path names,
    so the reply cache keys on them (docs/reply-cache.md): a draft written into each test's own
    tmp_path would be a new request, computed again, every time. Never written after it is made
    (made aside, then renamed into place); a test that edits one fails here, in the next test
    that asks for it, rather than as another test's wrong answer."""
    base = next((p for p in [tmp, *tmp.parents] if p.name.startswith("pytest-") and p.name[7:].isdigit()),
                tmp.parent) / "shared-drafts"
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]
    folder = base / digest
    if not folder.is_dir():
        base.mkdir(parents=True, exist_ok=True)
        aside = base / f".{digest}.{os.getpid()}"
        aside.mkdir()
        for name, text in files.items():
            (aside / name).write_text(text)
        try:
            aside.rename(folder)
        except OSError:  # another worker made it first: the same contents
            shutil.rmtree(aside, ignore_errors=True)
    edited = [name for name, text in files.items() if (folder / name).read_text() != text]
    assert not edited, f"{folder}: {edited} edited by a test; write into a folder of the test's own"
    return folder


def built(package: str, version: str) -> bool:
    """Whether an environment of `package` `version` is built (a test of that release skips otherwise)."""
    from parity.envs import EnvError, find_env

    try:
        find_env(package, version)
        return True
    except EnvError:
        return False


def shadow_env(env: Path, where: Path, edits: dict[str, tuple[str, str]]) -> Path:
    """A virtual environment at `where` that is `env` with some installed files edited, for a
    test that must see parity follow an edit of installed code without touching `env`, which
    other tests use at the same time.

    Every entry of `env` is a symbolic link to the original, except the folders on the way to
    each edited file (real folders whose other entries are links) and the edited files
    themselves (real copies, `old` replaced by `new`, which must occur in the file). Its
    interpreter is `where/bin/python`; its children keep bytecode under `where/.pycache`
    (share_bytecode: the original's, for every file that is not an edited copy)."""
    where.mkdir(parents=True)
    for entry in env.iterdir():
        if entry.name in ("bin", "lib", "lib64", ".pycache"):
            continue
        (where / entry.name).symlink_to(entry)
    shutil.copytree(env / "bin", where / "bin", symlinks=True)
    (where / "lib64").symlink_to("lib")
    for relative, (old, new) in edits.items():
        parts = Path(relative).parts
        real_parent, shadow_parent = env, where
        for depth, name in enumerate(parts):
            real, shadow = real_parent / name, shadow_parent / name
            if shadow.is_symlink():
                shadow.unlink()  # a link made for an earlier edit: becomes a real copy below
            if depth == len(parts) - 1:
                text = real.read_text()
                assert old in text, f"{real}: {old!r} not found: the edit no longer applies"
                shadow.write_text(text.replace(old, new))
            elif not shadow.exists():
                shadow.mkdir()
                for sibling in real.iterdir():
                    if sibling.name != "__pycache__" and not (shadow / sibling.name).exists():
                        (shadow / sibling.name).symlink_to(sibling)
                (shadow / parts[depth + 1]).unlink(missing_ok=True)
            real_parent, shadow_parent = real, shadow
    share_bytecode(env, where)
    return where


def share_bytecode(env: Path, shadow: Path) -> None:
    """Give the `shadow_env` `shadow` of `env` a bytecode tree (`shadow/.pycache`, what
    PYTHONPYCACHEPREFIX names for a parity-built environment: parity.envs.keep_bytecode) that
    reuses `env`'s compiled bytecode for every file the shadow only links to, so its children
    compile only the edited copies (without it each import of torch and the engine compiled
    from source: tens of seconds per test). The tree is links into `env/.pycache`, made the way
    the shadow is made: a module's bytecode lives at PREFIX/<its source's absolute path>, and
    the shadow's sources sit under the shadow's path. Python checks each file's bytecode against
    its source's size and time, so a link never stands for a file that differs from it."""
    original = env / ".pycache"
    if not original.is_dir():
        return
    prefix = shadow / ".pycache"
    chain = Path(os.path.abspath(shadow)).relative_to("/").parts
    here, source = prefix, original
    for depth, name in enumerate(chain):  # the rest of env's tree (the stdlib, parity) as links
        here.mkdir(exist_ok=True)
        for entry in source.iterdir() if source.is_dir() else ():
            if entry.name != name and not (here / entry.name).exists():
                (here / entry.name).symlink_to(entry)
        here, source = here / name, source / name
    _mirror(shadow, here, original / Path(os.path.abspath(env)).relative_to("/"))


def _mirror(shadow_dir: Path, here: Path, compiled: Path) -> None:
    """`here`: the bytecode folder of the shadow's folder `shadow_dir`, whose original's
    bytecode is in `compiled`: links for linked entries, real folders for real ones."""
    here.mkdir(parents=True, exist_ok=True)
    for entry in shadow_dir.iterdir():
        if entry.name in (".pycache", "bin"):
            continue
        if entry.is_symlink():
            name = entry.name if entry.is_dir() else f"{entry.stem}.{sys.implementation.cache_tag}.pyc"
            if entry.is_dir() or entry.suffix == ".py":
                if (compiled / name).exists() and not (here / name).exists():
                    (here / name).symlink_to(compiled / name)
        elif entry.is_dir():
            _mirror(entry, here / entry.name, compiled / entry.name)


def shadow_release(tmp_path: Path, package: str, version: str, edits: dict[str, tuple[str, str]]
                   ) -> tuple[Path, Path, dict[str, str]]:
    """(a `shadow_env` of the installed `package` `version` environment, under a private
    PARITY_HOME in `tmp_path` where parity finds it in its place; the original's path; the
    environment a parity run on it takes: that home, no result cache, bytecode kept out of the
    original)."""
    from parity.envs import find_env

    home = tmp_path / "home"
    home.mkdir()
    original = find_env(package, version).path
    shadow = shadow_env(original, home / original.name, edits)
    for declared in ("envs.toml", "locks"):  # an on-demand release's line and lock (parity.ondemand), if any
        if (original.parent / declared).is_file():
            shutil.copy(original.parent / declared, home / declared)
        elif (original.parent / declared).is_dir():
            shutil.copytree(original.parent / declared, home / declared)
    env = {k: v for k, v in os.environ.items() if k not in ("PARITY_NO_CACHE", "PYTHONDONTWRITEBYTECODE")}
    env.update(PARITY_HOME=str(home), PYTHONPYCACHEPREFIX=MAIN_BYTECODE)
    return shadow, original, env


def default_edit_followed(tmp_path: Path, dist: str, release: str, file: str, old: str, new: str,
                          args: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """A trainer's installed code edited in a copy of its `dist` `release` environment: the fc input
    of `parity contract training ARGS --json` before and after `file`'s `old` becomes `new` (the
    original environment untouched, asserted)."""
    shadow, original, env = shadow_release(tmp_path, dist, release, {file: (old, old)})
    fed = []
    for step in ("before", "after"):
        if step == "after":
            edit_in_shadow(shadow, file, old, new)
        proc = run_parity("contract", "training", *args, "--json", env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        fed.append(json.loads(proc.stdout)["fc_input"])
    assert old in (original / file).read_text()  # the original is untouched
    return fed[0], fed[1]


def shadow_run_env(shadow: Path, home: Path, bytecode: str | None = None) -> dict[str, str]:
    """The process environment of a parity run on the `shadow_env` `shadow`: a private
    PARITY_HOME `home`, the shadow's bytecode (or `bytecode`: where a release environment's
    shadow lies in `home`, parity keeps its children's bytecode itself), and no forkserver. A copy made for one test serves one or two runs, each after an edit that makes
    any server of it stale: a fresh process costs less than starting a server no other test can
    use, and leaves none holding half a gigabyte for the rest of the run (where it pushed the
    servers of the real environments out, they were started again)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PARITY_HOME=str(home), PYTHONPYCACHEPREFIX=bytecode or str(shadow / ".pycache"),
               PARITY_NO_FORKSERVER="1")
    return env


def edit_in_shadow(shadow: Path, relative: str, old: str, new: str) -> None:
    """Edit a file of a `shadow_env` (one of its real copies) in place, as a user patches site-packages."""
    path = shadow / relative
    assert not path.is_symlink(), f"{path} is a link into the original environment: name it in shadow_env's edits"
    text = path.read_text()
    assert old in text, f"{path}: {old!r} not found"
    path.write_text(text.replace(old, new))


def run_parity(*args: str, python: str = sys.executable, env: dict | None = None,
               overrides: str | None = None) -> subprocess.CompletedProcess:
    """The parity CLI of this checkout, run as a user runs it (`python -m parity ARGS` in the
    checkout), under `python` (a shadow environment's), `env` (default: this process's) and,
    with `overrides`, PARITY_PROBE_OVERRIDES (docs/drift-classes.md)."""
    env = dict(os.environ if env is None else env)
    if overrides:
        env["PARITY_PROBE_OVERRIDES"] = overrides
    return subprocess.run([python, "-m", "parity", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=900)


REPLIES = ROOT / "tests" / "replies"  # probe replies recorded from the real releases


def recorded(name: str) -> dict:
    """A recorded probe reply (tests/replies/NAME), as the parent reads it."""
    return json.loads((REPLIES / name).read_text())


# What parity's wheel is built from (setup.py ships the data among them).
WHEEL_SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "parity", "envs.toml", "locks", "fixtures",
                 "contracts", "releases.json")


def build_wheel(tmp: Path) -> Path:
    """parity's wheel, built by pip (no dependencies, no build isolation) from a copy of the
    checkout's sources in `tmp/src`, written to `tmp/dist`."""
    src = tmp / "src"
    src.mkdir()
    for name in WHEEL_SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "--disable-pip-version-check", "-w", str(tmp / "dist"), str(src)],
                          cwd=src, capture_output=True, text=True)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    (wheel,) = (tmp / "dist").glob("eagle_parity-*.whl")
    return wheel
