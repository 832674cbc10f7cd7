"""Build parity's virtual environments from envs.toml, each from its committed lock (stdlib only).

    python3 tools/setup_env.py            # a checkout: every environment (`./dev setup`)
    python3 tools/setup_env.py main       # just one
    python3 tools/setup_env.py --lock     # re-resolve every lock (after an envs.toml edit)
    parity setup [NAME ...]               # installed: the release environments, into $PARITY_HOME

Each environment is resolved once into a lock, `locks/NAME.txt` (exact versions and sha256
hashes of every wheel, written by uv's resolver: `uv pip compile --generate-hashes`), and
built from that lock only (`uv pip sync --require-hashes`): two fresh builds are identical,
and an unpinned dependency in envs.toml can no longer change what a build holds. A lock
records the hash of the envs.toml entry it was resolved from; when the entry changes (or a
new entry has no lock yet: a release added by a line, `--build`), it is re-resolved and
written (in a checkout `locks/`, to commit; installed, `$PARITY_HOME/locks/`). The up-to-date
stamp inside an environment is the hash of its lock (plus the build RECIPE, and for the
editable one pyproject.toml), so a re-run with nothing changed takes well under a second.

Cheap: every environment is built by one pinned uv (UV_VERSION, bootstrapped once into the
home with pip, its wheel's hash checked) with one package cache inside the home
(`$PARITY_HOME/.uv-cache`, the same filesystem as the environments), so an installed file
(torch's 700 MB above all) is a hard link to the cache's copy: a release environment costs
only the files no other environment has. `bench/envs.py` prints each one's build time and
real extra size.

uv reads no pip configuration, so what this machine's pip would have found is passed
explicitly: the CPU torch wheel from `/opt/wheels` when that directory exists (else the
PyTorch CPU index). The lock pins `torch==X+cpu` with its hash, so no CUDA torch can enter.

In a checkout each environment is built at its envs.toml `path` (`.venv`, `.envs/NAME`), or
into `$PARITY_HOME/NAME` when PARITY_HOME is set (parity.envs.env_path). Installed, the main
environment (`editable = true`: it installs the checkout) is the environment parity runs in,
and nothing is built for it. Progress goes to stderr.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .envs import STAMP, EnvError, env_path, load_specs, raw_envs, specs_from
from .home import CHECKOUT, HomeError, home, shipped
from .progress import logger

RECIPE = 3  # bump when the way an environment is built below changes (3: uv, from a lock)
UV_VERSION = "0.13.8"
# sha256 of uv's manylinux x86_64 wheel (checked where that is the wheel pip picks).
UV_SHA256 = {("Linux", "x86_64"): "e18a57b8b352eb7c8feb317b9f6f533c8f0ad9673fd6cf34bbe3cf1a9f6a8984"}
LOCAL_WHEELS = Path("/opt/wheels")  # this machine's CPU torch wheel (pip.conf's find-links)
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
LOCK_HEADER = "# parity lock"


log = logger("setup")


def spec_hash(name: str, spec: dict) -> str:
    """The hash of what envs.toml says about `name`: its lock records it."""
    canonical = {**spec, "deps": sorted(spec.get("deps", [])), "no_deps": sorted(spec.get("no_deps", [])),
                 "editable": bool(spec.get("editable"))}
    canonical.pop("path", None)  # where it is built does not change what it holds
    return hashlib.sha256(json.dumps({"name": name, "spec": canonical}, sort_keys=True).encode()).hexdigest()


def stamp_hash(name: str, lock: Path, spec: dict) -> str:
    h = hashlib.sha256()
    h.update(json.dumps({"name": name, "recipe": RECIPE, "python": sys.version.split()[0]}).encode())
    h.update(lock.read_bytes())
    if spec.get("editable") and CHECKOUT is not None:
        h.update((CHECKOUT / "pyproject.toml").read_bytes())
    return h.hexdigest()


# -- uv ------------------------------------------------------------------------------------------

def uv() -> Path:
    """The pinned uv: on PATH when it is that version, else installed once into the home.

    Installed under a file lock, with a marker written last: the sweep's builder threads and
    pytest's workers ask at once, and a half-installed or re-installed uv under a running build
    fails it (the check is the marker, not a `uv --version` that a loaded machine can time out)."""
    found = shutil.which("uv")
    if found and _version(found) == UV_VERSION:
        return Path(found)
    where = home() / ".tools" / f"uv-{UV_VERSION}"
    exe, done = where / "bin" / "uv", where / ".installed"
    if exe.exists() and done.exists():
        return exe
    where.parent.mkdir(parents=True, exist_ok=True)
    with open(where.parent / f".uv-{UV_VERSION}.lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # released when the file closes
        if exe.exists() and done.exists():  # another thread or process installed it meanwhile
            return exe
        log(f"installing uv {UV_VERSION} into {where} (once)")
        with tempfile.TemporaryDirectory(prefix="parity-uv-") as tmp:
            req = Path(tmp) / "uv.txt"
            sha = UV_SHA256.get((platform.system(), platform.machine()))
            req.write_text(f"uv=={UV_VERSION}" + (f" --hash=sha256:{sha}" if sha else "") + "\n")
            staging = Path(tmp) / "uv"
            _run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                  "--target", str(staging), "-r", str(req)], "pip install uv")
            if where.exists():
                shutil.rmtree(where)
            shutil.move(str(staging), str(where))
        if _version(str(exe)) != UV_VERSION:
            raise SystemExit(f"[setup] uv {UV_VERSION} installed into {where} does not run ({exe} --version)")
        done.write_text(UV_VERSION + "\n")
    return exe


def _version(exe: str) -> str | None:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[1] if len(out) > 1 else None


def uv_env() -> dict[str, str]:
    """uv's settings: its cache in the home (hard links into every environment), no config
    files of the user's, nothing from the network it was not asked for."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    env.update(UV_CACHE_DIR=str(home() / ".uv-cache"), UV_NO_CONFIG="1", UV_LINK_MODE="hardlink",
               UV_PYTHON_DOWNLOADS="never", UV_NO_PROGRESS="1")
    return env


