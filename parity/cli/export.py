"""`parity export`: a speculators draft as a draft the engine (--engine) loads, with the fix."""

from __future__ import annotations

from pathlib import Path

from ..errors import ExitCode
from ..extract import engines
from . import common
from .common import usage
from ..export import check_output, export_draft


def add_export_parser(sub):
    ex = sub.add_parser("export", help="write a speculators draft as a draft the engine (--engine) loads, "
                        "with the fix")
    ex.add_argument("draft", type=Path, help="the speculators-format draft directory")
    ex.add_argument("out", type=Path, help="the directory to write")
    common.add_engine_arg(ex)
    engines.add_options(ex, "export")
    ex.add_argument("--target-config", required=True, type=Path)
    common.add_dump_args(ex)
    ex.add_argument("--force", action="store_true", help="write into an existing directory")
    return ex


def run_export(args) -> int:

    if not (args.dump_layout or args.datagen_ids):
        raise usage("export needs the dump description: --dump-layout h0,h3,... or --datagen-ids")
    check_output(args.out, args.draft, args.target_config, args.force)  # before any extraction
    target, draft = common.given(args)
    engine = common.engine_from(args)
    engine.preflight(target)
    training = common.training(args, target, draft)
    print(export_draft(draft, args.out, training, target, force=args.force, engine=engine))
    return ExitCode.OK
