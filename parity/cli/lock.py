"""`parity lock`: write (or --update) a locked contract for a draft."""

from __future__ import annotations

from pathlib import Path

from ..errors import ExitCode
from ..extract import engines, trainers
from . import common
from .common import usage
from ..inputs import parse_serve_args
from ..lock import lock_destination, write_lock


def add_lock_parser(sub):
    lk = sub.add_parser("lock", help="write (or --update) a locked contract for a draft")
    lk.add_argument("out", type=Path, help="the lock file to write, e.g. contracts/my-draft.json")
    lk.add_argument("--target-config", required=True, type=Path)
    lk.add_argument("--draft", required=True, type=Path, help="the draft directory as it is served")
    common.add_trained(lk)
    lk.add_argument("--dump-layout", metavar="TAPS", help="which state each dumped slot holds "
                    "(speculators; --trainer specforge captures its own)")
    common.add_trainer_args(lk)
    lk.add_argument("--name", help="a name for the pair (default: the file name)")
    common.add_engine_arg(lk)
    engines.add_options(lk, "lock")
    trainers.add_options(lk, "lock")
    common.add_serve_args(lk)
    lk.add_argument("--update", action="store_true", help="overwrite an existing lock")
    return lk


def run_lock(args) -> int:

    lock_destination(args.out, args.target_config, args.draft)
    if args.out.exists() and not args.update:
        raise usage(f"{args.out} exists; pass --update to rewrite it")
    trainer = common.trainer_from(args)
    if trainer.captures_states:
        if args.dump_layout:
            raise usage(f"--trainer {trainer.name} captures the states itself: drop --dump-layout")
        layout, ids = None, trainer.impl.ids_from(args)
    else:
        if not args.dump_layout:
            raise usage(f"lock needs --dump-layout (or {common.capturing_trainers()})")
        common.refuse_other_trainers(args, trainer, ids_only=True)
        layout, ids = common.dump(args).layout, None
    serve_args = parse_serve_args(args.serve_args)
    lock = write_lock(args.out, args.name or args.out.stem, *common.given(args), layout,
                      trainer=trainer, trainer_ids=ids, serve_args=serve_args,
                      engine=common.engine_from(args), trained=args.trained)
    print(f"parity: locked {lock.name}: fc {[t.name for t in lock.training.fc_input]}, "
          f"target {lock.training.target.name} -> {args.out}")
    return ExitCode.OK
