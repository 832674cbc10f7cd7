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

from . import __version__

EXIT_OK, EXIT_DRIFT, EXIT_ERROR, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C


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
        self.exit(EXIT_ERROR, f"parity: {message} (see parity {self.prog.split()[-1]} --help)\n"
                  if " " in self.prog else f"parity: {message} (see parity --help)\n")


def _add_dump_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dump-layout", metavar="TAPS",
                   help="which state each dumped slot holds, e.g. h0,h3,h31,h59 (a manifest)")
    p.add_argument("--datagen-ids", metavar="IDS",
                   help="instead of --dump-layout: the data-generation layer ids, e.g. 2,16,29")
    p.add_argument("--datagen-convention", default="speculators-datagen",
                   help="the convention of --datagen-ids (default: speculators-datagen, "
                        "which appends the last layer); see `parity conventions`")


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
    tr.add_argument("--json", action="store_true")
    sv = side.add_parser("serving", help="the serving contract, from the installed SGLang")
    sv.add_argument("--target-config", required=True, type=Path)
    sv.add_argument("--draft", required=True, type=Path, help="the draft directory as it will be served")
    sv.add_argument("--sglang", metavar="VERSION", help="run another installed release")
    sv.add_argument("--json", action="store_true")

    ck = sub.add_parser("check", help="compare training and serving; exit 0 parity, 1 drift, 2 error")
    ck.add_argument("--target-config", type=Path, help="the target's config.json")
    ck.add_argument("--draft", type=Path, help="the draft directory as it will be served")
    _add_dump_args(ck)
    ck.add_argument("--contract", type=Path, metavar="FILE",
                    help="instead of the three above: a locked contract (contracts/NAME.json)")
    ck.add_argument("--engine", default="sglang", choices=["sglang"])
    ck.add_argument("--sglang", metavar="VERSION", help="check under another installed release")
    ck.add_argument("--speculators", metavar="VERSION", help="training under another installed release")
    ck.add_argument("--no-verify", action="store_true",
                    help="skip the second extraction that confirms the suggested fix")
    ck.add_argument("--json", action="store_true")

    lk = sub.add_parser("lock", help="write (or --update) a locked contract for a draft")
    lk.add_argument("out", type=Path, help="the lock file to write, e.g. contracts/my-draft.json")
    lk.add_argument("--target-config", required=True, type=Path)
    lk.add_argument("--draft", required=True, type=Path, help="the draft directory as it is served")
    lk.add_argument("--dump-layout", required=True, metavar="TAPS")
    lk.add_argument("--name", help="a name for the pair (default: the file name)")
    lk.add_argument("--update", action="store_true", help="overwrite an existing lock")

    ex = sub.add_parser("export", help="write a speculators draft as an SGLang-loadable draft with the fix")
    ex.add_argument("draft", type=Path, help="the speculators-format draft directory")
    ex.add_argument("out", type=Path, help="the directory to write")
    ex.add_argument("--engine", default="sglang", choices=["sglang"])
    ex.add_argument("--target-config", required=True, type=Path)
    _add_dump_args(ex)
    ex.add_argument("--force", action="store_true", help="write into an existing directory")

    _add_matrix_parsers(sub)

    from .forward.cli import add_forward_parser
    add_forward_parser(sub, _Parser)
    from .replay.cli import add_replay_parser
    add_replay_parser(sub, _add_dump_args)

    eg = sub.add_parser("example", help="run `parity check` on the bundled drift case (the Kimi-K2.5 draft); "
                        "exit 1: it drifts")
    eg.add_argument("--no-verify", action="store_true",
                    help="skip the second extraction that confirms the suggested fix")
    eg.add_argument("--json", action="store_true")
    st = sub.add_parser("setup", help="build the environments envs.toml describes (release "
                        "environments go to $PARITY_HOME); all when none is named")
    st.add_argument("envs", nargs="*", metavar="ENV", help="e.g. sglang-0.5.14")

    sub.add_parser("schema", help="print the JSON Schema of contracts")
    sub.add_parser("conventions", help="list the layer-id conventions parity translates")
    return p


def _add_matrix_parsers(sub) -> None:
    def inputs(p):
        p.add_argument("--target-config", type=Path, help="the target's config.json")
        p.add_argument("--draft", type=Path, help="the draft directory as it will be served")
        p.add_argument("--dump-layout", metavar="TAPS", help="which state each dumped slot holds")
        p.add_argument("--contract", type=Path, metavar="FILE",
                       help="instead of the three above: a locked contract (contracts/NAME.json)")
        p.add_argument("--no-verify", action="store_true",
                       help="skip the second extraction that confirms each suggested fix")
        p.add_argument("--json", action="store_true")

    mx = sub.add_parser("matrix", help="the contract under every installed sglang and speculators "
                        "release; exit 0 all parity, 1 otherwise, 2 bad input")
    inputs(mx)
    mx.add_argument("--sglang", metavar="V,V", help="only these sglang releases (default: all in envs.toml)")
    mx.add_argument("--speculators", metavar="V,V", help="only these speculators releases")
    mx.add_argument("--markdown", action="store_true", help="a Markdown table (for a pull-request comment)")
    mx.add_argument("--workers", type=int, help="extractions run at once (default: the CPU count)")

    cd = sub.add_parser("can-i-deploy", help="yes/no for one sglang and speculators release pair; "
                        "exit 0 yes, 1 no, 2 bad input or cannot tell")
    inputs(cd)
    cd.add_argument("--sglang", metavar="VERSION", required=True)
    cd.add_argument("--speculators", metavar="VERSION", required=True)


