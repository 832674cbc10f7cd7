"""`parity forward`: run the training and the serving path on the same tokens, print the table.

    parity forward --target-config T/config.json --draft D [--served S] [--dump-layout h2,h4,h5,h8]
    parity forward --fixture llama-8l [--drift no-d2t ...|--drift all] [--flags-on]
    parity forward ... --sglang 0.5.14      # the serving path under another installed release

Exit codes as `parity check`: 0 parity (every case), 1 drift (any case), 2 bad input or a
case that could not run.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from ..verdict import Verdict
from ..extract import engines
from ..extract.engines import engine, foreign_release
from ..extract.trainers import trainer
from ..forward.cases import DRIFTS, fixture_cases, fixture_target, given_case
from ..inputs import InputError, check_steps, parse_dump, read_config, target_layers, text_part


def add_forward_parser(sub, parser_class) -> argparse.ArgumentParser:

    fw = sub.add_parser("forward", help="prove numerically that training and serving give the same "
                                        "draft logits; exit 0 parity, 1 drift or unservable, 2 error")
    fw.add_argument("--target-config", type=Path, help="the target's config.json (shrunk to tiny widths, "
                                                       "same depth, seeded weights)")
    fw.add_argument("--draft", type=Path, help="the trained draft (speculators format, with weights, "
                                               "built for the tiny target: hidden 64, vocab 256)")
    fw.add_argument("--served", type=Path, help="the draft as served (SGLang format); default: "
                                                "parity's SGLang export of --draft, ids found on the engine")
    fw.add_argument("--dump-layout", metavar="TAPS", help="what the training dump's slots hold, e.g. "
                    "h2,h4,h5,h8 (default: the draft's ids read as speculators data-generation ids)")
    fw.add_argument("--fixture", metavar="NAME", help="instead of the above: a bundled target by name "
                    "(llama-3.1-8b, qwen3-8b, deepseek-v3-61l, or <arch>-<N>l such as llama-8l) with a "
                    "seeded speculators draft and its exported served form")
    fw.add_argument("--drift", action="append", choices=list(DRIFTS) + ["all"], default=[],
                    help="with --fixture: also run this injected drift (repeatable; 'all')")
    fw.add_argument("--flags-on", action="store_true",
                    help="with --fixture: also the matched pairs with the flags SGLang honours turned on")
    fw.add_argument("--rope", action="store_true",
                    help="with --fixture: also the matched pair of a draft with Llama-3.1's rope (llama3 scaling "
                         "from 8192, 2048 positions)")
    fw.add_argument("--short-positions", action="store_true",
                    help="run the draft's rows at positions 0..seq-len-1 only (default: the last rows placed "
                         "past each position the draft declares, docs/forward.md)")
    fw.add_argument("--engine", default=engines.DEFAULT, choices=engines.names(),
                    help=f"the serving engine whose draft forward is compared (default {engines.DEFAULT}; "
                         + "; ".join(f"{e.name}: the first step only, --steps 1" for e in engines.engines()
                                     if e.forward_refusal(2)) + ")")
    engines.add_options(fw, "forward")  # each engine's release flag
    fw.add_argument("--steps", type=int, default=3, help="TTT steps to compare (default 3)")
    fw.add_argument("--seq-len", type=int, default=16, help="target tokens (default 16)")
    fw.add_argument("--seed", type=int, default=0)
    fw.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    fw.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    fw.add_argument("--brief", action="store_true", help="summary table only")
    fw.add_argument("--json", action="store_true")
    return fw


def run_forward(args) -> int:
    from ..report.forward import render_forward, render_summary
    from ..forward.run import forward_parity


    check_steps(args.steps)
    if args.seq_len > 4096:
        raise InputError(f"--seq-len {args.seq_len}: at most 4096 tokens (the comparison runs every "
                         "stage on every token; a few dozen already cover the path)")
    if args.steps < 1 or args.seq_len < args.steps + 2:
        raise InputError(f"--steps {args.steps} / --seq-len {args.seq_len}: need steps >= 1 and "
                         "seq-len >= steps + 2")

    chosen = engine(args.engine)
    foreign = foreign_release(args, chosen, datagen=False)  # forward takes no dump description
    if foreign:
        raise InputError(foreign)
    refused = chosen.forward_refusal(args.steps)
    if refused:
        raise InputError(f"--engine {chosen.name} --steps {args.steps}: {refused}")
    serving, training = chosen.at(chosen.impl.release_from(args)), trainer()
    serving.python()  # a release without an environment fails here, first
    work = Path(tempfile.mkdtemp(prefix="parity-forward-cli-"))
    if args.fixture:
        if args.target_config or args.draft or args.served:
            raise InputError("--fixture replaces --target-config/--draft/--served")
        target = fixture_target(args.fixture)
        drifts = tuple(DRIFTS) if "all" in args.drift else tuple(dict.fromkeys(args.drift))
        cases = fixture_cases(target, drifts, flags_on=args.flags_on, rope=args.rope, work=work,
                              serving=serving)
        label = (f"fixture {args.fixture} ({target['architectures'][0]}, "
                 f"{text_part(target)['num_hidden_layers']} layers)")
    else:
        if not (args.target_config and args.draft):
            raise InputError("forward needs --target-config and --draft (or --fixture NAME)")
        if args.drift or args.flags_on or args.rope:
            raise InputError("--drift/--flags-on/--rope apply to --fixture only")
        target = read_config(args.target_config, "target config")
        n = target_layers(target, args.target_config)
        layout = parse_dump(args.dump_layout).layout_names
        cases = [given_case(args.draft, layout, args.served, n, work, serving=serving)]
        label = str(args.target_config)
    out = forward_parity(target, cases, steps=args.steps, seq_len=args.seq_len, seed=args.seed,
                         dtype=args.dtype, device=args.device, serving=serving,
                         long_positions=not args.short_positions)
    results = out["results"]
    overall = Verdict.worst(r.verdict for r in results)
    if args.json:
        treply, sreply = training.FORWARD_REPLY.read(out["training"]), serving.FORWARD_REPLY.read(out["serving"])
        print(json.dumps({"verdict": overall, "target": label, training.name: treply.release,
                          serving.name: sreply.release,
                          "results": [r.model_dump() for r in results], "wall_s": out["wall"],
                          "timings": {"training": treply.timings, "serving": sreply.timings}}, indent=2))
    else:
        if len(results) > 1 or args.brief:
            print(f"parity forward: {label}: {len(results)} case(s)\n")
            print(render_summary(results))
            print()
        if not args.brief:
            print("\n\n".join(render_forward(r, label) for r in results))
    return overall.exit_code
