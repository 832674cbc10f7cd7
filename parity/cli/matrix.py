"""`parity matrix` and `parity can-i-deploy`: the contract under every (or one) installed release
of the serving engine and of the trainer."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..errors import ExitCode
from ..extract import engines, trainers
from ..extract.engines import BoundEngine
from ..extract.trainers import BoundTrainer
from . import common
from .common import usage
from ..inputs import parse_serve_args
from ..lock import read_lock
from ..matrix import build_matrix, can_i_deploy
from ..ondemand import ensure_release
from ..report.matrix import render_markdown, render_text


def add_matrix_parsers(sub) -> None:
    def inputs(p):
        p.add_argument("--target-config", type=Path, help="the target's config.json")
        p.add_argument("--draft", type=Path, help="the draft directory as it will be served")
        p.add_argument("--dump-layout", metavar="TAPS", help="which state each dumped slot holds")
        p.add_argument("--lock", "--contract", dest="contract", type=Path, metavar="FILE",
                       help="instead of the three above: a lock file written by `parity lock` "
                            "(contracts/NAME.json); --contract is its older name")
        p.add_argument("--no-verify", action="store_true",
                       help="skip the second extraction that confirms each suggested fix")
        common.add_serve_args(p)
        p.add_argument("--json", action="store_true")
        common.add_trainer_args(p)
        p.add_argument("--build", action="store_true",
                       help="build the environment of a named release no environment has yet (its pins "
                            "read from the wheel's metadata; into PARITY_HOME, progress on stderr)")

    implied = "; ".join(f"{e.impl.FLAG} implies {e.name}" for e in engines.engines() if e.name != engines.DEFAULT)
    mx = sub.add_parser("matrix", help="the contract under every installed serving-engine (sglang, or "
                        "--engine vllm) and trainer release; exit 0 all parity, 1 otherwise, 2 bad input")
    inputs(mx)
    mx.add_argument("--engine", choices=engines.names(),
                    help=f"the serving engine (default {engines.DEFAULT}{'; ' + implied if implied else ''})")
    engines.add_options(mx, "matrix")
    trainers.add_options(mx, "matrix")
    mx.add_argument("--markdown", action="store_true", help="a Markdown table (for a pull-request comment)")
    mx.add_argument("--workers", type=int, help="extractions run at once (default: the CPU count)")
    mx.set_defaults(func=run_matrix)

    cd = sub.add_parser("can-i-deploy", help="yes/no for one serving release (--sglang or --vllm) and one "
                        "trainer release; exit 0 yes, 1 no, 2 bad input or cannot tell")
    inputs(cd)
    engines.add_options(cd.add_mutually_exclusive_group(required=True), "can-i-deploy")
    trainers.add_options(cd, "can-i-deploy")
    cd.set_defaults(func=run_can_i_deploy)


def _inputs(args) -> dict:
    if args.contract:
        if args.target_config or args.draft or args.dump_layout or args.trainer != trainers.DEFAULT:
            raise usage("give either --contract FILE (it names its trainer) or --target-config/--draft/"
                        "--dump-layout/--trainer, not both")
        return {"contract": args.contract}
    trainer = trainers.trainer(args.trainer)
    if trainer.captures_states:
        if args.dump_layout:
            raise usage(f"--trainer {trainer.name} captures the states itself: drop --dump-layout")
        if not (args.target_config and args.draft):
            raise usage(f"{args.command} needs --target-config and --draft (or --contract FILE)")
        return {"target_config": args.target_config, "draft": args.draft, "trainer": trainer,
                "trainer_ids": trainer.impl.ids_from(args)}
    common.refuse_other_trainers(args, trainer, ids_only=True)
    if not (args.target_config and args.draft and args.dump_layout):
        raise usage(f"{args.command} needs --target-config, --draft and --dump-layout (or --contract FILE)")
    return {"target_config": args.target_config, "draft": args.draft, "dump_layout": common.dump(args).layout,
            "trainer": trainer}


def _trainer(args) -> BoundTrainer:
    """The trainer the command is about (--trainer, or the lock's), unbound."""

    return trainers.trainer(read_lock(args.contract).trainer if args.contract else args.trainer)


def _trainer_releases(args, many: bool):
    """The trainer releases asked for, by the flag of the trainer (--trainer or a lock's)."""
    trainer = _trainer(args)
    for other in trainers.trainers():
        if other.name != trainer.name and not other.impl.OWN_FLAGS and other.impl.release_from(args):
            raise usage(f"--trainer {trainer.name}: name its releases with {trainer.impl.FLAG}, "
                        f"not {other.impl.FLAG}")
    value = trainer.impl.release_from(args)
    if not many:
        return value
    return [x.strip() for x in value.split(",") if x.strip()] if value else None


def _engine(args) -> tuple[BoundEngine, str | None]:
    """The serving engine a matrix or can-i-deploy is about (--engine, else the one whose release
    flag is given, else a lock's, else the default), and the releases named for it."""
    given = [e for e in engines.engines() if e.impl.release_from(args)]
    name = (getattr(args, "engine", None) or next((e.name for e in given if e.name != engines.DEFAULT), None)
            or (engines.DEFAULT if given else None) or _lock_engine(args) or engines.DEFAULT)
    chosen = engines.engine(name)
    other = next((e for e in given if e.name != name), None)
    if other is not None:
        raise usage(f"--engine {name}: name its releases with {chosen.impl.FLAG}, not {other.impl.FLAG}")
    return chosen, chosen.impl.release_from(args)


def _lock_engine(args) -> str | None:

    return read_lock(args.contract).engine if args.contract else None


def _build_releases(args, **wanted: list[str] | None) -> None:
    """--build: make each named release runnable first (parity.ondemand)."""
    if not args.build:
        return

    for family, versions in wanted.items():
        for version in versions or []:
            ensure_release(family, version)


def run_matrix(args) -> int:

    serve_args = parse_serve_args(args.serve_args)  # bad input before any extraction
    split = lambda v: [x.strip() for x in v.split(",") if x.strip()] if v else None  # noqa: E731
    trainer_releases = _trainer_releases(args, True)
    engine, serving = _engine(args)
    _build_releases(args, **{engine.name: split(serving)}, **{_trainer(args).name: trainer_releases})
    m = build_matrix(**_inputs(args), serving=split(serving), trainer_releases=trainer_releases,
                     workers=args.workers, verify=not args.no_verify, engine=engine, serve_args=serve_args)
    if args.json:
        print(json.dumps(m.to_json_dict(), indent=2))
    elif args.markdown:
        print(render_markdown(m))
    else:
        print(render_text(m))
    if _internal_errors(m):
        return ExitCode.INTERNAL
    if m.serve_args_refused:  # no release resolved them: bad input (or unsupported), not a verdict
        print(f"parity: no {m.engine} release resolved the serve arguments: {m.serving[-1].launch.text()}",
              file=sys.stderr)
        return ExitCode.BAD_INPUT
    return ExitCode.OK if m.ok else ExitCode.DRIFT


def run_can_i_deploy(args) -> int:

    serve_args = parse_serve_args(args.serve_args)  # bad input before any extraction
    inputs = _inputs(args)
    release = _trainer_releases(args, False)
    if release is None:
        default = trainers.trainer()
        others = ", ".join(f"{t.impl.FLAG} VERSION for a {t.impl.TITLE} draft"
                           for t in trainers.trainers() if t.name != default.name)
        raise usage(f"can-i-deploy needs the trainer's release: {default.impl.FLAG} VERSION ({others})")
    engine, serving = _engine(args)
    _build_releases(args, **{engine.name: [serving]}, **{_trainer(args).name: [release]})
    a = can_i_deploy(serving, release, **inputs, verify=not args.no_verify, engine=engine, serve_args=serve_args)
    if args.json:
        print(json.dumps(a.to_json_dict(), indent=2))
    if _internal_errors(a.matrix):
        return ExitCode.INTERNAL
    if a.deploy is None:  # cannot tell: an error, one line on stderr like every other one
        print(f"parity: cannot tell: {a.reason}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    if not args.json:
        print(a.reason)
    return ExitCode.OK if a.deploy else ExitCode.DRIFT


def _internal_errors(m) -> bool:
    """Each failure of parity's own code a cell met, one line on stderr: the command then ends in
    exit 3, after every other cell was answered."""
    for error in m.internal_errors:
        print(f"parity: internal error: {error}", file=sys.stderr)
    return bool(m.internal_errors)