def torch_source() -> list[str]:
    """Where the CPU torch wheel comes from (uv does not read pip.conf)."""
    if LOCAL_WHEELS.is_dir():
        return ["--find-links", str(LOCAL_WHEELS)]
    return ["--extra-index-url", TORCH_CPU_INDEX, "--index-strategy", "unsafe-best-match"]


def _run(cmd: list[str], what: str, env: dict | None = None, cwd: Path | None = None) -> str:
    """Run `cmd`; on a failure write its output to stderr and exit with one line that says what
    failed and why, in the tool's own words (uv's `error:` and what it says caused it)."""
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    if proc.returncode != 0:
        output = proc.stderr or proc.stdout
        sys.stderr.write(f"[setup] {' '.join(cmd)}\n{output[-6000:]}")
        raise SystemExit(f"[setup] {what} failed (exit {proc.returncode}): {_why(output)}")
    return proc.stdout


def _why(output: str) -> str:
    """A failed tool's reason as one line: from its last `error:` line on (uv's causes follow
    it), else its last line; a few hundred characters at most."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    starts = [i for i, ln in enumerate(lines) if ln.lower().startswith("error")]
    why = " ".join(lines[starts[-1]:] if starts else lines[-1:]) or "no output"
    return why if len(why) <= 600 else why[:600] + " ..."


# -- locks ---------------------------------------------------------------------------------------

def lock_path(name: str) -> Path:
    """Where `name`'s lock is written: a checkout's `locks/` (committed) for an environment the
    shipped envs.toml declares; otherwise (installed, or a release the user's envs.toml or
    `--build` added) `$PARITY_HOME/locks/`. A shipped lock is read first while it is current."""

    ours = CHECKOUT is not None and name in specs_from(raw_envs(user=False))
    return shipped("locks", f"{name}.txt") if ours else home() / "locks" / f"{name}.txt"


def _lock_spec(lock: Path) -> str | None:
    """The envs.toml hash a lock was resolved from (its header), None when unreadable."""
    try:
        first = lock.read_text().splitlines()[:3]
    except OSError:
        return None
    for line in first:
        if line.startswith(LOCK_HEADER) and "spec " in line:
            return line.rsplit("spec ", 1)[1].strip()
    return None


def current_lock(name: str, spec: dict) -> Path:
    """`name`'s lock, resolved first when it is missing or was resolved from another envs.toml entry."""
    want = spec_hash(name, spec)
    for lock in dict.fromkeys([shipped("locks", f"{name}.txt"), lock_path(name)]):
        if _lock_spec(lock) == want:
            return lock
    return resolve_lock(name, spec, lock_path(name))


