"""`parity schema`, `parity conventions` and `parity setup`: what parity reads and writes, and its environments."""

from __future__ import annotations

import json

from ..errors import ExitCode
from ..build_env import main as build
from ..contract import contract_json_schema
from ..extract import engines, trainers
from ..extract.installed import set_up
from ..extract.numbering import conventions
from .common import UsageError


def add_info_parsers(sub) -> None:
    st = sub.add_parser("setup", help="build the environments envs.toml describes (release "
                        "environments go to $PARITY_HOME); all when none is named")
    st.add_argument("envs", nargs="*", metavar="ENV", help="e.g. sglang-0.5.14")
    st.add_argument("--installed", action="store_true",
                    help="instead: for each engine and trainer installed here, build parity's environment of its "
                         "release when its code cannot be imported here (what a CI job runs before "
                         "`pytest -m parity`, which builds none)")
    st.set_defaults(func=run_setup)
    sub.add_parser("schema", help="print the JSON Schema of contracts").set_defaults(func=run_schema)
    sub.add_parser("conventions", help="list the layer-id conventions parity translates").set_defaults(
        func=run_conventions)


def run_setup(args) -> int:
    if args.installed:
        if args.envs:
            raise UsageError("setup --installed builds what the installed releases need: name no environment")
        for side in [*engines.engines(), *trainers.trainers()]:
            print(f"parity: {set_up(side.impl)}", flush=True)
        return ExitCode.OK
    return build(args.envs)


def run_schema(args) -> int:
    print(json.dumps(contract_json_schema(), indent=2))
    return ExitCode.OK


def run_conventions(args) -> int:
    for c in conventions().values():
        print(f"{c.name:26s} {c.summary}\n{'':26s} source: {c.source}")
        if c.run_by:
            print(f"{'':26s} {c.label}: {c.run_by}")
    return ExitCode.OK
