"""The launch contract, child side: the user's serve arguments as the installed vLLM parses and
resolves them (run in the vLLM probe, in the release's environment).

    vllm serve MODEL ARGS  ->  make_arg_parser(FlexibleArgumentParser) (what `vllm serve` builds:
    the frontend's flags and `AsyncEngineArgs.add_cli_args`; a misspelled or removed flag is
    refused in its words) -> AsyncEngineArgs.from_cli_args -> create_model_config (the target)
    -> create_speculative_config (the `--speculative-config` JSON into vLLM's SpeculativeConfig,
    resolved by its own code) -> the launch fields the draft's serving depends on, before and
    after, and the vLLM function that changed each

How a release resolves is a family's concern (`Adapter.LAUNCH`, a `Launch` composed of the
pieces here; 0.33 and 0.34 give their EAGLE-3 answer alone, the rest as 0.33 keeps it):
- the parser: `make_arg_parser` and `FlexibleArgumentParser` from where the installed `vllm
  serve` imports them (read off vllm/entrypoints/cli/serve.py: 0.28 on, `serve_parser_modules`),
  for the older families from where each keeps them: `make_arg_parser` from
  `vllm.entrypoints.openai.cli_args`, `FlexibleArgumentParser` from
  `vllm.utils.argparse_utils` (0.16 on) or, for the 0.11 family, from the cli_args module
  itself (what it imports: `vllm.utils` in 0.11.0, `vllm.utils.argparse_utils` in 0.12-0.15);
- the speculative config: `create_speculative_config(model_config, parallel)`, in 0.11 also
  with the chunked-prefill and log-stats flags (`speculative_config_0_11`);
- "does the target capture the aux hidden states for the draft": `uses_aux_hidden_states`
  (0.34: `SpeculativeConfig.uses_aux_hidden_states`, what V2's model runner reads),
  `requires_aux_hidden_states` (0.33: V2's `eagle3_utils.requires_aux_hidden_states(spec)`; the
  0.33 family asks it where the release has it, else V1's proposer: `requires_or_proposer_answer`),
  `eagle_proposer_answer` (0.16-0.22: V1's `EagleProposer._get_eagle3_use_aux_hidden_state_from_config`
  for a `use_eagle()` method), `runner_0_11_answer` (0.11: its runner's inline rule). Each is
  an EAGLE-3 capture only with the method `eagle3` (dflash and dspark capture aux states for
  other draft kinds).

Paths are parity's: MODEL (and `--model`, `--tokenizer`) is a folder holding the target's
config.json as given, the speculative config's `model` (or `--spec-model`) the draft parity
checks; `--trust-remote-code` is turned off (parity has the config.json, never a model's remote
code). Device-bound choices (the platform's own config check, attention backends, CUDA graphs)
are not part of the contract: no engine and no VllmConfig is built, only the two configs.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ...child import jsonable
from ...named import NEUTRAL, name_of, named_path
from ...run_until import CodePathMoved, ModuleAbsent, installed_spec, require

# Fields of SpeculativeConfig (the `--speculative-config` keys) the launch contract reports;
# `max_model_len` and `quantization` are the draft's (their effective values are read from the
# draft's ModelConfig, which vLLM resolves them into).
SPEC_FIELDS = ("method", "num_speculative_tokens", "draft_tensor_parallel_size", "max_model_len", "quantization")
DRAFT_POSITIONS = "draft_model_config.hf_config.max_position_embeddings"
# EngineArgs flags (their dest) -> the field of the resolved config they become.
ENGINE_FIELDS = {"max_model_len": "model_config.max_model_len",
                 "tensor_parallel_size": "parallel_config.tensor_parallel_size"}
SPEC_FLAGS = ("--speculative-config", "-sc", "--spec-method", "--spec-model", "--spec-tokens")
# The parallel layout's fields (vLLM's own names: the target's ParallelConfig as built from the
# engine arguments, the engine arguments data parallelism and expert parallelism are read from,
# and the draft's resolved tensor-parallel size): the launch contract's `layout` (layout_of).
LAYOUT_FIELDS = ("parallel_config.tensor_parallel_size", "parallel_config.pipeline_parallel_size",
                 "data_parallel_size", "enable_expert_parallel", "draft_tensor_parallel_size")
# Each degree of ParallelLayout by the field that sets it (for the words of a limit or a note).
LAYOUT_WORDS = {"tp": "tensor_parallel_size", "pp": "pipeline_parallel_size", "dp": "data_parallel_size"}


class Refused(Exception):
    """The engine's parser refused the arguments (its own message)."""


