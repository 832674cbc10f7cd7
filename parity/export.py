"""`parity export --engine E`: a speculators draft as a directory the engine loads, with the fix.

The config is rewritten in the engine's served format (its `served_config`: for SGLang,
parity/extract/engines/sglang/served.py, an SGLang-format config; for vLLM, which loads
speculators-format drafts natively, the same config with the ids at the top level, where both
of its model runners read them) with the id list the gate solved on the installed engine.
Tensors keep speculators' names, which the engines' `load_weights` map themselves
(`fc.weight` -> `model.fc.weight`, ...). The result is then checked by the gate like any
served draft: if the installed engine cannot honour the training graph (a flag it drops, a
tensor it ignores, slots it cannot feed), nothing is written and the reason is the error.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from contextlib import contextmanager, nullcontext
from pathlib import Path

from .contract import TrainingContract
from .extract.trainers import trainer
from .extract.engines import engine
from .inputs import InputError, read_config

class ExportRefused(InputError):
    """The installed engine cannot serve this draft as it was trained (exit 2, one line)."""

    def __init__(self, draft: Path, engine_name: str, version: str, reason: str):
        self.reason = reason
        super().__init__(f"refusing to export {draft}: {engine_name} {version} cannot serve it as trained: {reason}")


def is_exportable(draft: Path) -> bool:
    """A speculators-format draft: the input `parity export` takes."""
    try:
        _speculators_spec(Path(draft))
    except InputError:
        return False
    return True


def _write(tmp: Path, draft: Path, spec: dict, ids: list[int], engine_name: str) -> None:
    (tmp / "config.json").write_text(json.dumps(engine(engine_name).served_config(spec, ids), indent=2) + "\n")
    for f in draft.glob("*.safetensors"):
        shutil.copy2(f, tmp / f.name)


def _overlap(out: Path, path: Path) -> str | None:
    """How `out` overlaps input `path` ('is', 'is inside', 'holds'), both resolved; None if apart."""
    if out == path:
        return "is"
    if path in out.parents:
        return "is inside"
    if out in path.parents:
        return "holds"
    return None


def check_output(out: Path, draft: Path, target_config: Path, force: bool) -> Path:
    """The resolved output directory, or an InputError: an output that is, holds or sits inside
    an input would destroy it (the draft's own config.json rewritten, the draft deleted by
    the whole-directory replace); an existing file or a non-empty directory needs --force."""
    real = out.resolve()
    for what, path in (("the draft", draft), ("the target config", target_config)):
        how = _overlap(real, path.resolve())
        if how:
            raise InputError(f"export target {out}: {how} {what} {path}; export elsewhere")
    if real.exists() and not real.is_dir():
        raise InputError(f"export target {out}: exists and is not a directory")
    if real.is_dir() and any(real.iterdir()) and not force:
        raise InputError(f"export target {out}: exists and is not empty (pass --force)")
    return real


def _replace_dir(staged: Path, out: Path) -> None:
    """Put `staged` at `out` whole. An old `out` is moved aside first and removed only after the
    new one is in place; if the second rename fails or is interrupted, the old one goes back."""
    if not out.exists():
        staged.rename(out)
        return
    aside = Path(tempfile.mkdtemp(prefix=f".{out.name}.parity-old-", dir=out.parent))
    out.rename(aside / out.name)
    try:
        staged.rename(out)
    except BaseException:
        (aside / out.name).rename(out)
        aside.rmdir()
        raise
    shutil.rmtree(aside, ignore_errors=True)


def _dir_mode(out: Path) -> int:
    """The replaced directory's mode, or what a plain mkdir would give (0777 less the umask)."""
    if out.is_dir():
        return stat.S_IMODE(out.stat().st_mode)
    umask = os.umask(0)
    os.umask(umask)
    return 0o777 & ~umask


@contextmanager
def _writing(out: Path):
    """OSError while writing (a read-only place, a full disk) -> one line naming the path."""
    try:
        yield
    except OSError as exc:
        raise InputError(f"export target {out}: cannot write {exc.filename or out}: "
                         f"{exc.strerror or exc}") from None


