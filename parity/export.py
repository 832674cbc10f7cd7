"""`parity export --engine E`: a speculators draft as a directory the engine loads, with the fix.

The config is rewritten in the engine's served format (its `served_config`: for SGLang,
parity/extract/engines/sglang/served.py, an SGLang-format config; for vLLM, which loads
speculators-format drafts natively, the same config with the ids at the top level, where both
of its model runners read them) with the id list the gate solved on the installed engine.
Tensors keep speculators' names, which the engines' `load_weights` map themselves
(`fc.weight` -> `model.fc.weight`, ...), except where the installed engine's draft class
differs from the trained one in a way the serving extraction finds and verifies on its own
`load_weights` (parity/checkpoint.py): a decoder layer loaded under another name (SGLang
before 0.5.11: `layers.0.*` -> `midlayer.*`) is renamed, and a bias the trained draft does not
have (SGLang 0.4.8.post1: `fc.bias`) is written as zeros. The result is then checked by the
gate like any served draft: if the installed engine cannot honour the training graph (a flag
it drops, a tensor it ignores, slots it cannot feed), nothing is written and the reason is the
error.
"""

from __future__ import annotations

import json
import shutil
import stat
import tempfile
from contextlib import contextmanager, nullcontext
from pathlib import Path

from . import files
from .checkpoint import served_tensors
from .contract import ServingContract, TrainingContract
from .extract.trainers import trainer
from .extract.engines import BoundEngine, engine as default_engine
from .inputs import Draft, InputError, Target
from .verdict import Verdict, check


class ExportRefused(InputError):
    """The installed engine cannot serve this draft as it was trained (exit 2, one line)."""

    def __init__(self, draft: Path, engine_name: str, version: str, reason: str):
        self.reason = reason
        super().__init__(f"refusing to export {draft}: {engine_name} {version} cannot serve it as trained: {reason}")


def is_exportable(config: dict) -> bool:
    """A speculators-format draft config (as trained): the input `parity export` takes."""
    return trainer().is_trained_draft(config)


def _write(tmp: Path, draft: Draft, ids: list[int], engine: BoundEngine, form: ServingContract | None) -> Draft:
    """The served form of `draft` with `ids`, written into `tmp`: the config, and the tensors as
    the engine's draft class loads them (`form`: a serving contract's checkpoint renames and
    zero biases, parity/checkpoint.py; None: as trained)."""
    served = Draft(path=tmp, config=engine.served_config(draft.config, ids), given=draft.name)
    served.config_file.write_text(json.dumps(served.config, indent=2) + "\n")
    for f in sorted(draft.path.glob("*.safetensors")):
        if form is None or not (form.checkpoint_renames or form.checkpoint_zero_biases):
            shutil.copyfile(f, tmp / f.name)  # a new file, the umask's mode (not the input's: copy2)
            continue
        from safetensors import safe_open
        from safetensors.torch import save_file

        with safe_open(str(f), framework="pt") as fh:
            meta, tensors = fh.metadata(), {name: fh.get_tensor(name) for name in fh.keys()}
        save_file(served_tensors(tensors, form.checkpoint_renames, form.checkpoint_zero_biases),
                  str(tmp / f.name), metadata=meta)
    return served


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
    return files.dir_mode()


@contextmanager
def _writing(out: Path):
    """OSError while writing (a read-only place, a full disk) -> one line naming the path."""
    try:
        yield
    except OSError as exc:
        raise InputError(f"export target {out}: cannot write {exc.filename or out}: "
                         f"{exc.strerror or exc}") from None


def _solve(tmp: Path, draft: Draft, training: TrainingContract, target: Target, engine: BoundEngine,
           writing=nullcontext):
    """Write the engine's served form of the draft into `tmp` with the ids the gate solves on
    the installed engine, and check it like any served draft: (ids, the final CheckResult) or
    ExportRefused. `writing` wraps each write (export turns OSError into one line naming its output)."""
    ids = draft.config.get("eagle_aux_hidden_state_layer_ids") or [t.layer for t in training.fc_input]
    form = None
    with writing():
        served = _write(tmp, draft, ids, engine, form)
    result = check(training, target, served, engine, verify=True)
    if result.serving.checkpoint_renames or result.serving.checkpoint_zero_biases:
        form = result.serving  # the engine loads these tensors under other names, or lacks these biases
        with writing():
            served = _write(tmp, draft, ids, engine, form)
        result = check(training, target, served, engine, verify=True)
    if result.verdict is Verdict.drift and result.suggestion is not None:
        ids = result.suggestion.eagle_aux_hidden_state_layer_ids
        with writing():
            served = _write(tmp, draft, ids, engine, form)
        result = check(training, target, served, engine, verify=False)
    if result.verdict is not Verdict.parity:
        why = result.unservable or result.unfixable or "; ".join(d.message for d in result.differences)
        raise ExportRefused(draft.path, engine.name, result.serving.provenance.version,
                            why.replace(str(tmp), f"the export of {draft.path}"))
    return ids, result


def _trained(draft: Draft) -> Draft:
    """`draft`, refused (one line) unless it is in speculators' as-trained format."""
    if not is_exportable(draft.config):
        raise InputError(f"draft config {draft.config_file}: not a speculators-format draft "
                         "(no speculators_model_type / transformer_layer_config)")
    return draft


def plan_export(draft: Draft, training: TrainingContract, target: Target,
                engine: BoundEngine | None = None):
    """What `parity export` would write, decided by its own gate, writing nothing that stays:
    (ids, CheckResult) or ExportRefused. `engine`: the engine bound to its release (default: the
    default engine, installed)."""
    _trained(draft)
    tmp = Path(tempfile.mkdtemp(prefix="parity-export-"))
    try:
        return _solve(tmp, draft, training, target, engine or default_engine())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def export_draft(draft: Draft, out: Path, training: TrainingContract, target: Target,
                 force: bool = False, engine: BoundEngine | None = None) -> str:
    """Write the served form of `draft` for `engine` (bound to its release; None: the default
    engine, installed) to `out`, checked by the gate first.

    The new directory is built beside `out` (same filesystem, so the final rename is atomic),
    checked there, then put in place whole: an interruption leaves the old `out` or the new
    one, never a mix (no shards of an older checkpoint beside the new file). Inputs are only
    read. A failure to write (read-only place, full disk) is an InputError naming the path."""
    out = Path(out)
    engine = engine or default_engine()
    _trained(draft)
    real = check_output(out, draft.path, target.path, force)
    created = [p for p in real.parents if not p.exists()]  # deepest first
    staged = None
    try:
        with _writing(out):
            real.parent.mkdir(parents=True, exist_ok=True)
            staged = Path(tempfile.mkdtemp(prefix=f".{real.name}.parity-new-", dir=real.parent))
            staged.chmod(_dir_mode(real))  # mkdtemp's 0700 would hide the export from others
        ids, result = _solve(staged, draft, training, target, engine,
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
    return (f"parity: exported {draft.path} -> {out} for {engine.name} {result.serving.provenance.version}: "
            f"{engine.ids_key()} {list(ids)} feed "
            f"[{', '.join(t.name for t in result.serving.fc_input)}], as trained")
