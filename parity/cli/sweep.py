"""`parity sweep`: the CLI shell over parity.sweep.run (arguments, progress, the two files)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import ExitCode, UserError
from ..home import CHECKOUT, home
from ..extract import engines, trainers
from ..report.releases import render_releases
from ..sweep.run import load, sweep, swept


def _where(name: str) -> Path:
    """The default output: in a checkout, the project's own published files; installed, here."""
    return (CHECKOUT / name) if CHECKOUT is not None else Path(Path(name).name)


def add_sweep_parser(sub) -> argparse.ArgumentParser:

    p = sub.add_parser("sweep", help="every published SGLang, vLLM, speculators (and, asked, SpecForge) release over "
                       "a fixed case set: what each feeds (writes releases.json and docs/releases.md; resumable)")
    # each swept engine's and trainer's RANGE flag (when not given: its sweep_default, 'all' unless it says 'none')
    engines.add_options(p, "sweep")
    trainers.add_options(p, "sweep")
    p.add_argument("--results", type=Path, default=_where("releases.json"), help="the results file (read to resume)")
    p.add_argument("--markdown", type=Path, default=_where("docs/releases.md"), help="the table to write")
    p.add_argument("--home", type=Path, help="where release environments are built (default: "
                   "$PARITY_HOME/sweep); each is deleted once its cases ran")
    p.add_argument("--redo", action="store_true", help="run releases the results file already holds again")
    p.add_argument("--derive", action="store_true", help="derive each release's envs.toml line from its wheel and "
                   "its imports again, even where the published releases.json has the line it was built from (a line "
                   "already in the sweep home's envs.toml, from an earlier run, stays)")
    p.add_argument("--keep-envs", action="store_true", help="keep each release's environment")
    p.add_argument("--limit", type=int, metavar="N", help="run at most N releases this time")
    p.add_argument("--render", action="store_true", help="only write the markdown from the results file")
    return p


def _wanted(text: str, flag: str):
    """`flag`'s releases: "all" (every one from the package's first the sweep covers), None ("none"),
    or the version range given."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if text in ("all", "none"):
        return {"all": "all", "none": None}[text]
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        raise UserError(f"{flag} {text!r}: not 'all', 'none' or a version range such as '>=0.5.11'") from None


def run_sweep(args) -> int:

    if args.limit is not None and args.limit < 1:
        raise UserError("--limit: at least 1")
    if args.render:
        if not args.results.is_file():
            raise UserError(f"--results {args.results}: no such file to render")
        data = load(args.results)
    else:
        given = {s: s.impl.release_from(args) for s in swept()}
        wanted = {s.name: w for s, text in given.items()
                  if (w := _wanted(s.sweep_default if text is None else text, s.impl.FLAG)) is not None}
        if not wanted:  # the flags given as none (a side whose default is none may be left out)
            said = " ".join(f"{s.impl.FLAG} none" for s, text in given.items() if text is not None)
            raise UserError(f"{said or 'every range none'}: nothing to sweep")
        args.results.parent.mkdir(parents=True, exist_ok=True)
        data = sweep(args.results, (args.home or home() / "sweep").absolute(), wanted=wanted, redo=args.redo,
                     keep_envs=args.keep_envs, derive=args.derive, limit=args.limit)
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    args.markdown.write_text(render_releases(data))
    print(f"wrote {args.markdown}" if args.render else f"wrote {args.markdown} and {args.results}")
    return ExitCode.OK
