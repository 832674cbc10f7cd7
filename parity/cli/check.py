"""`parity check`: compare training and serving; exit 0 parity, 1 drift, 2 error."""

from __future__ import annotations

import json
from pathlib import Path

from ..extract import engines, trainers
from . import common
from .common import usage
from ..gate import check
from ..inputs import check_fit, check_ids, parse_serve_args
from ..lock import check_lock, read_lock
from ..report import render_check


def add_check_parser(sub):
    ck = sub.add_parser("check", help="compare training and serving; exit 0 parity, 1 drift, 2 error")
    ck.add_argument("--target-config", type=Path, help="the target's config.json")
    ck.add_argument("--draft", type=Path, help="the draft directory as it will be served")
    common.add_trained(ck)
    common.add_dump_args(ck)
    ck.add_argument("--lock", "--contract", dest="contract", type=Path, metavar="FILE",
                    help="instead of the three above: a lock file written by `parity lock` "
                         "(contracts/NAME.json); --contract is its older name")
    common.add_engine_arg(ck, default=None)  # None: a lock's own engine, else the default
    engines.add_options(ck, "check")
    trainers.add_options(ck, "check")
    common.add_trainer_args(ck)
    ck.add_argument("--no-verify", action="store_true",
                    help="skip the second extraction that confirms the suggested fix")
    common.add_serve_args(ck)
    ck.add_argument("--json", action="store_true")
    return ck


def run_check(args) -> int:

    serve_args = parse_serve_args(args.serve_args)  # bad input before any extraction
    if args.contract:
        given = [f for f, v in (("--target-config", args.target_config), ("--draft", args.draft),
                                ("--dump-layout", args.dump_layout), ("--datagen-ids", args.datagen_ids))
                 if v]
        if given:
            raise usage(f"--contract FILE names the target, draft and dump itself; drop {', '.join(given)}"
                        " (or drop --contract)")
        lock = read_lock(args.contract)
        base = args.contract.parent
        args.target_config, args.draft = base / lock.target_config, base / lock.draft
        release = common.trainer_from(args, lock.trainer).release  # the lock's trainer
        result = check_lock(args.contract, common.engine_from(args, args.engine or lock.engine), release,
                            verify=not args.no_verify, serve_args=serve_args)
    else:
        if not (args.target_config and args.draft):
            raise usage("check needs --target-config and --draft (or --contract FILE)")
        trainer = common.trainer_from(args)
        common.refuse_other_trainers(args, trainer)
        if not (args.dump_layout or args.datagen_ids) and not trainer.captures_states:
            raise usage("check needs the dump description: --dump-layout h0,h3,... or --datagen-ids")
        target, draft = common.given(args)  # fails fast, before any extraction
        check_ids(target, draft)
        engine = common.engine_from(args)
        engine.preflight(target)
        engine.refuse_launch(target, draft, serve_args)  # a flag the engine refuses: before any model is built
        training = common.training(args, target, draft)
        check_fit(target, draft, training)
        result = check(training, target, draft, engine, verify=not args.no_verify, serve_args=serve_args)
    if args.json:
        print(json.dumps(result.to_json_dict(), indent=2))
    else:
        print(render_check(result, str(args.target_config), str(args.draft)))
    return result.verdict.exit_code
