"""On demand: build the environment of a release no envs.toml entry has (`--build`).

`parity matrix`/`can-i-deploy --sglang X --speculators Y --build` asks `ensure_release` for each
release named. One that an environment already pins is left alone; for any other, the line
envs.toml would need is derived, never typed: the release's wheel is fetched (pip, the
ordinary client, no dependencies) and its METADATA read; each `{field}` of the family's
`[template.FAMILY]` is the version its `Requires-Dist` pins for that package (a range is
resolved to its newest release by uv), and for a family whose template does not say it lists
its imports (`imports_listed = true`; speculators does not) `extra` is every other requirement
the wheel declares, less the torch family (the CPU torch is the template's). The line goes
into `$PARITY_HOME/envs.toml` (the user's file; shipped ones are never edited), written with
tomlkit, which keeps the file's comments, layout and other entries as they were, and the
environment is built into the home from a lock resolved for it (parity.build_env), with progress lines on stderr.
"""

from __future__ import annotations

import enum
import functools
import json
import re
import subprocess
import sys
import tempfile
import threading
import zipfile
from pathlib import Path


from .errors import UserError
from .home import user_envs, shipped
from .progress import logger
from .registry import provides_module, uploaded
from .build_env import _run, build, torch_source, uv, uv_env
from .envs import EnvError, env_path, environments, keep_bytecode, load_specs, parity_on_path, raw_envs
from .workspace import private_caches

ABSENT = "none"  # a pin whose package the release does not require (envs.toml drops that dependency)
TORCH_FAMILY = frozenset({"torch", "torchvision", "torchaudio", "torchcodec"})

FIELD = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*==\s*\{(\w+)\}\s*$")


class BuildError(UserError, RuntimeError):
    """A release whose environment could not be derived or built (one line)."""


class LineSource(str, enum.Enum):
    """Where the envs.toml line a release's environment was built from came from."""

    DECLARED = "envs.toml"  # an envs.toml (the shipped one, or the user's) already had it
    SWEPT = "releases.json"  # the line the published sweep derived for it (its row's build.line)
    DERIVED = "derived"  # derived now: its wheel's metadata, then its imports run in its environment


@functools.lru_cache(maxsize=1)
def _swept_lines() -> dict:

    from .contract.swept import Swept

    path = shipped("releases.json")
    if not path.is_file():
        return {}
    data = Swept.read(json.loads(path.read_text()))
    return {(family, row.version): row.build.line
            for family, section in data.sections().items() for row in section.releases if row.build.line}


def swept_line(family: str, version: str) -> dict | None:
    """The line the published sweep built `family` `version` from (releases.json), if it ran it."""
    return _swept_lines().get((family, version))


log = logger("parity")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.lru_cache(maxsize=None)
def _wheel_metadata(package: str, version: str) -> str:
    """The METADATA text of `package==version`'s wheel (fetched once per process)."""
    with tempfile.TemporaryDirectory(prefix="parity-wheel-") as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                               "--disable-pip-version-check", "--only-binary", ":all:", "-d", tmp,
                               f"{package}=={version}"], capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no wheel"]
            raise BuildError(f"cannot fetch {package} {version}'s wheel to read its metadata: "
                             f"{_source_only(package, version) or last[0]}")
        with zipfile.ZipFile(wheels[0]) as whl:
            meta = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
            return whl.read(meta).decode()


def _source_only(package: str, version: str) -> str | None:
    """Why a release with no wheel cannot be built, when it was published as a source archive
    only (SpecForge 0.1.0): pip's own words if the archive cannot even be built (then no one
    can install it from the registry), else that parity builds release environments from
    wheels. None when there is no source archive either."""
    with tempfile.TemporaryDirectory(prefix="parity-sdist-") as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                               "--disable-pip-version-check", "-d", tmp, f"{package}=={version}"],
                              capture_output=True, text=True)
        if proc.returncode == 0:
            return (f"{package} {version} was published as a source archive only, and parity builds "
                    "release environments from wheels")
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines()]
        if not any(ln.startswith("Collecting ") for ln in lines):
            return None  # no source archive either: pip's first answer stands
        cause = next((ln for ln in lines if re.match(r"\w+(Error|Exception): ", ln)), lines[-1] if lines else "")
        return (f"{package} {version} was published as a source archive only, which pip cannot build "
                f"({cause}), so no one can install it from the registry")


