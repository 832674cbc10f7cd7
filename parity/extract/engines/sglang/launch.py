"""The launch contract, child side: the user's serve arguments as the installed SGLang parses
and resolves them (run in the serving probe, in the release's environment).

    python -m sglang.launch_server ARGS  ->  ServerArgs.add_cli_args / from_cli_args (the engine's
    own parser: a misspelled or removed flag is refused in its words) -> the release's resolution
    -> the launch fields the draft's serving depends on, before and after, and who changed each

How a release resolves is a family's concern (`Adapter.LAUNCH`, one of the two resolvers here):
- `declared` (0.5.16 on): `ServerArgs.resolve_once()` runs the resolution pipeline, which
  declares each resolved field (`_resolved_overrides`: (handler, {field: value})) and leaves
  the raw record as given; `resolved_view` is what the server runs.
- `traced` (before): `ServerArgs.__post_init__` resolves by assigning the fields; each
  assignment after the constructor's own is recorded with the function that made it.

Paths are parity's: `--model-path` is a folder holding the target's config.json as given,
`--speculative-draft-model-path` the draft parity checks (a tokenizer path too, when given);
`--device cpu` is added (parity's harness has no accelerator), so device-bound choices
(attention backend, overlap schedule, CUDA graphs) are not part of the contract, and
`--trust-remote-code` is turned off (parity has the config.json, never a model's remote code;
SGLang's own config classes read the published targets).

The GPU's memory: 0.4.5.post3-0.4.6.post4 resolve with it (`get_device_memory_capacity`, None
off a GPU); the query is answered as GPUs of several sizes would, for the resolution only, and a
launch is reported only when every size gives the same one (gpu_memory.py; `replaced` says so).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

from ...child import jsonable
from ...named import NEUTRAL, name_of, named_path
from . import cpu_path, gpu_memory

# The fields of ServerArgs the draft's serving depends on (the engine's own names); the launch
# contract reports these, before and after resolution.
LAUNCH_FIELDS = ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
                 "speculative_num_draft_tokens", "speculative_draft_model_revision", "max_running_requests",
                 "context_length", "dtype", "speculative_draft_model_quantization", "tp_size", "page_size")
# The parallel layout's fields (the engine's own names; those a release lacks are left out): the
# launch contract's `layout`, read as degrees by `layout_of`. Not judged field by field (0.5.23's
# resolution rewrites the deprecated `--dp-size N --enable-dp-attention` as `attn_dp_size N`): the
# capture runs under the layout they give (probe.py, ranks.py).
LAYOUT_FIELDS = ("tp_size", "pp_size", "dp_size", "attn_dp_size", "enable_dp_attention", "ep_size", "attn_cp_size",
                 "moe_dp_size", "dcp_size", "nnodes")
# Each degree of ParallelLayout by the field that sets it (for the words of a limit or a note).
LAYOUT_WORDS = {"tp": "tp_size", "pp": "pp_size", "dp": "dp_size", "attention_dp": "attn_dp_size", "ep": "ep_size"}
_REPORTED = LAUNCH_FIELDS + tuple(f for f in LAYOUT_FIELDS if f not in LAUNCH_FIELDS)
# Replaced by parity's own files (field -> what stands there).
PATH_FIELDS = {"model_path": "the target's config.json, as given", "tokenizer_path": "the target's folder",
               "speculative_draft_model_path": "the draft parity checks"}


class Refused(Exception):
    """The engine's parser refused the arguments (its own message)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own exit(2) would end the probe
        raise Refused(message)


