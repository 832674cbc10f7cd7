"""When SGLang's own non-CUDA code path, not parity's harness, stops or skews a CPU run.

parity runs the engine's model code as SGLang runs it off CUDA: each of its multi-platform ops
(`CustomOp` up to 0.5.x, `MultiPlatformOp` later) dispatches to its native or CPU method instead
of its CUDA one. Two ways some releases' own non-CUDA path cannot run a model, each found by
running it and said in the engine's terms. Each is a limit of parity's CPU run (the probe
reports it as a harness limit: exit 2, "parity cannot run" in the release table), never the
engine's refusal: a GPU runs the op's CUDA method, which takes the argument and reads the weights.

- `method_lacks_argument`: the model code passes an op an argument only its CUDA method takes,
  and the CPU method it dispatched to raises TypeError (gpt-oss on SGLang 0.5.0rc0-0.5.3rc0:
  `RotaryEmbedding.forward_native()` has no `fused_set_kv_buffer_arg`,
  `UnquantizedFusedMoEMethod.forward_cpu()` no `activation_alpha`);
- `unread_parameters`: the forward runs but never reads weights the model loaded, so what it
  computes is not the model (gpt-oss on 0.5.3rc2-0.5.10.post1: the experts' biases, which the
  non-CUDA MoE of those releases ignores; 0.5.11 reads them): found by zeroing each group of
  loaded parameters in turn and seeing the output unchanged. Parameters of an attention module
  are left out: parity's own prefill backend computes attention (sdpa_backend.py), so what it
  leaves unread would be parity's to answer, not the engine's.
  (gpt-oss on 0.5.0rc0-0.5.10.post1 no longer meets either: rope_standin.py and moe_standin.py
  stand in for the CUDA methods there; both checks remain for any other release or model.)

And two that are parity's: `requirement_not_installed`, a model module that imports a package the
release requires but parity's CPU environment leaves out (its CUDA-only requirements): SGLang
0.5.15's DeepSeek module imports `cutlass`, from `nvidia-cutlass-dsl`, which its wheel requires;
and `gpu_memory_unknown`, the start-up's arithmetic on the GPU's memory, which its device query
answers only on a GPU: SGLang 0.4.5.post3-0.4.6.post4's `ServerArgs.__post_init__` sets
`gpu_mem = get_device_memory_capacity(self.device)` (None for device cpu: "GPU memory is not
known yet or no GPU is available") and, unless `--mem-fraction-static` is given, compares
`gpu_mem <= 81920` (server_args.py:225 in 0.4.5.post3), a TypeError on CPU that a GPU start-up,
where nvidia-smi answers, never meets (the launch resolution answers it as a GPU would and
reports a launch only where the answer decides none of it: gpu_memory.py). Both are found from the exception and its frames
(`ModuleNotFoundError.name`; the failing frame's own bytecode and locals), never its message.
"""

from __future__ import annotations

import dis
import inspect
import re
from pathlib import Path

import torch

from ... import child

_UNEXPECTED = re.compile(r"^(\w+)\.(\w+)\(\) got an unexpected keyword argument '(\w+)'$")
_LAYER_INDEX = re.compile(r"\.\d+\.")


def method_lacks_argument(exc: BaseException) -> str | None:
    """Why the op's non-CUDA method refused the call, when `exc` is a TypeError naming an
    argument that method does not take while the same op's `forward_cuda` does; else None."""
    match = _UNEXPECTED.match(str(exc)) if isinstance(exc, TypeError) else None
    if match is None:
        return None
    cls_name, method, argument = match.groups()
    if method == "forward_cuda":
        return None
    tb = exc.__traceback__
    while tb is not None:
        op = tb.tb_frame.f_locals.get("self")
        tb = tb.tb_next
        if (op is None or cls_name not in {c.__name__ for c in type(op).__mro__}
                or not callable(getattr(type(op), "forward_cuda", None))):
            continue
        if _takes(type(op).forward_cuda, argument) and not _takes(getattr(type(op), method), argument):
            return (f"its model code passes {argument!r} to {cls_name}, whose non-CUDA method {method}() does not "
                    f"take it (its forward_cuda() does)")
    return None