# Where `vllm serve` takes its parser from in 0.16-0.27 (the 0.22 family; `make_arg_parser` in the OpenAI frontend's
# cli_args, before 0.33 moved it to `vllm.entrypoints.common.cli_args`).
OPENAI_PARSER = ("vllm.entrypoints.openai.cli_args", "vllm.utils.argparse_utils")


@dataclass(frozen=True)
class Launch:
    """How one release family resolves `vllm serve`, by concern (a family's `Adapter.LAUNCH`):
    `aux`, its answer to "does the target capture the aux states for the draft" (spec ->
    (answer, who answered)); `parser`, where `vllm serve` takes its parser from (the modules of
    `make_arg_parser` and `FlexibleArgumentParser`, as vllm/entrypoints/cli/serve.py imports
    them); `speculative`, how `create_engine_config` calls `create_speculative_config`."""

    aux: Callable
    # None: where the installed `vllm serve` imports them from (serve_parser_modules)
    parser: tuple[str, str] | None = None
    speculative: Callable = None  # type: ignore[assignment] - set in __post_init__

    def __post_init__(self):
        if self.speculative is None:
            object.__setattr__(self, "speculative", speculative_config)


def speculative_config(engine_args, model_config, parallel):
    """0.16 on: `create_speculative_config(target_model_config, target_parallel_config)`."""
    return engine_args.create_speculative_config(model_config, parallel)


def speculative_config_0_11(engine_args, model_config, parallel):
    """0.11: as its create_engine_config calls it, with the chunked-prefill and log-stats flags,
    each passed where the release's `create_speculative_config` takes it (0.15, run with this
    family outside its range, takes neither: its create_engine_config passes the two configs only)."""
    import inspect

    takes = inspect.signature(engine_args.create_speculative_config).parameters
    flags = {name: getattr(engine_args, name) for name in ("enable_chunked_prefill", "disable_log_stats")
             if name in takes}
    return engine_args.create_speculative_config(target_model_config=model_config, target_parallel_config=parallel,
                                                 **flags)


def _how(how) -> Launch:
    """A family's LAUNCH: a Launch, or (0.33, 0.34) its EAGLE-3 answer alone."""
    return how if isinstance(how, Launch) else Launch(aux=how)


def parser_modules(how=None) -> tuple[str, str]:
    """The modules `vllm serve`'s parser is taken from under a family's LAUNCH: the family's own
    pair, or (None) the installed release's, read off its serve command."""
    parser = _how(how).parser
    return parser if parser is not None else serve_parser_modules()


SERVE_COMMAND = "vllm.entrypoints.cli.serve"


def serve_parser_modules() -> tuple[str, str]:
    """(the module of `make_arg_parser`, that of `FlexibleArgumentParser`) as the installed
    `vllm serve` imports them: the `from MODULE import NAME` statements of its
    vllm/entrypoints/cli/serve.py, read, not assumed (0.28 keeps the parser in
    `vllm.entrypoints.openai.cli_args`, 0.33 in `vllm.entrypoints.common.cli_args`, the releases
    between elsewhere again). CodePathMoved when the command or either import is not there."""
    import ast

    spec = installed_spec(SERVE_COMMAND)
    if spec is None or spec.origin is None:
        raise ModuleAbsent(SERVE_COMMAND)
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))):  # module level first
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if alias.name in ("make_arg_parser", "FlexibleArgumentParser"):
                    found.setdefault(alias.name, node.module)
    if len(found) < 2:
        raise CodePathMoved(f"looked for where {SERVE_COMMAND} imports make_arg_parser and FlexibleArgumentParser "
                            f"from; found {found or 'neither'}")
    return found["make_arg_parser"], found["FlexibleArgumentParser"]