def parse(argv: list[str], model_dir: str, draft_dir: str | None, neutral: bool = False):
    """(ServerArgs class, namespace, the fields the user gave, the replaced paths, the names the
    user gave them) from the engine's own parser; Refused with its message when it refuses.
    A path the user gave is parity's folder shown under the user's name (parity.extract.named;
    `neutral`: under a name that says nothing, to see what the name decides)."""
    from sglang.srt.server_args import ServerArgs

    parser = _Parser(prog="python -m sglang.launch_server", add_help=False)
    ServerArgs.add_cli_args(parser)
    if not any(a in ("--model-path", "--model") or a.startswith(("--model-path=", "--model=")) for a in argv):
        argv = ["--model-path", model_dir, *argv]  # the model is parity's either way
    ns = parser.parse_args(argv)
    given: set[str] = set()
    for action in parser._actions:  # noqa: SLF001 - which options the user wrote, in any spelling
        for option in action.option_strings:
            if any(arg == option or arg.startswith(option + "=") for arg in argv):
                given.add(action.dest)
    replaced, names = {}, {}
    for field, what in PATH_FIELDS.items():
        if field == "speculative_draft_model_path" and draft_dir is None:
            continue
        if field in given or field in ("model_path", "speculative_draft_model_path"):
            if hasattr(ns, field):
                replaced[field] = what
                kind = "draft" if field == "speculative_draft_model_path" else "target"
                user = getattr(ns, field) if field in given and isinstance(getattr(ns, field), str) else None
                real = draft_dir if kind == "draft" else model_dir
                names[field] = user or name_of(real)  # the serve command's name, else --draft's or the target's
                name = NEUTRAL[kind] if neutral else user
                setattr(ns, field, named_path(real, name, kind) if name else real)
    if getattr(ns, "trust_remote_code", False):  # parity has the config.json only, never remote code
        ns.trust_remote_code = False
        replaced["trust_remote_code"] = "off: parity runs no remote code (SGLang's own config class reads the target)"
    ns.device = "cpu"
    return ServerArgs, ns, given, replaced, names


def declared(ServerArgs, ns) -> tuple[dict, dict[str, str]]:
    """0.5.16 on: resolve_once, then the resolved view; who set a field: its declaring handler."""
    from sglang.srt.arg_groups.model_override_base import resolved_view

    args = ServerArgs.from_cli_args(ns)
    args.resolve_once()
    view = resolved_view(args)
    by: dict[str, str] = {}
    for source, fields in getattr(args, "_resolved_overrides", None) or ():
        for field in fields:
            by[field] = source
    return {f: jsonable(getattr(view, f, None)) for f in _REPORTED if hasattr(view, f)}, by


def traced(ServerArgs, ns) -> tuple[dict, dict[str, str]]:
    """Before 0.5.16: the constructor's __post_init__ resolves by assignment; each assignment
    made after the constructor's own is recorded with the function that made it."""
    by: dict[str, str] = {}
    original = ServerArgs.__setattr__

    def recording(self, name, value):
        caller = sys._getframe(1).f_code  # noqa: SLF001
        if caller.co_name != "__init__" and name in _REPORTED:
            by[name] = caller.co_name
        original(self, name, value)

    ServerArgs.__setattr__ = recording
    try:
        args = ServerArgs.from_cli_args(ns)
    finally:
        ServerArgs.__setattr__ = original
    return {f: jsonable(getattr(args, f, None)) for f in _REPORTED if hasattr(args, f)}, by


def layout_of(values: dict) -> dict:
    """The parallel layout (parity.contract.ParallelLayout) of the resolved layout fields: tp and pp
    as resolved; data-parallel attention as `attn_dp_size` (0.5.23), else `dp_size` where
    `enable_dp_attention` is on (the releases before, where it is the attention DP degree);
    data-parallel replicas as `dp_size` otherwise; ep as `ep_size`. SGLang has no draft tensor
    parallel field (the draft runs in the target's attention TP group): None."""
    def degree(name: str) -> int:
        value = values.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1

    dp_attention = bool(values.get("enable_dp_attention"))
    attention_dp = degree("attn_dp_size") if "attn_dp_size" in values else (degree("dp_size") if dp_attention else 1)
    return {"fields": dict(values), "tp": degree("tp_size"), "pp": degree("pp_size"),
            "dp": 1 if dp_attention else degree("dp_size"), "attention_dp": attention_dp, "ep": degree("ep_size"),
            "draft_tp": None}


def unrun_degrees(values: dict) -> dict[str, int]:
    """The resolved layout's degrees above 1 that parity's multi-process capture does not run beside
    those ParallelLayout names: context parallelism (attn_cp_size, dcp_size) and MoE data parallelism."""
    return {f: values[f] for f in ("attn_cp_size", "dcp_size", "moe_dp_size")
            if isinstance(values.get(f), int) and values[f] > 1}