def _solve(tmp: Path, draft: Path, spec: dict, training: TrainingContract, target_config: Path,
           version: str | None, engine_name: str, writing=nullcontext):
    """Write the engine's served form of the draft into `tmp` with the ids the gate solves on
    the installed engine, and check it like any served draft: (ids, the final CheckResult) or
    ExportRefused. `writing` wraps each write (export turns OSError into one line naming its output)."""
    from .gate import check

    ids = spec.get("eagle_aux_hidden_state_layer_ids") or [t.layer for t in training.fc_input]
    with writing():
        _write(tmp, draft, spec, ids, engine_name)
    result = check(training, target_config, tmp, sglang_version=version, verify=True, engine_name=engine_name)
    if result.verdict == "drift" and result.suggestion is not None:
        ids = result.suggestion.eagle_aux_hidden_state_layer_ids
        with writing():
            _write(tmp, draft, spec, ids, engine_name)
        result = check(training, target_config, tmp, sglang_version=version, verify=False, engine_name=engine_name)
    if result.verdict != "parity":
        why = result.unservable or result.unfixable or "; ".join(d.message for d in result.differences)
        raise ExportRefused(draft, engine_name, result.serving.provenance.version,
                            why.replace(str(tmp), f"the export of {draft}"))
    return ids, result


def _speculators_spec(draft: Path) -> dict:
    spec = read_config(draft / "config.json", "draft config")
    if not trainer().is_trained_draft(spec):
        raise InputError(f"draft config {draft / 'config.json'}: not a speculators-format draft "
                         "(no speculators_model_type / transformer_layer_config)")
    return spec


def plan_export(draft: Path, training: TrainingContract, target_config: Path,
                sglang_version: str | None = None, engine_name: str = "sglang"):
    """What `parity export` would write, decided by its own gate, writing nothing that stays:
    (ids, CheckResult) or ExportRefused. `sglang_version`: the engine's release (None: installed)."""
    draft = Path(draft)
    spec = _speculators_spec(draft)
    tmp = Path(tempfile.mkdtemp(prefix="parity-export-"))
    try:
        return _solve(tmp, draft, spec, training, Path(target_config), sglang_version, engine_name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def export_draft(draft: Path, out: Path, training: TrainingContract, target_config: Path,
                 force: bool = False, engine_name: str = "sglang", version: str | None = None) -> str:
    """Write the served form of `draft` for `engine_name` (its `version`; None: the installed
    or newest one) to `out`, checked by the gate first.

    The new directory is built beside `out` (same filesystem, so the final rename is atomic),
    checked there, then put in place whole: an interruption leaves the old `out` or the new
    one, never a mix (no shards of an older checkpoint beside the new file). Inputs are only
    read. A failure to write (read-only place, full disk) is an InputError naming the path."""
    draft, out = Path(draft), Path(out)
    spec = _speculators_spec(draft)
    real = check_output(out, draft, Path(target_config), force)
    created = [p for p in real.parents if not p.exists()]  # deepest first
    staged = None
    try:
        with _writing(out):
            real.parent.mkdir(parents=True, exist_ok=True)
            staged = Path(tempfile.mkdtemp(prefix=f".{real.name}.parity-new-", dir=real.parent))
            staged.chmod(_dir_mode(real))  # mkdtemp's 0700 would hide the export from others
        ids, result = _solve(staged, draft, spec, training, Path(target_config), version, engine_name,
                             writing=lambda: _writing(out))
        with _writing(out):
            _replace_dir(staged, real)
        staged = created = None
    finally:
        if staged is not None:  # refused, failed or interrupted: nothing of this export stays
            shutil.rmtree(staged, ignore_errors=True)
        for p in created or []:  # the folders it made, if still empty
            try:
                p.rmdir()
            except OSError:
                pass
    return (f"parity: exported {draft} -> {out} for {engine_name} {result.serving.provenance.version}: "
            f"{engine(engine_name).IDS_KEY} {list(ids)} feed "
            f"[{', '.join(t.name for t in result.serving.fc_input)}], as trained")