def _parser(how=None):
    """The parser `vllm serve` builds (vllm/entrypoints/cli/serve.py: make_arg_parser on its
    subparser), from where the release keeps it, raising Refused instead of exiting."""
    import importlib

    cli_args, argparse_utils = parser_modules(how)
    # where the family looks for them, or CodePathMoved: the family's resolver does not fit this
    # release (parity's limit, said as such), never the engine refusing the arguments
    require(f"{cli_args}.make_arg_parser", f"{argparse_utils}.FlexibleArgumentParser")
    make_arg_parser = importlib.import_module(cli_args).make_arg_parser
    FlexibleArgumentParser = importlib.import_module(argparse_utils).FlexibleArgumentParser

    class Parser(FlexibleArgumentParser):
        def error(self, message: str):  # argparse's own exit(2) would end the probe
            raise Refused(message)

    return make_arg_parser(Parser(prog="vllm serve", add_help=False))


def _option(arg: str) -> str | None:
    """The flag an argument names, as FlexibleArgumentParser reads it (`_` as `-`, `=VALUE` and a
    dotted JSON key dropped); None for a value."""
    if not arg.startswith("-") or arg in ("-", "--"):
        return None
    name = arg.split("=", 1)[0]
    if name.startswith("--"):
        name = "--" + name[2:].split(".", 1)[0].replace("_", "-")
    return name


def parse(argv: list[str], model_dir: str, draft_dir: str | None, how=None, neutral: bool = False):
    """(namespace, the dests the user gave, the speculative config as given, the replaced
    paths, the names they were shown under) from the engine's own parser; Refused with its
    message when it refuses. The draft and the target are parity's folders shown under the
    names the user gave them (the speculative config's `model`, else --draft's; MODEL is
    the target's folder's), parity.extract.named; `neutral`: under names that say nothing."""
    parser = _parser(how)
    # MODEL is parity's: the user's args follow it. 0.8.5's `vllm serve` adds the MODEL positional
    # (model_tag) in its serve subcommand, not in make_arg_parser, and sets `model` from it: there
    # parity's model goes in as --model, the option it sets
    positional = any(action.dest == "model_tag" for action in parser._actions)  # noqa: SLF001
    ns = parser.parse_args([model_dir, *argv] if positional else ["--model", model_dir, *argv])
    named = {_option(a) for a in argv} - {None}
    given = {action.dest for action in parser._actions  # noqa: SLF001 - which options the user wrote
             if any(o in named for o in action.option_strings)}
    spec = dict(ns.speculative_config) if isinstance(getattr(ns, "speculative_config", None), dict) else None
    names: dict[str, str | None] = {}

    def shown(kind: str, field: str, user) -> str:
        real = draft_dir if kind == "draft" else model_dir
        user = user if isinstance(user, str) and user else None
        names[field] = user or name_of(real)  # the serve command's name, else --draft's or the target's
        name = NEUTRAL[kind] if neutral else user
        return named_path(real, name, kind) if name else real

    replaced = {"model": "the target's config.json, as given"}
    ns.model_tag = ns.model = shown("target", "model", None)
    if getattr(ns, "tokenizer", None):
        ns.tokenizer = ns.model
        replaced["tokenizer"] = "the target's folder"
    if draft_dir is not None:
        if getattr(ns, "spec_model", None) is not None:
            ns.spec_model = shown("draft", "spec_model", ns.spec_model)
            replaced["spec_model"] = "the draft parity checks"
        # JSON of another shape (a string, a list, a number: vLLM's parser reads any JSON) goes to
        # vLLM as given, whose resolution refuses it in its own words (spec_shape_note says which)
        elif isinstance(ns.speculative_config, dict):
            model = shown("draft", "speculative_config.model", ns.speculative_config.get("model"))
            ns.speculative_config = {**ns.speculative_config, "model": model}
            replaced["speculative_config.model"] = "the draft parity checks"
        elif any(getattr(ns, flag, None) is not None for flag in ("spec_method", "spec_tokens")):
            ns.spec_model = shown("draft", "spec_model", None)  # 0.34's shorthand flags, without a model
            replaced["spec_model"] = "the draft parity checks"
    if getattr(ns, "trust_remote_code", False):  # parity has the config.json only, never remote code
        ns.trust_remote_code = False
        replaced["trust_remote_code"] = "off: parity runs no remote code (vLLM's own config classes read the target)"
    return ns, given, spec, replaced, names