def wheel_requirements(package: str, version: str, extras: bool = False) -> list:
    """The unconditional `Requires-Dist` of `package==version`'s wheel (packaging Requirements);
    with `extras`, also those of its extras (sglang up to 0.5.2 requires fastapi only in `srt`,
    the extra its install instructions name), the unconditional one first where both name a package."""
    from packaging.requirements import Requirement

    text = _wheel_metadata(package, version)
    out, optional = [], []
    for line in text.splitlines():
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                req.marker = None
                out.append(req)
            elif extras and "extra" in str(req.marker):
                req.marker = None
                optional.append(req)
    return out + optional


def requirements_by_name(package: str, version: str) -> dict:
    """The wheel's requirements, extras included, by normalised name (an unconditional one
    wins where an extra names the same package)."""
    reqs: dict = {}
    for r in wheel_requirements(package, version, extras=True):
        reqs.setdefault(_norm(r.name), r)
    return reqs


def newest(requirement: str, published_by: str | None = None) -> str:
    """The newest release satisfying `requirement` (uv's resolver, no dependencies); with
    `published_by` (an RFC 3339 time), the newest published by then."""

    by = ["--exclude-newer", published_by] if published_by else []
    with tempfile.TemporaryDirectory(prefix="parity-pin-") as tmp:
        src = Path(tmp) / "in.txt"
        src.write_text(requirement + "\n")
        out = _run([str(uv()), "pip", "compile", str(src), "--no-deps", "--no-header", "--no-annotate",
                    "--python", sys.executable, *by, *torch_source()], f"resolving {requirement}", uv_env())
    pins = [ln.split("==", 1)[1].strip() for ln in out.splitlines() if "==" in ln]
    if not pins:
        raise BuildError(f"no release satisfies {requirement}")
    return pins[0]


def imports_listed(template: dict) -> bool:
    """Whether the family's template says its `deps` name every import of the code parity runs
    (`imports_listed = true`: the engines, whose other requirements are the GPU server's); for
    any other family the wheel's own requirements are added to a derived line as `extra`."""
    return bool(template.get("imports_listed", False))


def release_line(family: str, version: str, template: dict) -> dict:
    """The `[releases.FAMILY]` line for `version`: its template's pins from the wheel's metadata
    (a requirement without an exact pin: the newest release of it published by `version`'s own upload)."""
    reqs = requirements_by_name(family, version)  # older sglang pins transformers in `srt`
    defaults = template.get("defaults", {})
    line: dict = {}
    listed = set()
    for dep in template.get("deps", []):
        m = FIELD.match(dep)
        name = _norm(re.split(r"[=<>~!\[; ]", dep, maxsplit=1)[0])
        listed.add(name)
        if not m:
            continue
        req = reqs.get(name)
        pinned = [s.version for s in req.specifier if s.operator == "=="] if req is not None else []
        if m.group(2) in defaults:  # the template's default unless the wheel pins another release
            if pinned and pinned[0] != defaults[m.group(2)]:
                line[m.group(2)] = pinned[0]
            continue
        if req is None:  # the release does not require it: its line says so, the dependency is dropped
            line[m.group(2)] = ABSENT
            continue
        # An open requirement resolves to the newest release published by the engine release's own
        # upload, what it got on its day: vLLM 0.8.5-0.10.2 require `transformers>=4.5x` with no
        # bound, and transformers 5 (years later) drops the `rope_theta` attribute their Llama
        # reads, so the newest today builds a different model (a rope base of 10000, not the config's).
        line[m.group(2)] = pinned[0] if pinned else newest(str(req), published_by=uploaded(family, version))
    if not imports_listed(template):  # what the template installs without its dependencies is listed too
        listed |= {_norm(re.split(r"[=<>~!\[; ]", dep, maxsplit=1)[0]) for dep in template.get("no_deps", [])}
        base = {_norm(r.name): r for r in wheel_requirements(family, version)}
        extra = [str(r) for n, r in sorted(base.items()) if n not in listed and n not in TORCH_FAMILY]
        if extra:
            line["extra"] = extra
    return line


def _entry(line: dict):
    """A release's line as a TOML inline table (one line, as envs.toml writes them)."""
    import tomlkit  # here, not at the top: a release environment's python imports this module without it

    entry = tomlkit.inline_table()
    entry.update(line)
    return entry


def _toml_line(version: str, line: dict) -> str:
    """The line as it reads in envs.toml: `"VERSION" = {...}`."""
    import tomlkit  # here, not at the top: a release environment's python imports this module without it

    doc = tomlkit.document()
    doc[version] = _entry(line)
    return tomlkit.dumps(doc).strip()