def resolve_lock(name: str, spec: dict, lock: Path) -> Path:
    """Resolve `name`'s envs.toml entry into `lock` with uv: its `deps` (with the CPU torch) as
    one resolution, its `no_deps` packages alone (installed without their dependencies)."""
    t0 = time.monotonic()
    log(f"{name}: resolving envs.toml's entry into {_shown(lock)}")
    exe, env = str(uv()), uv_env()
    common = ["--python", sys.executable, "--generate-hashes", "--no-header", *torch_source()]
    with tempfile.TemporaryDirectory(prefix="parity-lock-") as tmp:
        deps = Path(tmp) / "deps.in"
        deps.write_text("\n".join([f"torch=={spec['torch']}", *spec.get("deps", [])]) + "\n")
        parts = [_run([exe, "pip", "compile", str(deps), *common], f"resolving {name}", env)]
        if spec.get("no_deps"):
            nodeps = Path(tmp) / "no_deps.in"
            nodeps.write_text("\n".join(spec["no_deps"]) + "\n")
            parts.append("# installed without their dependencies (envs.toml `no_deps`):\n"
                         + _run([exe, "pip", "compile", str(nodeps), "--no-deps", *common],
                                f"resolving {name} (no_deps)", env))
    text = (f"{LOCK_HEADER} of the environment {name}: every package, exact version and sha256, resolved by "
            f"uv {UV_VERSION} from envs.toml; spec {spec_hash(name, spec)}\n"
            f"# Re-resolved by `./dev setup --lock {name}` when its envs.toml entry changes; never edited.\n"
            + "".join(parts).replace(str(deps), "envs.toml").replace(str(Path(tmp) / "no_deps.in"), "envs.toml"))
    lock.parent.mkdir(parents=True, exist_ok=True)
    tmp_lock = lock.with_suffix(f".tmp{os.getpid()}")
    tmp_lock.write_text(text)
    os.replace(tmp_lock, lock)
    log(f"{name}: resolved in {time.monotonic() - t0:.0f} s")
    return lock


# -- building ------------------------------------------------------------------------------------

def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(CHECKOUT)) if CHECKOUT is not None else str(path)
    except ValueError:
        return str(path)


def _same_python(path: Path) -> bool:
    """Whether `path` is an environment of this very interpreter version (then it is synced in
    place rather than built anew)."""
    py = path / "bin" / "python"
    if not py.exists():
        return False
    try:
        out = subprocess.run([str(py), "-c", "import sys; print(sys.version.split()[0])"],
                             capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return False
    return out == sys.version.split()[0]


def build(name: str, spec: dict) -> dict | None:
    """Build `name` from its lock unless its stamp says it is current. Returns what was done
    ({"name", "seconds", "path"}) or None when nothing was."""
    if spec.get("editable") and CHECKOUT is None:
        log(f"{name}: the environment parity runs in ({sys.prefix}): nothing to build")
        return None
    path = env_path(name, spec)
    lock = current_lock(name, spec)
    stamp = path / STAMP
    want = stamp_hash(name, lock, spec)
    if stamp.exists() and stamp.read_text().strip() == want:
        log(f"{name}: up to date ({_shown(path)})")
        return None
    t0 = time.monotonic()
    log(f"{name}: building {_shown(path)} from {_shown(lock)}")
    exe, env = str(uv()), uv_env()
    if _same_python(path):
        # Synced in place: only the packages that changed are swapped, so a process running in
        # the environment meanwhile (a test, a check) keeps its interpreter and its site-packages.
        stamp.unlink(missing_ok=True)
    else:
        if path.exists():
            shutil.rmtree(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        _run([exe, "venv", "--quiet", "--python", sys.executable, str(path)], f"creating {name}", env)
    py = str(path / "bin" / "python")
    sync = [exe, "pip", "sync", "--quiet", "--python", py, "--require-hashes", *torch_source(), str(lock)]
    try:
        _run(sync, f"installing {name} from {_shown(lock)}", env)
    except SystemExit as exc:
        # Every file is pinned by hash, so a second try installs the same thing; what fails once
        # and not twice is the network or the shared package cache (a failure stays in the log).
        log(f"{name}: {str(exc).removeprefix('[setup] ')}; trying once more")
        _run(sync, f"installing {name} from {_shown(lock)}", env)
    if spec.get("editable"):
        _run([exe, "pip", "install", "--quiet", "--python", py, "--no-deps", "--no-build-isolation",
              "-e", str(CHECKOUT)], f"installing the checkout into {name}", env)
    stamp.write_text(want + "\n")
    seconds = time.monotonic() - t0
    log(f"{name}: built in {seconds:.0f} s")
    return {"name": name, "seconds": round(seconds, 1), "path": str(path)}


def main(argv: list[str]) -> int:
    """Build the environments named in `argv` (all when empty); `--lock` re-resolves their
    locks first. 0, or 2 for an unknown name."""
    relock = "--lock" in argv
    names = [a for a in argv if a != "--lock"]
    try:
        envs = load_specs()
    except (EnvError, HomeError) as exc:  # a broken envs.toml, a PARITY_HOME that cannot be one
        print(f"[setup] {exc}", file=sys.stderr)
        return 2
    names = names or list(envs)
    unknown = [n for n in names if n not in envs]
    if unknown:
        print(f"[setup] unknown environment(s) {unknown}; envs.toml has {list(envs)}",
              file=sys.stderr)
        return 2
    for name in names:
        if relock:
            resolve_lock(name, envs[name], lock_path(name))
        build(name, envs[name])
    return 0