class _Trace:
    """Who assigned a field of a config object: the qualified name of the function that made
    the last assignment outside a constructor, per (object, field)."""

    def __init__(self, *classes):
        self.classes, self.by, self.saved = classes, {}, []

    def __enter__(self):
        for cls in self.classes:
            original = cls.__setattr__
            self.saved.append((cls, cls.__dict__.get("__setattr__")))

            def recording(obj, name, value, _original=original):
                code = sys._getframe(1).f_code  # noqa: SLF001
                if code.co_name not in ("__init__", "__setattr__"):
                    self.by[(id(obj), name)] = getattr(code, "co_qualname", code.co_name)
                _original(obj, name, value)

            cls.__setattr__ = recording
        return self

    def __exit__(self, *exc):
        for cls, own in reversed(self.saved):
            if own is None:
                del cls.__setattr__
            else:
                cls.__setattr__ = own

    def get(self, obj, name: str) -> str | None:
        return self.by.get((id(obj), name))


def _effective(how: Launch, spec, model_config, parallel, trace) -> tuple[dict, dict, bool | None, str]:
    """(effective, by, algorithm_is_eagle3, its answer): each launch field as vLLM resolved it and
    the function that set it (the trace), and whether the resolved method feeds an EAGLE-3 draft
    aux states."""
    effective: dict[str, Any] = {"model_config.max_model_len": model_config.max_model_len,
                                 "parallel_config.tensor_parallel_size": parallel.tensor_parallel_size}
    by: dict[str, str] = {"model_config.max_model_len": trace.get(model_config, "max_model_len") or "?",
                          "parallel_config.tensor_parallel_size":
                              trace.get(parallel, "tensor_parallel_size") or "?"}
    if spec is None:
        effective.update(dict.fromkeys(SPEC_FIELDS))
        return ({k: jsonable(v) for k, v in effective.items()}, by, False,
                "no --speculative-config: vLLM serves without a draft")
    draft = spec.draft_model_config
    for field in SPEC_FIELDS:
        if field == "max_model_len" and draft is not None:
            effective[field], by[field] = draft.max_model_len, trace.get(draft, "max_model_len") or "?"
        elif field == "quantization" and draft is not None:
            effective[field], by[field] = draft.quantization, trace.get(draft, "quantization") or "?"
        else:
            effective[field], by[field] = getattr(spec, field, None), trace.get(spec, field) or "?"
    if draft is not None:
        effective[DRAFT_POSITIONS] = getattr(draft.hf_config, "max_position_embeddings", None)
    aux, answered = how.aux(spec)
    is_eagle3 = None if aux is None else bool(spec.method == "eagle3" and aux)
    return {k: jsonable(v) for k, v in effective.items()}, by, is_eagle3, answered