def resolve(resolver: Callable, argv: list[str], model_dir: str, draft_dir: str | None, neutral: bool = False) -> dict:
    """The launch contract of `argv`: {"argv", "replaced", "requested", "effective", "overrides",
    "names"} (`neutral`: the paths shown under names that say nothing, parse). The process
    environment is restored after (resolution sets variables the capture must not see)."""
    ServerArgs, ns, given, replaced, names = parse(argv, model_dir, draft_dir, neutral)
    requested = {f: jsonable(getattr(ns, f)) for f in sorted(given) if f in LAUNCH_FIELDS}
    saved = dict(os.environ)
    namespace = None
    try:
        try:
            effective, by = resolver(ServerArgs, ns)
        except TypeError as exc:
            # 0.4.5.post3-0.4.6.post4 compute with the GPU's memory, which a CPU cannot answer
            # (cpu_path.gpu_memory_unknown): resolved again below, with the query answered.
            namespace = cpu_path.memory_query_namespace(exc)
            if namespace is None:
                raise
            limit = cpu_path.gpu_memory_unknown(exc)
        except ValueError as exc:
            # A release may refuse an algorithm on the device parity sets (0.5.23's `_handle_dflash`:
            # DFLASH on the CPU platform), not the user's arguments. The same arguments are resolved
            # again as a GPU launch would (`--device cuda`, resolution only: nothing runs there); only
            # when that resolves is the refusal the device's, the one thing changed. Otherwise the
            # first refusal stands, the engine's answer to these arguments.
            os.environ.clear()
            os.environ.update(saved)
            _, on_gpu, _, _, _ = parse(argv, model_dir, draft_dir, neutral)
            on_gpu.device = "cuda"
            try:
                effective, by = resolver(ServerArgs, on_gpu)
            except Exception:  # noqa: BLE001 - refused on a GPU too (or needs one): the CPU refusal is the answer
                raise exc from None
            replaced["device"] = (f"cuda for the resolution: sglang refuses these arguments on the CPU ({exc}) "
                                  "and resolves them for a GPU; the capture still runs on the CPU")
        if namespace is not None:
            # Outside the handler, so that a refusal there is not chained to the CPU's TypeError.
            # The same arguments, the query answered as a GPU would, once per card of
            # gpu_memory.CARDS, kept only when the answer decides no reported field
            # (gpu_memory.same_on_every_card); else parity's limit.
            def on_card(mib: float) -> tuple[dict, dict]:
                os.environ.clear()
                os.environ.update(saved)
                _, again, _, _, _ = parse(argv, model_dir, draft_dir, neutral)
                with gpu_memory.answering(namespace, mib):
                    effective, by = resolver(ServerArgs, again)
                return effective, {f: by[f] for f in LAUNCH_FIELDS if f in by}

            effective, by = gpu_memory.same_on_every_card(on_card)
            replaced["gpu_memory"] = gpu_memory.said(limit)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    layout = {f: effective[f] for f in LAYOUT_FIELDS if f in effective}
    effective = {f: v for f, v in effective.items() if f in LAUNCH_FIELDS}
    overrides = [{"field": f, "requested": v, "effective": effective.get(f), "by": by.get(f, "?")}
                 for f, v in requested.items() if f in effective and effective[f] != v]
    return {"argv": list(argv), "replaced": replaced, "requested": requested, "effective": effective,
            "overrides": overrides, "names": names, "layout": layout_of(layout)}


def fixes(resolver: Callable, argv: list[str], launch: dict, model_dir: str, draft_dir: str | None) -> list[dict]:
    """Argument lists that give what was asked, each verified by resolving it again: for a
    draft-token count the engine re-derived from the steps, the steps that yield it."""
    out = []
    for override in launch["overrides"]:
        if override["field"] != "speculative_num_draft_tokens" or not isinstance(override["requested"], int):
            continue
        steps = override["requested"] - 1
        candidate = _with(argv, "--speculative-num-steps", str(steps))
        try:
            again = resolve(resolver, candidate, model_dir, draft_dir)
        except Exception:  # noqa: BLE001 - a candidate the engine refuses is no fix
            continue
        if not again["overrides"] and again["effective"].get("speculative_num_draft_tokens") == override["requested"]:
            out.append({"argv": candidate, "effective": again["effective"]})
    return out


def _with(argv: list[str], option: str, value: str) -> list[str]:
    """`argv` with `option` set to `value` (replaced where given, else appended)."""
    out, skip = [], False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == option:
            skip = True
            continue
        if arg.startswith(option + "="):
            continue
        out.append(arg)
    return out + [option, value]


def write_model_dir(work: Path, target_config: dict) -> str:
    """A folder holding the target's config.json as given (resolution reads the architecture)."""
    where = work / "launch-target"
    where.mkdir(parents=True, exist_ok=True)
    (where / "config.json").write_text(json.dumps(target_config))
    return str(where)


__all__ = ["LAUNCH_FIELDS", "LAYOUT_FIELDS", "LAYOUT_WORDS", "Refused", "declared", "fixes", "layout_of", "resolve",
           "traced", "unrun_degrees", "write_model_dir"]
