"""The `parity` command line.

Exit codes: 0 parity (or success), 1 drift, 2 bad input or an unsupported case,
3 an internal error in parity itself (a bug: please report it).
Every error is one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..errors import ExitCode, UserError, forget_interrupt

if TYPE_CHECKING:
    from ..contract import TrainingContract
    from ..inputs import Draft, Target


def _installed(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def version_text() -> str:
    deps = ", ".join(f"{p} {_installed(p)}" for p in ("sglang", "speculators", "torch", "transformers"))
    return f"parity {__version__} ({deps})"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors are bad input: one line, exit 2
        self.exit(ExitCode.BAD_INPUT, f"parity: {message} (see parity {self.prog.split()[-1]} --help)\n"
                  if " " in self.prog else f"parity: {message} (see parity --help)\n")


def _add_dump_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dump-layout", metavar="TAPS",
                   help="which state each dumped slot holds, e.g. h0,h3,h31,h59 (a manifest)")
    p.add_argument("--datagen-ids", metavar="IDS",
                   help="instead of --dump-layout: the data-generation layer ids, e.g. 2,16,29, or "
                        "`default` (the launch script's); the dump is found by running vLLM's capture")
    p.add_argument("--datagen-convention", default=None,
                   help="read --datagen-ids by this typed rule instead of running vLLM (labelled "
                        "'typed rule, not run'), e.g. speculators-datagen; see `parity conventions`")
    p.add_argument("--vllm", metavar="VERSION",
                   help="the vLLM release that makes the dump from --datagen-ids (default: the newest installed)")


def _add_trainer_args(p: argparse.ArgumentParser) -> None:
    from ..extract.trainers import DEFAULT, names

    p.add_argument("--trainer", default=DEFAULT, choices=names(),
                   help=f"the training stack the draft was trained with (default: {DEFAULT})")
    p.add_argument("--specforge-ids", metavar="IDS",
                   help="--trainer specforge: the run's model.aux_hidden_state_layer_ids override, "
                        "e.g. 1,15,28 (default: the draft's eagle_config, else SpecForge's own)")
    p.add_argument("--specforge", metavar="VERSION", help="--trainer specforge: another installed release")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="parity", description="EAGLE-3 train/serve parity checks.")
    p.add_argument("--version", action="store_true", help="print versions and exit")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    contract = sub.add_parser("contract", help="extract one side's contract")
    side = contract.add_subparsers(dest="side", parser_class=_Parser)
    tr = side.add_parser("training", help="the training contract, from the installed speculators")
    tr.add_argument("--target-config", required=True, type=Path)
    _add_dump_args(tr)
    tr.add_argument("--draft", type=Path, help="the trained draft directory (speculators format)")
    tr.add_argument("--speculators", metavar="VERSION",
                    help="run another installed release (an environment in envs.toml)")
    _add_trainer_args(tr)
    tr.add_argument("--json", action="store_true")
    sv = side.add_parser("serving", help="the serving contract, from the installed SGLang")
    sv.add_argument("--target-config", required=True, type=Path)
    sv.add_argument("--draft", required=True, type=Path, help="the draft directory as it will be served")
    sv.add_argument("--engine", default="sglang", choices=_engines(), help="the serving engine (default sglang)")
    sv.add_argument("--sglang", metavar="VERSION", help="run another installed release")
    sv.add_argument("--vllm", metavar="VERSION", help="with --engine vllm: the release (default: the newest installed)")
    _add_serve_args(sv)
    sv.add_argument("--json", action="store_true")
    for side_parser in (tr, sv):
        side_parser.set_defaults(func=_contract)
    contract.set_defaults(func=lambda args: _no_side())

    ck = sub.add_parser("check", help="compare training and serving; exit 0 parity, 1 drift, 2 error")
    ck.add_argument("--target-config", type=Path, help="the target's config.json")
    ck.add_argument("--draft", type=Path, help="the draft directory as it will be served")
    _add_trained(ck)
    _add_dump_args(ck)
    ck.add_argument("--lock", "--contract", dest="contract", type=Path, metavar="FILE",
                    help="instead of the three above: a lock file written by `parity lock` "
                         "(contracts/NAME.json); --contract is its older name")
    ck.add_argument("--engine", default="sglang", choices=_engines(), help="the serving engine (default sglang)")
    ck.add_argument("--sglang", metavar="VERSION", help="check under another installed release")
    ck.add_argument("--speculators", metavar="VERSION", help="training under another installed release")
    _add_trainer_args(ck)
    ck.add_argument("--no-verify", action="store_true",
                    help="skip the second extraction that confirms the suggested fix")
    _add_serve_args(ck)
    ck.add_argument("--json", action="store_true")
    ck.set_defaults(func=_check)

    lk = sub.add_parser("lock", help="write (or --update) a locked contract for a draft")
    lk.add_argument("out", type=Path, help="the lock file to write, e.g. contracts/my-draft.json")
    lk.add_argument("--target-config", required=True, type=Path)
    lk.add_argument("--draft", required=True, type=Path, help="the draft directory as it is served")
    _add_trained(lk)
    lk.add_argument("--dump-layout", metavar="TAPS", help="which state each dumped slot holds "
                    "(speculators; --trainer specforge captures its own)")
    _add_trainer_args(lk)
    lk.add_argument("--name", help="a name for the pair (default: the file name)")
    _add_serve_args(lk)
    lk.add_argument("--update", action="store_true", help="overwrite an existing lock")
    lk.set_defaults(func=_lock)

    ex = sub.add_parser("export", help="write a speculators draft as a draft the engine (--engine) loads, "
                        "with the fix")
    ex.add_argument("draft", type=Path, help="the speculators-format draft directory")
    ex.add_argument("out", type=Path, help="the directory to write")
    ex.add_argument("--engine", default="sglang", choices=_engines(), help="the serving engine (default sglang)")
    ex.add_argument("--sglang", metavar="VERSION", help="export for another installed SGLang release")
    ex.add_argument("--target-config", required=True, type=Path)
    _add_dump_args(ex)
    ex.add_argument("--force", action="store_true", help="write into an existing directory")
    ex.set_defaults(func=_export)

    _add_matrix_parsers(sub)

    from .forward import add_forward_parser, run_forward
    add_forward_parser(sub, _Parser).set_defaults(func=run_forward)
    from .replay import add_replay_parser, run_replay
    add_replay_parser(sub, _add_dump_args).set_defaults(func=run_replay)
    from .sweep import add_sweep_parser, run_sweep
    add_sweep_parser(sub).set_defaults(func=run_sweep)

    eg = sub.add_parser("example", help="run `parity check` on the bundled drift case (the Kimi-K2.5 draft); "
                        "exit 1: it drifts")
    eg.add_argument("--no-verify", action="store_true",
                    help="skip the second extraction that confirms the suggested fix")
    eg.add_argument("--json", action="store_true")
    eg.set_defaults(func=_example)
    st = sub.add_parser("setup", help="build the environments envs.toml describes (release "
                        "environments go to $PARITY_HOME); all when none is named")
    st.add_argument("envs", nargs="*", metavar="ENV", help="e.g. sglang-0.5.14")
    st.set_defaults(func=_setup)

    sub.add_parser("schema", help="print the JSON Schema of contracts").set_defaults(func=_schema)
    sub.add_parser("conventions", help="list the layer-id conventions parity translates").set_defaults(
        func=_conventions)
    return p


def _add_matrix_parsers(sub) -> None:
    def inputs(p):
        p.add_argument("--target-config", type=Path, help="the target's config.json")
        p.add_argument("--draft", type=Path, help="the draft directory as it will be served")
        p.add_argument("--dump-layout", metavar="TAPS", help="which state each dumped slot holds")
        p.add_argument("--lock", "--contract", dest="contract", type=Path, metavar="FILE",
                       help="instead of the three above: a lock file written by `parity lock` "
                            "(contracts/NAME.json); --contract is its older name")
        p.add_argument("--no-verify", action="store_true",
                       help="skip the second extraction that confirms each suggested fix")
        p.add_argument("--json", action="store_true")
        _add_trainer_args(p)
        p.add_argument("--build", action="store_true",
                       help="build the environment of a named release no environment has yet (its pins "
                            "read from the wheel's metadata; into PARITY_HOME, progress on stderr)")

    mx = sub.add_parser("matrix", help="the contract under every installed serving-engine (sglang, or "
                        "--engine vllm) and trainer release; exit 0 all parity, 1 otherwise, 2 bad input")
    inputs(mx)
    mx.add_argument("--engine", choices=_engines(), help="the serving engine (default sglang; --vllm implies vllm)")
    mx.add_argument("--sglang", metavar="V,V", help="only these sglang releases (default: all in envs.toml)")
    mx.add_argument("--vllm", metavar="V,V", help="only these vLLM releases (serving by vLLM)")
    mx.add_argument("--speculators", metavar="V,V", help="only these speculators releases (--trainer "
                    "specforge: --specforge V,V)")
    mx.add_argument("--markdown", action="store_true", help="a Markdown table (for a pull-request comment)")
    mx.add_argument("--workers", type=int, help="extractions run at once (default: the CPU count)")
    mx.set_defaults(func=_matrix)

    cd = sub.add_parser("can-i-deploy", help="yes/no for one serving release (--sglang or --vllm) and one "
                        "trainer release; exit 0 yes, 1 no, 2 bad input or cannot tell")
    inputs(cd)
    served = cd.add_mutually_exclusive_group(required=True)
    served.add_argument("--sglang", metavar="VERSION", help="served by this SGLang release")
    served.add_argument("--vllm", metavar="VERSION", help="served by this vLLM release")
    cd.add_argument("--speculators", metavar="VERSION",
                    help="the speculators release (required unless --trainer specforge, which takes --specforge)")
    cd.set_defaults(func=_can_i_deploy)


def _matrix_inputs(args) -> dict:
    if args.contract:
        if args.target_config or args.draft or args.dump_layout or args.trainer != "speculators":
            raise _usage("give either --contract FILE (it names its trainer) or --target-config/--draft/"
                         "--dump-layout/--trainer, not both")
        return {"contract": args.contract}
    if args.trainer == "specforge":
        from ..inputs import parse_ids

        if args.dump_layout:
            raise _usage("--trainer specforge captures the states itself: drop --dump-layout")
        if not (args.target_config and args.draft):
            raise _usage(f"{args.command} needs --target-config and --draft (or --contract FILE)")
        return {"target_config": args.target_config, "draft": args.draft, "trainer": "specforge",
                "trainer_ids": parse_ids(args.specforge_ids, "--specforge-ids")}
    if args.specforge_ids:
        raise _usage("--specforge-ids needs --trainer specforge")
    if not (args.target_config and args.draft and args.dump_layout):
        raise _usage(f"{args.command} needs --target-config, --draft and --dump-layout (or --contract FILE)")
    return {"target_config": args.target_config, "draft": args.draft, "dump_layout": _dump(args).layout}


def _trainer_name(args) -> str:
    """The trainer the command is about: --trainer, or the lock's."""
    from ..lock import read_lock

    return read_lock(args.contract).trainer if args.contract else args.trainer