def resolve(how: Callable | Launch, argv: list[str], model_dir: str, draft_dir: str | None,
            neutral: bool = False) -> dict:
    """The launch contract of `argv` under a family's LAUNCH: {"argv", "replaced", "requested",
    "effective", "overrides", "algorithm_is_eagle3", "names", ...} (`neutral`: the paths shown
    under names that say nothing, parse). The process environment is restored after."""
    how = _how(how)
    ns, given, spec_given, replaced, names = parse(argv, model_dir, draft_dir, how, neutral)  # first: CodePathMoved if not there
    from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig
    from vllm.engine.arg_utils import AsyncEngineArgs

    saved = dict(os.environ)
    try:
        engine_args = AsyncEngineArgs.from_cli_args(ns)
        with _Trace(ModelConfig, ParallelConfig, SpeculativeConfig) as trace:
            model_config = engine_args.create_model_config()
            parallel = ParallelConfig(tensor_parallel_size=engine_args.tensor_parallel_size,
                                      pipeline_parallel_size=engine_args.pipeline_parallel_size)
            spec = how.speculative(engine_args, model_config, parallel)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    # what the user asked: the speculative config's keys as vLLM merged them (0.34's --spec-*
    # flags included), the user's values (a path as given), and the engine flags they wrote
    merged = {k: v for k, v in (engine_args.speculative_config or {}).items()
              if k not in ("target_model_config", "target_parallel_config")}
    requested = {k: jsonable((spec_given or {}).get(k, merged.get(k))) for k in SPEC_FIELDS if k in merged}
    requested.update({field: jsonable(getattr(ns, dest)) for dest, field in ENGINE_FIELDS.items()
                      if dest in given and getattr(ns, dest, None) is not None})
    effective, by, is_eagle3, answered = _effective(how, spec, model_config, parallel, trace)
    overrides = [{"field": f, "requested": v, "effective": effective.get(f), "by": by.get(f, "?")}
                 for f, v in requested.items() if f in effective and effective[f] != v]
    fields = {"parallel_config.tensor_parallel_size": parallel.tensor_parallel_size,
              "parallel_config.pipeline_parallel_size": parallel.pipeline_parallel_size,
              "data_parallel_size": getattr(engine_args, "data_parallel_size", 1),
              "enable_expert_parallel": getattr(engine_args, "enable_expert_parallel", False),
              "draft_tensor_parallel_size": effective.get("draft_tensor_parallel_size")}
    return {"argv": list(argv), "replaced": replaced, "requested": requested, "effective": effective,
            "overrides": overrides, "names": names, "algorithm_is_eagle3": is_eagle3, "algorithm_field": "method",
            "algorithm_answer": answered, "layout": layout_of({k: jsonable(v) for k, v in fields.items()}),
            "_spec": spec_given, "_merged": merged}


def layout_of(values: dict) -> dict:
    """The parallel layout (parity.contract.ParallelLayout) of the resolved fields: tp and pp as
    the target's ParallelConfig holds them, the draft's tensor-parallel size as its resolved
    SpeculativeConfig does. Data parallelism (replicas of a dense target, attention DP with the
    experts spread for an MoE one) and expert parallelism are kept as given (`unrun_degrees`)."""
    def degree(name: str) -> int:
        value = values.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1

    draft_tp = values.get("draft_tensor_parallel_size")
    return {"fields": dict(values), "tp": degree("parallel_config.tensor_parallel_size"),
            "pp": degree("parallel_config.pipeline_parallel_size"), "dp": 1, "attention_dp": 1, "ep": 1,
            "draft_tp": draft_tp if isinstance(draft_tp, int) else None}


def unrun_degrees(values: dict) -> dict:
    """The layout's parts parity's multi-process capture does not run: data parallelism (whose
    meaning for the target, replicas or attention DP with the experts spread, vLLM decides per
    model) and expert parallelism."""
    out = {}
    if isinstance(values.get("data_parallel_size"), int) and values["data_parallel_size"] > 1:
        out["data_parallel_size"] = values["data_parallel_size"]
    if values.get("enable_expert_parallel") is True:
        out["enable_expert_parallel"] = True
    return out


def uses_aux_hidden_states(spec) -> tuple[bool | None, str]:
    """0.34: the resolved config's own property, which V2's model runner reads."""
    return bool(spec.uses_aux_hidden_states), "SpeculativeConfig.uses_aux_hidden_states"


def requires_aux_hidden_states(spec) -> tuple[bool | None, str]:
    """0.33: V2's `eagle3_utils.requires_aux_hidden_states(spec)` (the GPU-default runner's)."""
    from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import requires_aux_hidden_states as requires

    return bool(requires(spec)), "eagle3_utils.requires_aux_hidden_states"


