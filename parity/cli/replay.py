"""`parity replay`: which wiring was this draft trained on, and what does serving cost in accuracy.

    parity replay --draft D --data DUMPS [--verifier TARGET] [--dump-layout h0,h3,h31,h59]
                  [--served S | --no-serving] [--wiring h0,h3,h31 ...] [--json]

Exit codes: 0 parity (the served wiring is the trained one, and the weights agree with the
training contract), 1 drift or suspect, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..extract import engines, trainers
from ..contract import parse_taps
from ..inputs import InputError, parse_dump
from ..replay.run import replay
from ..report.replay import render_replay


def add_replay_parser(sub, add_dump_args) -> argparse.ArgumentParser:
    """`add_dump_args`: the CLI's shared --dump-layout/--datagen-ids/--datagen-convention."""
    rp = sub.add_parser("replay", help="score a trained draft on its dumps under the training, the served "
                                       "and every candidate wiring; exit 0 parity, 1 drift, 2 error")
    rp.add_argument("--draft", type=Path, required=True, help="the trained draft (speculators format, "
                                                             "config.json + model.safetensors)")
    rp.add_argument("--data", type=Path, required=True, help="the hidden-state dumps in speculators' format "
                    "(arrow dataset + hidden_states/hs_{i}.safetensors)")
    rp.add_argument("--verifier", type=Path, help="the target checkpoint (default: the draft config's "
                                                 "verifier path, if it is a local directory)")
    rp.add_argument("--target-config", type=Path, help="the target's config.json for the contracts "
                                                       "(default: the verifier's)")
    add_dump_args(rp)
    rp.add_argument("--served", type=Path, help="the draft as served (SGLang format); default: the draft's "
                                                "own ids written into SGLang's config, i.e. served as written")
    rp.add_argument("--no-serving", action="store_true", help="skip the serving contract")
    engines.add_options(rp, "replay")
    trainers.add_options(rp, "replay")
    rp.add_argument("--wiring", action="append", default=[], metavar="TAPS",
                    help="also score this wiring, e.g. h3,h31,h59 (repeatable)")
    rp.add_argument("--no-search", action="store_true", help="score only the named wirings")
    rp.add_argument("--steps", type=int, default=3, help="draft steps to score (default 3)")
    rp.add_argument("--samples", type=int, help="replay only the first N samples")
    rp.add_argument("--all", action="store_true", help="print every scored wiring")
    rp.add_argument("--json", action="store_true")
    return rp


def run_replay(args) -> int:

    dump = parse_dump(args.dump_layout, args.datagen_ids, args.datagen_convention)
    try:
        wirings = [parse_taps(w) for w in args.wiring]
    except ValueError as exc:
        raise InputError(f"--wiring: {exc}") from None
    serving = engines.engine(engines.DEFAULT)  # replay serves with the default engine
    release = serving.impl.release_from(args)
    if args.no_serving and (args.served or release):
        raise InputError(f"--no-serving contradicts --served/{serving.impl.FLAG}")
    result = replay(args.draft, args.data, verifier=args.verifier, target_config=args.target_config,
                    dump_layout=dump.layout, datagen_ids=dump.datagen_ids,
                    datagen_convention=dump.convention,
                    serving=not args.no_serving, served=args.served, engine=serving.at(release),
                    speculators_version=trainers.trainer().impl.release_from(args), wirings=wirings,
                    search=not args.no_search,
                    steps=args.steps, samples=args.samples)
    if args.json:
        print(json.dumps(result.to_json_dict(), indent=2))
    else:
        print(render_replay(result, top=len(result.scores) if args.all else 8))
    return result.verdict.exit_code