def _trainer_releases(args, many: bool):
    """The trainer releases asked for: --speculators, or --specforge for SpecForge (--trainer or a lock's)."""
    trainer = _trainer_name(args)
    value = args.specforge if trainer == "specforge" else args.speculators
    if trainer == "specforge" and args.speculators:
        raise _usage("--trainer specforge: name its releases with --specforge, not --speculators")
    if not many:
        return value
    return [x.strip() for x in value.split(",") if x.strip()] if value else None


def _matrix(args) -> int:
    from ..matrix import build_matrix
    from ..report.matrix import render_markdown, render_text

    split = lambda v: [x.strip() for x in v.split(",") if x.strip()] if v else None  # noqa: E731
    trainer_releases = _trainer_releases(args, True)
    engine_name, serving = _matrix_engine(args)
    _build_releases(args, **{engine_name: split(serving)}, **{_trainer_name(args): trainer_releases})
    m = build_matrix(**_matrix_inputs(args), serving=split(serving), speculators=trainer_releases,
                     workers=args.workers, verify=not args.no_verify, engine=engine_name)
    if args.json:
        print(json.dumps(m.to_json_dict(), indent=2))
    elif args.markdown:
        print(render_markdown(m))
    else:
        print(render_text(m))
    return ExitCode.OK if m.ok else ExitCode.DRIFT