# The user's envs.toml is read, edited and replaced whole: one edit at a time in this process
# (the sweep builds two releases at once).
_editing = threading.Lock()
_NEW_FILE = "# Releases parity built on demand (--build): one line each, read from the wheels' metadata.\n"


def add_line(family: str, version: str, line: dict) -> Path:
    """Write the line under `[releases.FAMILY]` of the user's envs.toml (made if absent)."""
    with _editing:
        return _set_line(family, version, line)


def _set_line(family: str, version: str, line: dict) -> Path:
    """Set `"VERSION" = {...}` under `[releases.FAMILY]` of the user's envs.toml (the table made
    where absent, an entry of that version replaced in place): the rest of the file, its
    comments, layout and other entries, is written back as it was (tomlkit)."""
    import tomlkit  # here, not at the top: a release environment's python imports this module without it

    path = user_envs()
    doc = tomlkit.parse(path.read_text() if path.is_file() else _NEW_FILE)
    if "releases" not in doc:
        doc["releases"] = tomlkit.table(is_super_table=True)
    releases = doc["releases"]
    new = family not in releases
    if new:
        releases[family] = tomlkit.table()
    releases[family][version] = _entry(line)
    if new and list(doc)[-1] != "releases":  # a table of the user's follows: a blank line before it
        releases[family].add(tomlkit.nl())
    path.parent.mkdir(parents=True, exist_ok=True)
    _write(path, tomlkit.dumps(doc))
    return path


ENGINE_IMPORT_ROUNDS = 4


def missing_imports(python: Path, family: str) -> list[str]:
    """Top-level modules `family`'s code paths import but `python`'s environment lacks."""
    import os


    env = dict(os.environ)
    keep_bytecode(python, env)
    with parity_on_path(env) as cwd, tempfile.TemporaryDirectory(prefix="parity-imports-") as tmp:
        proc = subprocess.run([str(python), "-m", "parity.extract.engines", family], capture_output=True, text=True,
                              env=private_caches(env, tmp), cwd=cwd)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
    return json.loads(lines[-1]) if lines else []


def ensure_release(family: str, version: str, *, derive: bool = False, beside_this: bool = False) -> LineSource:
    """Make `family==version` runnable: nothing when an environment pins it and is built; build
    it when it is declared; otherwise add its line to the user's envs.toml (the published sweep's,
    or with `derive` or for a release no sweep has seen, derived now) and build it. Returns where
    the line came from. `beside_this`: an environment of parity's own, never the one parity runs
    in (whose installed copy of the release cannot run there: parity.extract.installed)."""

    env = next((e for e in environments() if e.packages.get(family) == version and not (beside_this and e.current)),
               None)
    if env is not None and env.built:
        return LineSource.DECLARED
    source = LineSource.DECLARED
    if env is None:
        template = raw_envs().get("template", {}).get(family)
        if template is None:
            raise BuildError(f"cannot build {family} {version}: envs.toml has no [template.{family}]")
        line = None if derive else swept_line(family, version)
        if line is not None:
            source = LineSource.SWEPT
            log(f"{family} {version}: no environment has it; the published sweep built it from this line")
        else:
            source = LineSource.DERIVED
            log(f"{family} {version}: no environment has it; reading its wheel's metadata for the pins it imposes")
            line = release_line(family, version, template)
        where = add_line(family, version, line)
        log(f"{family} {version}: added {_toml_line(version, line)} to {where}")
    try:
        specs = load_specs()
    except EnvError as exc:
        raise BuildError(str(exc)) from None
    name = f"{family}-{version}"
    if env is not None:
        name = env.name
    log(f"{family} {version}: building its environment (progress below)")
    _build(family, version, name, specs[name])
    if source is LineSource.DERIVED and imports_listed(template):
        _step_back_too_new(family, version, name)
        _add_missing_imports(family, version, name)
    return source


# Run in a release environment: which of the given distributions cannot be imported there because
# a module of another installed package is missing (a release of it too new for the pins beside it).
_TOO_NEW = r"""
import importlib, importlib.metadata as md, importlib.util, json, sys
out = {}
for field, dist in json.loads(sys.argv[1]).items():
    try:
        tops = (md.distribution(dist).read_text("top_level.txt") or "").split()
    except md.PackageNotFoundError:
        continue
    tops = tops or [dist.replace("-", "_")]
    for top in tops:
        try:
            importlib.import_module(top)
        except ModuleNotFoundError as exc:
            parent = (exc.name or "").split(".")[0]
            if "." in (exc.name or "") and importlib.util.find_spec(parent) is not None:
                out[field] = f"No module named {exc.name!r}"
print(json.dumps(out))
"""