def _matrix_inputs(args) -> dict:
    if args.contract:
        if args.target_config or args.draft or args.dump_layout:
            raise _usage("give either --contract FILE or --target-config/--draft/--dump-layout, not both")
        return {"contract": args.contract}
    if not (args.target_config and args.draft and args.dump_layout):
        raise _usage(f"{args.command} needs --target-config, --draft and --dump-layout (or --contract FILE)")
    from .contract import parse_taps
    try:
        layout = [t.name for t in parse_taps(args.dump_layout)]
    except ValueError as exc:
        raise _usage(f"--dump-layout: {exc}") from None
    return {"target_config": args.target_config, "draft": args.draft, "dump_layout": layout}


def _matrix(args) -> int:
    from .matrix import build_matrix, render_markdown, render_text

    split = lambda v: [x.strip() for x in v.split(",") if x.strip()] if v else None  # noqa: E731
    m = build_matrix(**_matrix_inputs(args), sglang=split(args.sglang), speculators=split(args.speculators),
                     workers=args.workers, verify=not args.no_verify)
    if args.json:
        print(json.dumps(m.to_json_dict(), indent=2))
    elif args.markdown:
        print(render_markdown(m))
    else:
        print(render_text(m))
    return EXIT_OK if m.ok else EXIT_DRIFT


def _can_i_deploy(args) -> int:
    from .matrix import can_i_deploy

    a = can_i_deploy(args.sglang, args.speculators, **_matrix_inputs(args), verify=not args.no_verify)
    if args.json:
        print(json.dumps(a.to_json_dict(), indent=2))
    if a.deploy is None:  # cannot tell: an error, one line on stderr like every other one
        print(f"parity: cannot tell: {a.reason}", file=sys.stderr)
        return EXIT_ERROR
    if not args.json:
        print(a.reason)
    return EXIT_OK if a.deploy else EXIT_DRIFT


def _training(args) -> "object":
    from .contract import parse_taps
    from .extract.trainers.speculators import extract_training
    from .inputs import InputError
    from .inputs import target_model

    target = target_model(args.target_config)
    layout = ids = None
    try:
        if args.dump_layout:
            layout = parse_taps(args.dump_layout)
        elif args.datagen_ids:
            ids = [int(x) for x in args.datagen_ids.strip("[]").split(",")]
    except ValueError as exc:
        raise InputError(f"--dump-layout/--datagen-ids: {exc}") from None
    return extract_training(target, layout, datagen_ids=ids,
                            datagen_convention=args.datagen_convention if ids else None,
                            draft_dir=args.draft, speculators_version=getattr(args, "speculators", None))


def _serving(args):
    from .extract.engines.sglang import extract_serving

    return extract_serving(args.target_config, args.draft, sglang_version=args.sglang)


def _check(args) -> int:
    from .gate import check
    from .inputs import check_inputs
    from .report import render_check

    if args.contract:
        from .lock import check_lock, read_lock
        given = [f for f, v in (("--target-config", args.target_config), ("--draft", args.draft),
                                ("--dump-layout", args.dump_layout), ("--datagen-ids", args.datagen_ids))
                 if v]
        if given:
            raise _usage(f"--contract FILE names the target, draft and dump itself; drop {', '.join(given)}"
                         " (or drop --contract)")
        lock = read_lock(args.contract)
        base = args.contract.parent
        args.target_config, args.draft = base / lock.target_config, base / lock.draft
        result = check_lock(args.contract, sglang_version=args.sglang,
                            speculators_version=args.speculators, verify=not args.no_verify)
    else:
        if not (args.target_config and args.draft):
            raise _usage("check needs --target-config and --draft (or --contract FILE)")
        if not (args.dump_layout or args.datagen_ids):
            raise _usage("check needs the dump description: --dump-layout h0,h3,... or --datagen-ids")
        check_inputs(args.target_config, args.draft)  # fails fast, before any extraction
        from .extract.engines.sglang import preflight
        preflight(args.target_config, args.sglang)
        training = _training(args)
        check_inputs(args.target_config, args.draft, training)
        result = check(training, args.target_config, args.draft, sglang_version=args.sglang,
                       verify=not args.no_verify)
    if args.json:
        print(json.dumps(result.to_json_dict(), indent=2))
    else:
        print(render_check(result, str(args.target_config), str(args.draft)))
    return EXIT_OK if result.verdict == "parity" else EXIT_DRIFT