def _matrix_engine(args) -> tuple[str, str | None]:
    """The serving engine a matrix or can-i-deploy is about, and the releases named for it."""
    engine_name = args.engine or ("vllm" if args.vllm else "sglang")
    other = {"sglang": args.vllm, "vllm": args.sglang}.get(engine_name)
    if other:
        raise _usage(f"--engine {engine_name}: name its releases with --{engine_name}, not "
                     f"--{'vllm' if engine_name == 'sglang' else 'sglang'}")
    return engine_name, getattr(args, engine_name.replace("-", "_"), None)


def _build_releases(args, **wanted: list[str] | None) -> None:
    """--build: make each named release runnable first (parity.ondemand)."""
    if not args.build:
        return
    from ..ondemand import ensure_release

    for family, versions in wanted.items():
        for version in versions or []:
            ensure_release(family, version)


def _can_i_deploy(args) -> int:
    from ..matrix import can_i_deploy

    inputs = _matrix_inputs(args)
    release = _trainer_releases(args, False)
    if release is None:
        raise _usage("can-i-deploy needs the trainer's release: --speculators VERSION "
                     "(--specforge VERSION for a SpecForge draft)")
    args.engine = "vllm" if args.vllm else "sglang"
    engine_name, serving = _matrix_engine(args)
    _build_releases(args, **{engine_name: [serving]}, **{_trainer_name(args): [release]})
    a = can_i_deploy(serving, release, **inputs, verify=not args.no_verify, engine=engine_name)
    if args.json:
        print(json.dumps(a.to_json_dict(), indent=2))
    if a.deploy is None:  # cannot tell: an error, one line on stderr like every other one
        print(f"parity: cannot tell: {a.reason}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    if not args.json:
        print(a.reason)
    return ExitCode.OK if a.deploy else ExitCode.DRIFT


def _dump(args):
    """The dump description the command was given (--dump-layout, or --datagen-ids with its
    convention), parsed once."""
    from ..inputs import parse_dump

    return parse_dump(getattr(args, "dump_layout", None), getattr(args, "datagen_ids", None),
                      getattr(args, "datagen_convention", None))


def _given(args) -> "tuple[Target, Draft | None]":
    """The target and (when the command names one) the draft, each read and checked once: every
    step below gets these objects, never the paths."""
    from ..inputs import Draft, Target

    return Target.read(args.target_config), (Draft.read(args.draft) if getattr(args, "draft", None) else None)


def _training(args, target: "Target", draft: "Draft | None") -> "TrainingContract":
    from ..extract.trainers import trainer
    from ..inputs import Draft

    name = getattr(args, "trainer", "speculators")
    trained = getattr(args, "trained", None) is not None
    if trained:  # the training side is the checkpoint as the trainer wrote it
        draft = Draft.read(args.trained)
    if name == "specforge":
        if args.dump_layout or args.datagen_ids:
            raise _usage("--trainer specforge captures the states itself: drop --dump-layout/--datagen-ids "
                         "(--specforge-ids gives the run's ids)")
        from ..inputs import parse_ids
        return trainer(name).training_contract(
            target, None, datagen_ids=parse_ids(args.specforge_ids, "--specforge-ids"),
            draft=draft, release=args.specforge, trained=trained)
    if getattr(args, "specforge_ids", None) or getattr(args, "specforge", None):
        raise _usage("--specforge-ids/--specforge need --trainer specforge")
    dump = _dump(args)
    run = {}
    if dump.runs_datagen:  # the dump speculators' data generation makes, found by running vLLM
        from ..extract.engines.vllm import extract_dump
        run["datagen_dump"] = extract_dump(target, dump.datagen_ids, getattr(args, "vllm", None))
    return trainer(name).training_contract(target, dump.layout, datagen_ids=dump.datagen_ids,
                                           datagen_convention=dump.convention, draft=draft,
                                           release=getattr(args, "speculators", None), trained=trained, **run)


def _add_trained(p) -> None:
    p.add_argument("--trained", type=Path, metavar="DIR",
                   help="the draft as the trainer wrote it (its checkpoint directory): the training side is "
                        "built from it; without it, from --draft as the trainer would load it (docs/built-draft.md)")


def _add_serve_args(p) -> None:
    p.add_argument("--serve-args", metavar="'ARGS' | @FILE",
                   help="the serve command's arguments, as given after `python -m sglang.launch_server`: resolved "
                        "by the engine's own parser and resolution; a value it changes is a drift (docs/launch.md)")


def _engines() -> list[str]:
    from ..extract.engines import names

    return names()


def _engine_version(args) -> str | None:
    """The serving release the command names: the flag called after its engine (--sglang, --vllm).
    An SGLang release named for another engine is refused, never silently ignored."""
    name = getattr(args, "engine", "sglang")
    if name != "sglang" and getattr(args, "sglang", None):
        raise _usage(f"--sglang names an SGLang release, but the engine is {name}: use --{name} VERSION")
    return getattr(args, name, None)


def _serving(args, target: "Target", draft: "Draft"):
    from ..extract.engines import engine

    from ..inputs import parse_serve_args

    return engine(args.engine).extract_serving(target, draft, _engine_version(args),
                                               serve_args=parse_serve_args(args.serve_args))


def _check(args) -> int:
    from ..gate import check
    from ..inputs import check_fit, check_ids, parse_serve_args
    from ..report import render_check

    serve_args = parse_serve_args(args.serve_args)  # bad input before any extraction
    if args.contract:
        from ..lock import check_lock, read_lock
        given = [f for f, v in (("--target-config", args.target_config), ("--draft", args.draft),
                                ("--dump-layout", args.dump_layout), ("--datagen-ids", args.datagen_ids))
                 if v]
        if given:
            raise _usage(f"--contract FILE names the target, draft and dump itself; drop {', '.join(given)}"
                         " (or drop --contract)")
        lock = read_lock(args.contract)
        base = args.contract.parent
        args.target_config, args.draft = base / lock.target_config, base / lock.draft
        release = args.specforge if lock.trainer == "specforge" else args.speculators  # the lock's trainer
        result = check_lock(args.contract, sglang_version=_engine_version(args),
                            speculators_version=release, verify=not args.no_verify,
                            engine_name=args.engine, serve_args=serve_args)
    else:
        if not (args.target_config and args.draft):
            raise _usage("check needs --target-config and --draft (or --contract FILE)")
        if args.trainer != "specforge" and (args.specforge_ids or args.specforge):
            raise _usage("--specforge-ids/--specforge need --trainer specforge")
        if not (args.dump_layout or args.datagen_ids) and args.trainer != "specforge":
            raise _usage("check needs the dump description: --dump-layout h0,h3,... or --datagen-ids")
        target, draft = _given(args)  # fails fast, before any extraction
        check_ids(target, draft)
        from ..extract.engines import engine
        engine(args.engine).preflight(target, _engine_version(args))
        training = _training(args, target, draft)
        check_fit(target, draft, training)
        result = check(training, target, draft, sglang_version=_engine_version(args),
                       verify=not args.no_verify, engine_name=args.engine, serve_args=serve_args)
    if args.json:
        print(json.dumps(result.to_json_dict(), indent=2))
    else:
        print(render_check(result, str(args.target_config), str(args.draft)))
    return ExitCode.OK if result.verdict == "parity" else ExitCode.DRIFT


def _lock(args) -> int:
    from ..lock import lock_destination, write_lock

    lock_destination(args.out, args.target_config, args.draft)
    if args.out.exists() and not args.update:
        raise _usage(f"{args.out} exists; pass --update to rewrite it")
    from ..inputs import parse_ids

    if args.trainer == "specforge":
        if args.dump_layout:
            raise _usage("--trainer specforge captures the states itself: drop --dump-layout")
        layout, ids = None, parse_ids(args.specforge_ids, "--specforge-ids")
    else:
        if not args.dump_layout:
            raise _usage("lock needs --dump-layout (or --trainer specforge)")
        if args.specforge_ids:
            raise _usage("--specforge-ids needs --trainer specforge")
        layout, ids = _dump(args).layout, None
    from ..inputs import parse_serve_args

    serve_args = parse_serve_args(args.serve_args)
    from ..inputs import Draft

    trained = Draft.read(args.trained) if args.trained is not None else None
    lock = write_lock(args.out, args.name or args.out.stem, *_given(args), layout,
                      trainer_name=args.trainer, trainer_ids=ids,
                      release=args.specforge if args.trainer == "specforge" else None, serve_args=serve_args,
                      trained=trained)
    print(f"parity: locked {lock.name}: fc {[t.name for t in lock.training.fc_input]}, "
          f"target {lock.training.target.name} -> {args.out}")
    return ExitCode.OK


def _export(args) -> int:
    from ..export import check_output, export_draft

    if not (args.dump_layout or args.datagen_ids):
        raise _usage("export needs the dump description: --dump-layout h0,h3,... or --datagen-ids")
    check_output(args.out, args.draft, args.target_config, args.force)  # before any extraction
    target, draft = _given(args)
    from ..extract.engines import engine
    engine(args.engine).preflight(target, _engine_version(args))
    training = _training(args, target, draft)
    report = export_draft(draft, args.out, training, target, force=args.force,
                          engine_name=args.engine, version=_engine_version(args))
    print(report)
    return ExitCode.OK


def _no_side() -> int:
    raise _usage("contract needs a side: training or serving")


def _contract(args) -> int:
    given = _given(args)
    contract = _training(args, *given) if args.side == "training" else _serving(args, *given)
    if args.json:
        print(contract.to_json())
    else:
        from ..report import render_contract
        print(render_contract(contract))
    # An error finding means the side will not be fed (or did not build) what the
    # config asks, and a launch field the engine overrides means it will not run what the
    # command asks: a job gating on this command must not pass.
    from ..verdict import launch_differences

    launch_drift = args.side == "serving" and bool(launch_differences(contract))
    return ExitCode.DRIFT if contract.has_errors or launch_drift else ExitCode.OK


def _schema(args) -> int:
    from ..contract import contract_json_schema
    print(json.dumps(contract_json_schema(), indent=2))
    return ExitCode.OK


def _conventions(args) -> int:
    from ..conventions import CONVENTIONS
    for c in CONVENTIONS.values():
        print(f"{c.name:26s} {c.summary}\n{'':26s} source: {c.source}")
        if c.run_by:
            print(f"{'':26s} {c.label}: {c.run_by}")
    return ExitCode.OK


# The bundled example: the case this project was born from (README, "The bundled example").
EXAMPLE_TARGET = ("fixtures", "targets", "kimi-k2.5", "config.json")
EXAMPLE_DRAFT = ("fixtures", "drafts", "kimi-k2.5-eagle3")
EXAMPLE_DUMP = "h0,h3,h31,h59"


def _example(args) -> int:
    """`parity check` on the bundled example, wherever parity is installed; its paths are shown
    relative to the working directory when they are inside it (`./dev example` in a checkout)."""
    from ..home import shipped

    def shown(path: Path) -> str:
        rel = os.path.relpath(path)
        return str(path) if rel.startswith(os.pardir) else rel

    argv = ["check", "--target-config", shown(shipped(*EXAMPLE_TARGET)),
            "--draft", shown(shipped(*EXAMPLE_DRAFT)), "--dump-layout", EXAMPLE_DUMP]
    argv += ["--no-verify"] * args.no_verify + ["--json"] * args.json
    return _check(build_parser().parse_args(argv))


def _setup(args) -> int:
    from ..build_env import main as build

    return build(args.envs)


def run(args) -> int:
    """Run the parsed command (each subcommand's parser set its `func`)."""
    return args.func(args)


class _UsageError(Exception):
    pass


def _usage(msg: str) -> _UsageError:
    return _UsageError(msg)


class _Terminated(BaseException):
    """SIGTERM, raised where the command is, so every `finally` (the workspace's) runs."""


def _on_sigterm(signum, frame):
    raise _Terminated()


def main(argv: list[str] | None = None) -> int:
    """The whole command: every exit path, Ctrl-C and SIGTERM included, ends in an exit code,
    never a traceback, and runs the cleanup of what the command made."""
    import signal
    import threading

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("parity: interrupted", file=sys.stderr)
        forget_interrupt()
        return ExitCode.INTERRUPTED
    except _Terminated:
        print("parity: terminated", file=sys.stderr)
        return ExitCode.TERMINATED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        print(version_text())
        return ExitCode.OK
    if not args.command:
        parser.print_help()
        return ExitCode.BAD_INPUT
    try:
        from ..workspace import workspace

        with workspace():  # one temp dir for the command and its probes, removed on every exit
            return run(args)
    except _UsageError as exc:
        print(f"parity: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - sorted below: bad input (2) or a bug (3)
        if isinstance(exc, UserError):
            lines = str(exc).strip().splitlines() or [type(exc).__name__]
            if getattr(args, "json", False):
                print(json.dumps({"verdict": "error", "error": lines[0]}))
            print(f"parity: {lines[0]}", file=sys.stderr)
            if len(lines) > 1 and os.environ.get("PARITY_DEBUG"):
                print("\n".join(lines[1:]), file=sys.stderr)
            return ExitCode.BAD_INPUT
        if os.environ.get("PARITY_DEBUG"):
            raise
        first = (str(exc).strip().splitlines() or [""])[0]
        print(f"parity: internal error: {type(exc).__name__}: {first} (PARITY_DEBUG=1 shows the "
              "traceback; please report it)", file=sys.stderr)
        return ExitCode.INTERNAL