def requires_or_proposer_answer(spec) -> tuple[bool | None, str]:
    """The 0.33 family (0.30-0.33): V2's `requires_aux_hidden_states` where the release has it
    (0.33); 0.30-0.32's `eagle3_utils` has none (their V2 runner decides inline, for the methods
    eagle3, dflash and dspark, as 0.28's does), so there, as for 0.28, V1's EagleProposer answers.
    Which one is read off the installed module, and the answer names it."""
    import importlib

    module = "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils"
    if installed_spec(module) is not None and hasattr(importlib.import_module(module), "requires_aux_hidden_states"):
        return requires_aux_hidden_states(spec)
    return eagle_proposer_answer(spec)


def eagle_proposer_answer(spec) -> tuple[bool | None, str]:
    """0.16-0.22: V1's GPUModelRunner captures the aux states for a `use_eagle()` method when
    its EagleProposer says so for eagle3 (`_get_eagle3_use_aux_hidden_state_from_config`, which
    reads the draft's eagle_config['use_aux_hidden_state']); the proposer itself needs a device,
    so its method runs on a holder of the two attributes it reads."""
    from vllm.v1.spec_decode.eagle import EagleProposer

    holder = _Holder(method=spec.method, draft_model_config=spec.draft_model_config)
    aux = bool(spec.use_eagle() and EagleProposer._get_eagle3_use_aux_hidden_state_from_config(holder))  # noqa: SLF001
    return aux, "EagleProposer._get_eagle3_use_aux_hidden_state_from_config"


def runner_0_11_answer(spec) -> tuple[bool | None, str]:
    """0.11: V1's GPUModelRunner.__init__ sets `use_aux_hidden_state_outputs` for a `use_eagle()`
    method whose name is eagle3 (inline, no function of its own to ask); `use_eagle()` is the
    release's own."""
    return bool(spec.use_eagle() and spec.method == "eagle3"), "SpeculativeConfig.use_eagle() and method 'eagle3' " \
        "(as 0.11's GPUModelRunner.__init__ decides)"