def _takes(func, argument: str) -> bool:
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return argument in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def unread_parameters(forward, model: torch.nn.Module) -> list[str]:
    """The groups of `model`'s loaded (non-zero) parameters outside attention modules whose
    zeroing changes none of `forward()`'s outputs (its logits and hidden states), each named
    with its layer index as `*` (`model.layers.*.mlp.experts.w13_weight_bias`) and the class of
    the module holding it. Every parameter is restored."""
    owners = dict(model.named_modules())
    groups: dict[str, list[torch.nn.Parameter]] = {}
    where: dict[str, str] = {}
    for name, param in model.named_parameters():
        owner = owners.get(name.rpartition(".")[0])
        if owner is None or "Attention" in type(owner).__name__ or not bool(param.detach().ne(0).any()):
            continue
        key = _LAYER_INDEX.sub(".*.", name)
        groups.setdefault(key, []).append(param)
        where[key] = type(owner).__name__
    base = _outputs(forward())
    unread = []
    for key, params in groups.items():
        saved = [p.detach().clone() for p in params]
        try:
            with torch.no_grad():
                for p in params:
                    p.zero_()
            same = _same(base, _outputs(forward()))
        finally:
            with torch.no_grad():
                for p, s in zip(params, saved):
                    p.copy_(s)
        if same:
            unread.append(f"{key} (of its {where[key]})")
    return unread


def _outputs(out) -> list[torch.Tensor]:
    return [t.detach().clone() for t in (getattr(out, "next_token_logits", None), getattr(out, "hidden_states", None))
            if isinstance(t, torch.Tensor)]


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def requirement_not_installed(exc: BaseException, version: str, requires: list[str]) -> str | None:
    """Why a model module could not be imported, when `exc` is a ModuleNotFoundError for a
    module the release requires (`requires`: the installed SGLang's `Requires-Dist`) and parity's
    environment lacks (parity.extract.child.requirement_not_installed). None otherwise (the
    engine's own import of something it does not require stays its own)."""
    return child.requirement_not_installed(exc, "sglang", version, requires, "its model code")


MEMORY_QUERY = "get_device_memory_capacity"  # SGLang's question for the GPU's memory (None off a GPU)


def gpu_memory_unknown(exc: BaseException) -> str | None:
    """A limit of parity's CPU run when `exc` is a TypeError raised in SGLang's own code, in a
    function that stores the answer of `get_device_memory_capacity` in a local (read from its
    bytecode: the store that follows the call) and that local is None there: the start-up's
    arithmetic on the GPU's memory, which a GPU answers. None for any other failure."""
    found = _unanswered(exc)
    if found is None:
        return None
    tb, local = found
    code = tb.tb_frame.f_code
    where = f"{Path(code.co_filename).name}:{tb.tb_lineno} {code.co_qualname}"
    return (f"sglang's start-up computes with the GPU's memory ({local} = {MEMORY_QUERY}(...), None off a GPU), at "
            f"{where}: {child.words(exc)}; a GPU start-up, where the query answers, never meets it")


def memory_query_namespace(exc: BaseException) -> dict | None:
    """Where the function `gpu_memory_unknown` names looks `get_device_memory_capacity` up (its
    module's globals), for the launch resolution to answer it as a GPU would (gpu_memory.py);
    None when `exc` is not that limit."""
    found = _unanswered(exc)
    return None if found is None else found[0].tb_frame.f_globals


def _unanswered(exc: BaseException):
    """(the traceback entry, the local holding the query's answer) when `exc` is the TypeError of
    SGLang's own arithmetic on an unanswered memory query; else None."""
    if not isinstance(exc, TypeError):
        return None
    tb, _ = child.innermost(exc, "sglang")
    if tb is None:
        return None
    code, local = tb.tb_frame.f_code, None
    if MEMORY_QUERY not in code.co_names:
        return None
    instructions = list(dis.get_instructions(code))
    for i, instruction in enumerate(instructions):
        if instruction.opname == "LOAD_GLOBAL" and instruction.argval == MEMORY_QUERY:
            store = next((x for x in instructions[i + 1:] if x.opname.startswith("STORE_")), None)
            if store is not None and store.opname == "STORE_FAST":
                local = store.argval
    frame = tb.tb_frame
    if local is None or local not in frame.f_locals or frame.f_locals[local] is not None:
        return None
    return tb, local
