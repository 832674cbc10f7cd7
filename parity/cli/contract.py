"""`parity contract training|serving`: one side's contract."""

from __future__ import annotations

from pathlib import Path

from ..errors import ExitCode
from ..extract import engines, trainers
from . import common
from .common import usage
from ..inputs import parse_serve_args
from ..report import render_contract
from ..verdict import launch_differences


def add_contract_parser(sub, parser_class):
    contract = sub.add_parser("contract", help="extract one side's contract")
    side = contract.add_subparsers(dest="side", parser_class=parser_class)
    tr = side.add_parser("training", help="the training contract, from the installed speculators")
    tr.add_argument("--target-config", required=True, type=Path)
    common.add_dump_args(tr)
    tr.add_argument("--draft", type=Path, help="the trained draft directory (speculators format)")
    common.add_trained(tr)
    trainers.add_options(tr, "contract")
    common.add_trainer_args(tr)
    tr.add_argument("--json", action="store_true")
    sv = side.add_parser("serving", help="the serving contract, from the installed SGLang")
    sv.add_argument("--target-config", required=True, type=Path)
    sv.add_argument("--draft", required=True, type=Path, help="the draft directory as it will be served")
    common.add_engine_arg(sv)
    engines.add_options(sv, "contract")
    common.add_serve_args(sv)
    sv.add_argument("--json", action="store_true")
    for side_parser in (tr, sv):
        side_parser.set_defaults(func=run_contract)
    contract.set_defaults(func=lambda args: _no_side())
    return contract


def _no_side() -> int:
    raise usage("contract needs a side: training or serving")


def run_contract(args) -> int:

    given = common.given(args)
    if args.side == "training":
        contract = common.training(args, *given)
    else:
        contract = common.engine_from(args).extract_serving(*given, serve_args=parse_serve_args(args.serve_args))
    if args.json:
        print(contract.to_json())
    else:
        print(render_contract(contract))
    # An error finding means the side will not be fed (or did not build) what the
    # config asks, and a launch field the engine overrides means it will not run what the
    # command asks: a job gating on this command must not pass.
    launch_drift = args.side == "serving" and bool(launch_differences(contract))
    return ExitCode.DRIFT if contract.has_errors or launch_drift else ExitCode.OK