class _Holder:
    """The attributes a vLLM method reads of `self`, and nothing else."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs)

    def __getattr__(self, name):
        raise AttributeError(f"parity's holder has no {name!r}: vLLM's code reads more than parity set up")


def method_fix(argv: list[str], spec_given: dict | None, merged: dict | None,
               method: str = "eagle3") -> list[str] | None:
    """`argv` with the speculative config's method set to `method` (every other key as the user
    gave it, in one `--speculative-config`); None when the user gave no speculative config."""
    if not merged and not spec_given:
        return None
    config = dict(spec_given or {})  # the user's keys, in the user's order
    config.update({k: v for k, v in (merged or {}).items()  # 0.34's --spec-* flags, merged by vLLM
                   if k not in config and k != "model"})  # (merged holds parity's draft as the model)
    out, skip, user_model = [], None, None
    for arg in argv:
        if skip is not None:
            user_model = arg if skip == "--spec-model" else user_model
            skip = None
            continue
        name = _option(arg)
        if name in SPEC_FLAGS:
            if "=" in arg:
                user_model = arg.split("=", 1)[1] if name == "--spec-model" else user_model
            else:
                skip = name
            continue
        out.append(arg)
    if "model" not in config and user_model is not None:
        config["model"] = user_model  # as the user wrote it (parity's draft stands there when resolved)
    config["method"] = method
    return out + ["--speculative-config", json.dumps(config)]


DFLASH_ANSWER = "its SpeculativeConfig.method == 'dflash' (use_dflash())"


def draft_kind_of(launch: dict, kind: str) -> dict:
    """`launch` for a draft of `kind`: for a DFlash draft, the kind and vLLM's own answer whether
    the resolved method serves it (SpeculativeConfig.use_dflash(): its method is 'dflash'), which
    the verdict reads in place of the EAGLE-3 answer (LaunchContract.serves_the_draft)."""
    if kind != "dflash":
        return launch
    method = (launch.get("effective") or {}).get("method")
    out = {**launch, "draft_kind": "dflash", "algorithm_is_dflash": method == "dflash"}
    if method is not None:  # else the answer already says why: no --speculative-config
        out["algorithm_answer"] = DFLASH_ANSWER
    return out


def fixes(how: Callable | Launch, argv: list[str], launch: dict, model_dir: str, draft_dir: str | None,
          kind: str = "eagle3") -> list[dict]:
    """Argument lists that serve the draft's kind, each verified by resolving it again: for a
    method under which the target's aux states are not captured for an EAGLE-3 draft, the method
    `eagle3`; for a DFlash draft under another method, `dflash`."""
    serves = launch.get("algorithm_is_dflash" if kind == "dflash" else "algorithm_is_eagle3")
    if serves is not False:
        return []
    candidate = method_fix(argv, launch.get("_spec"), launch.get("_merged"), kind)
    return _verified(how, candidate, model_dir, draft_dir, kind)


def _verified(how: Callable | Launch, candidate: list[str] | None, model_dir: str, draft_dir: str | None,
              kind: str = "eagle3") -> list[dict]:
    if candidate is None:
        return []
    try:
        again = draft_kind_of(resolve(how, candidate, model_dir, draft_dir), kind)
    except Exception:  # noqa: BLE001 - a candidate the engine refuses is no fix
        return []
    if again["overrides"] or not again["algorithm_is_dflash" if kind == "dflash" else "algorithm_is_eagle3"]:
        return []
    return [{"argv": candidate, "effective": again["effective"]}]


def spec_shape_note(how: Callable | Launch, argv: list[str], model_dir: str) -> str:
    """What to add to vLLM's refusal when the speculative config its parser read is JSON but not
    an object (`--speculative-config '"eagle3"'`: vLLM's parser reads any JSON, its resolution
    takes an object): the flag and the shape given; '' otherwise."""
    try:
        value = getattr(parse(argv, model_dir, None, how)[0], "speculative_config", None)
    except Exception:  # noqa: BLE001 - the parser's own refusal is reported already
        return ""
    if value is None or isinstance(value, dict):
        return ""
    shape = {str: "string", list: "array", bool: "boolean", int: "number", float: "number"}.get(
        type(value), type(value).__name__)
    return (f" (--speculative-config {json.dumps(value)[:80]} is a JSON {shape}; vLLM takes a JSON object there, "
            "e.g. --speculative-config '{\"method\": \"eagle3\", \"model\": ..., \"num_speculative_tokens\": 3}')")


def fix_for_refused(how: Callable | Launch, argv: list[str], model_dir: str, draft_dir: str | None) -> list[dict]:
    """When vLLM's resolution refuses the arguments: the method `eagle3` instead of the one
    given, if vLLM resolves that (e.g. `"method": "eagle"` with an EAGLE-3 draft)."""
    try:
        ns = _parser(how).parse_args([model_dir, *argv])
    except Exception:  # noqa: BLE001
        return []
    spec = ns.speculative_config if isinstance(getattr(ns, "speculative_config", None), dict) else None
    merged = dict(spec or {})
    for flag, key in (("spec_method", "method"), ("spec_model", "model"), ("spec_tokens", "num_speculative_tokens")):
        if getattr(ns, flag, None) is not None:
            merged[key] = getattr(ns, flag)
    if merged.get("method") == "eagle3":
        return []
    return _verified(how, method_fix(argv, spec, merged), model_dir, draft_dir)


def write_model_dir(work: Path, target_config: dict) -> str:
    """A folder holding the target's config.json as given (the model config reads it)."""
    where = work / "launch-target"
    where.mkdir(parents=True, exist_ok=True)
    (where / "config.json").write_text(json.dumps(target_config))
    return str(where)


__all__ = ["DFLASH_ANSWER", "LAYOUT_FIELDS", "LAYOUT_WORDS", "Launch", "Refused", "draft_kind_of", "eagle_proposer_answer", "fix_for_refused", "fixes",
           "layout_of", "requires_aux_hidden_states", "resolve", "runner_0_11_answer", "spec_shape_note",
           "speculative_config", "speculative_config_0_11", "unrun_degrees", "uses_aux_hidden_states",
           "write_model_dir"]