def _lock(args) -> int:
    from .contract import parse_taps
    from .lock import write_lock

    from .lock import lock_destination

    lock_destination(args.out, args.target_config, args.draft)
    if args.out.exists() and not args.update:
        raise _usage(f"{args.out} exists; pass --update to rewrite it")
    try:
        layout = [t.name for t in parse_taps(args.dump_layout)]
    except ValueError as exc:
        raise _usage(f"--dump-layout: {exc}") from None
    lock = write_lock(args.out, args.name or args.out.stem, args.target_config, args.draft, layout)
    print(f"parity: locked {lock.name}: fc {[t.name for t in lock.training.fc_input]}, "
          f"target {lock.training.target.name} -> {args.out}")
    return EXIT_OK


def _export(args) -> int:
    from .export import check_output, export_sglang

    if not (args.dump_layout or args.datagen_ids):
        raise _usage("export needs the dump description: --dump-layout h0,h3,... or --datagen-ids")
    check_output(args.out, args.draft, args.target_config, args.force)  # before any extraction
    from .extract.engines.sglang import preflight
    preflight(args.target_config)
    training = _training(args)
    report = export_sglang(args.draft, args.out, training, args.target_config, force=args.force)
    print(report)
    return EXIT_OK


# The bundled example: the case this project was born from (README, "Two commands").
EXAMPLE_TARGET = ("fixtures", "targets", "kimi-k2.5", "config.json")
EXAMPLE_DRAFT = ("fixtures", "drafts", "kimi-k2.5-eagle3")
EXAMPLE_DUMP = "h0,h3,h31,h59"


def _example(args) -> int:
    """`parity check` on the bundled example, wherever parity is installed; its paths are shown
    relative to the working directory when they are inside it (`./dev example` in a checkout)."""
    from .home import shipped

    def shown(path: Path) -> str:
        rel = os.path.relpath(path)
        return str(path) if rel.startswith(os.pardir) else rel

    argv = ["check", "--target-config", shown(shipped(*EXAMPLE_TARGET)),
            "--draft", shown(shipped(*EXAMPLE_DRAFT)), "--dump-layout", EXAMPLE_DUMP]
    argv += ["--no-verify"] * args.no_verify + ["--json"] * args.json
    return _check(build_parser().parse_args(argv))


def _setup(args) -> int:
    from .build_env import main as build

    return build(args.envs)


def run(args) -> int:
    if args.command == "check":
        return _check(args)
    if args.command == "example":
        return _example(args)
    if args.command == "setup":
        return _setup(args)
    if args.command == "lock":
        return _lock(args)
    if args.command == "export":
        return _export(args)
    if args.command == "forward":
        from .forward.cli import run_forward
        return run_forward(args)
    if args.command == "replay":
        from .replay.cli import run_replay
        return run_replay(args)
    if args.command == "matrix":
        return _matrix(args)
    if args.command == "can-i-deploy":
        return _can_i_deploy(args)
    if args.command == "contract":
        if args.side is None:
            raise _usage("contract needs a side: training or serving")
        contract = _training(args) if args.side == "training" else _serving(args)
        if args.json:
            print(contract.to_json())
        else:
            from .report import render_contract
            print(render_contract(contract))
        # An error finding means the side will not be fed (or did not build) what the
        # config asks: a job gating on this command must not pass.
        return EXIT_DRIFT if contract.has_errors else EXIT_OK
    if args.command == "schema":
        from .contract import contract_json_schema
        print(json.dumps(contract_json_schema(), indent=2))
        return EXIT_OK
    if args.command == "conventions":
        from .conventions import CONVENTIONS
        for c in CONVENTIONS.values():
            print(f"{c.name:26s} {c.summary}\n{'':26s} source: {c.source}")
        return EXIT_OK
    raise _usage(f"unknown command {args.command}")


class _UsageError(Exception):
    pass


def _usage(msg: str) -> _UsageError:
    return _UsageError(msg)


EXIT_TERMINATED = 143  # 128 + SIGTERM: a CI runner cancelling the job


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
        return EXIT_INTERRUPTED
    except _Terminated:
        print("parity: terminated", file=sys.stderr)
        return EXIT_TERMINATED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        print(version_text())
        return EXIT_OK
    if not args.command:
        parser.print_help()
        return EXIT_ERROR
    try:
        from .workspace import workspace

        with workspace():  # one temp dir for the command and its probes, removed on every exit
            return run(args)
    except _UsageError as exc:
        print(f"parity: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 - sorted below: bad input (2) or a bug (3)
        from .errors import USER_ERRORS

        if isinstance(exc, USER_ERRORS):
            lines = str(exc).strip().splitlines() or [type(exc).__name__]
            if getattr(args, "json", False):
                print(json.dumps({"verdict": "error", "error": lines[0]}))
            print(f"parity: {lines[0]}", file=sys.stderr)
            if len(lines) > 1 and os.environ.get("PARITY_DEBUG"):
                print("\n".join(lines[1:]), file=sys.stderr)
            return EXIT_ERROR
        if os.environ.get("PARITY_DEBUG"):
            raise
        first = (str(exc).strip().splitlines() or [""])[0]
        print(f"parity: internal error: {type(exc).__name__}: {first} (PARITY_DEBUG=1 shows the "
              "traceback; please report it)", file=sys.stderr)
        return EXIT_INTERNAL