def too_new(python: Path, fields: dict[str, str]) -> dict[str, str]:
    """Of `fields` ({field: distribution}), those whose distribution, installed in `python`'s
    environment, fails to import because a module of another installed package is missing
    there ({field: why})."""
    import os


    env = dict(os.environ)
    keep_bytecode(python, env)
    with tempfile.TemporaryDirectory(prefix="parity-imports-") as tmp:
        proc = subprocess.run([str(python), "-c", _TOO_NEW, json.dumps(fields)], capture_output=True, text=True,
                              env=private_caches(env, tmp))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def _step_back_too_new(family: str, version: str, name: str) -> None:
    """A template default the release's line left in place (compressed-tensors 0.18.0) whose
    import fails in the release's environment for want of a module of a package the release
    pins older (transformers.masking_utils, 4.53+, under sglang 0.4.4.post4-0.4.8.post1's
    4.51-4.52): pinned instead to the newest release of it published by the engine release's
    own upload (what its unpinned requirement resolved to that day), and the environment
    rebuilt; decided by running the import, never by a list."""

    template = raw_envs()["template"][family]
    line = dict(raw_envs()["releases"][family][version])
    dists = {m.group(2): m.group(1) for m in map(FIELD.match, template.get("deps", []))
             if m and m.group(2) in template.get("defaults", {}) and m.group(2) not in line}
    failing = too_new(_python(name, load_specs()[name]), dists) if dists else {}
    if not failing:
        return
    when = uploaded(family, version)
    for field, why in failing.items():
        line[field] = newest(dists[field], published_by=when)
        log(f"{family} {version}: {dists[field]} {template['defaults'][field]} cannot be imported beside its "
            f"pins ({why}): pinned to {line[field]}, the newest published by {family} {version} ({when}); "
            "rebuilding")
    _replace_line(family, version, line)
    _build(family, version, name, load_specs()[name])


def _build(family: str, version: str, name: str, spec: dict) -> None:

    try:
        build(name, spec)
    except SystemExit as exc:  # the builder's own one-line failure
        raise BuildError(f"cannot build {family} {version}'s environment: {exc}") from None


def _add_missing_imports(family: str, version: str, name: str) -> None:
    """A release whose CPU path imports a package its family's template does not list (sglang
    0.5.18: xgrammar, at `server_args` import): each such module that the wheel's own metadata
    requires is added to the line's `extra`, with the wheel's specifier, and the environment
    rebuilt; decided by running the import, never by a list."""

    reqs = requirements_by_name(family, version)
    for _ in range(ENGINE_IMPORT_ROUNDS):
        specs = load_specs()
        missing = missing_imports(_python(name, specs[name]), family)
        wanted = [str(r) for r in (_requirement_of(m, reqs) for m in missing) if r is not None]
        line = dict(raw_envs()["releases"][family][version])
        new = [w for w in wanted if w not in line.get("extra", [])]
        if not new:
            return
        before = line.get("extra", [])
        line["extra"] = [*before, *new]
        _replace_line(family, version, line)
        log(f"{family} {version}: its code paths import {', '.join(new)} (its wheel requires them): "
            "added to its line, rebuilding")
        try:
            _build(family, version, name, load_specs()[name])
        except BuildError:
            # The wheel's pin conflicts with the template's (vllm 0.12: numba==0.61.2 needs
            # numpy<2.3): the module unpinned, resolved with the rest.
            bare = [_norm(r.name) for r in (_requirement_of(m, reqs) for m in missing) if r is not None]
            line["extra"] = [*before, *(b for b in bare if b not in before)]
            _replace_line(family, version, line)
            log(f"{family} {version}: its wheel's pins for {', '.join(bare)} conflict with the template's: "
                "added unpinned, rebuilding")
            _build(family, version, name, load_specs()[name])


def _requirement_of(module: str, reqs: dict):
    """The wheel's requirement that installs top-level `module` (`lmformatenforcer`: vLLM
    0.11.1-0.14.1's `lm-format-enforcer`, which `vllm serve`'s parser imports), or None."""
    return reqs.get(_norm(module)) or next((r for r in reqs.values() if provides_module(r.name, module)), None)


def _python(name: str, spec: dict) -> Path:

    return env_path(name, spec) / "bin" / "python"


def _replace_line(family: str, version: str, line: dict) -> None:
    """The line of `family` `version` in the user's envs.toml, replaced in place."""
    with _editing:
        _set_line(family, version, line)


def _write(path: Path, text: str) -> None:
    """Replace the user's envs.toml whole (a concurrent reader sees the old file or the new one)."""
    import os

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
