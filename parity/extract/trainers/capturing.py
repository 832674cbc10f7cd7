"""What every trainer that captures the target's states itself shares (SpecForge, NVIDIA ModelOpt,
NVIDIA NeMo Automodel: `CAPTURES_STATES`): its command-line options (its release, its run's ids),
and the training contract its probe's named capture describes. A trainer folder keeps only what is
its own: its probe, its families, its findings.
"""

from __future__ import annotations

from typing import Any, Callable

from ...contract import Finding, GraphFlags, Provenance, Tap, TargetModel, TrainingContract, VocabMapping, sources
from ...envs import display_python
from ...inputs import parse_ids


def add_options(impl: Any, parser, command: str, ids_help: str) -> None:
    """`impl`'s release flag (FLAG) and its run's ids (IDS_FLAG) beside --trainer, and its release
    range on `parity sweep` (swept only when asked, from SWEEP_FROM)."""
    if command == "sweep":
        parser.add_argument(impl.FLAG, metavar="RANGE", help=f"the {impl.TITLE} releases: 'all' (from "
                            f"{impl.SWEEP_FROM}), a version range, or 'none' (the default: it is swept only when "
                            "asked)")
    if command == "trainer":
        parser.add_argument(impl.IDS_FLAG, metavar="IDS", help=f"--trainer {impl.NAME}: {ids_help}")
        parser.add_argument(impl.FLAG, metavar="VERSION", help=f"--trainer {impl.NAME}: another release, in "
                            "parity's environment of it (default: the installed one)")


def options(impl: Any, ids_help: str) -> tuple[Callable, Callable, Callable]:
    """`impl`'s `add_options`, `release_from` and `ids_from` (the Trainer protocol's), for a trainer
    module to bind at its top: `add_options, release_from, ids_from = capturing.options(...)`."""
    def add(parser, command: str) -> None:
        add_options(impl, parser, command, ids_help)

    add.__doc__ = f"{impl.IDS_FLAG} and {impl.FLAG}, beside --trainer; {impl.FLAG} RANGE on `parity sweep`."
    return add, lambda args: release_from(impl, args), lambda args: ids_from(impl, args)


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def release_from(impl: Any, args) -> str | None:
    """The release of `impl` the parsed command line names (its FLAG)."""
    return getattr(args, _dest(impl.FLAG), None)


def ids_from(impl: Any, args) -> list[int] | None:
    """The run's ids the parsed command line gives (its IDS_FLAG)."""
    return parse_ids(getattr(args, _dest(impl.IDS_FLAG), None), impl.IDS_FLAG)


def named_layout(r: Any, error: type[Exception], package: str) -> tuple[Tap, ...]:
    """The capture a probe reply `r` named (its fc slots, then its loss target), else `error`
    naming why a state could not be named (an error finding) or what stopped the run."""
    version = r.shown_release
    if r.error is not None:  # said once: the probe's line may name the release already
        said = f"{package} {version}"
        raise error(r.error if r.error.startswith(said) else f"{said}: {r.error}")
    taps = [s.tap for s in r.fc] + [r.target.tap]
    if None in taps:
        why = "; ".join(f.message for f in r.findings if f.severity == "error")
        raise error(f"{package} {version}: a trained state could not be named: {why}")
    return tuple(Tap.parse(t) for t in taps)


def captured_contract(r: Any, target: TargetModel, layout: tuple[Tap, ...], *, name: str, code_path: str,
                      details: dict[str, str], findings: list[Finding], draft=None) -> TrainingContract:
    """The TrainingContract of a trainer's capture (`layout`: the fc states, then the loss target),
    from its probe's reply `r`, with the draft's graph and vocabulary as read (`draft`)."""
    provenance = Provenance(package=name, version=r.shown_release, code_path=code_path, family=r.family,
                            python=display_python(r.python), details=details, reply_cache=r.reply_cache)
    fc = layout[:-1]
    return TrainingContract(
        target_model=target, fc_input=fc, graph=draft.flags if draft else GraphFlags(),
        vocab=sources.vocab(draft.vocab, draft.sizes) if draft else VocabMapping(),
        embedding=draft.embedding if draft else "unknown", draft=r.built,
        provenance=provenance, findings=tuple(findings), dump_layout=layout,
        dump_layout_source="trainer_capture", fc_slots=tuple(range(len(fc))), target=layout[-1],
        target_slot=len(fc), target_normed_by_trainer=r.target_normed_by_trainer, alignment=r.alignment,
        trained_depth=r.trained_depth)


__all__ = ["add_options", "captured_contract", "ids_from", "named_layout", "options", "release_from"]
