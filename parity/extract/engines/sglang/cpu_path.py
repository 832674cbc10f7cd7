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

And one that is parity's, `requirement_not_installed`: a model module that imports a package the
release requires but parity's CPU environment leaves out (its CUDA-only requirements): SGLang
0.5.15's DeepSeek module imports `cutlass`, from `nvidia-cutlass-dsl`, which its wheel requires.
"""

from __future__ import annotations

import inspect
import re

import torch

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
    top-level module that is not installed and one of `requires` (the installed SGLang's
    `Requires-Dist`, unconditional ones only) is a distribution that is not installed either and
    whose name has the module's as one of its words (`cutlass` in `nvidia-cutlass-dsl`): the
    release requires it and parity's environment lacks it. None otherwise (the engine's own
    import of something it does not require stays its own)."""
    import importlib.util
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    name = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    if not name:
        return None
    top = name.split(".")[0]
    if importlib.util.find_spec(top) is not None:
        return None
    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if top.lower() not in re.split(r"[-_.]", req.name.lower()):
            continue
        try:
            metadata.version(req.name)
        except metadata.PackageNotFoundError:
            return (f"its model code imports {top!r}, from {req}, which sglang {version} requires and parity's CPU "
                    f"environment does not install ({type(exc).__name__}: {exc})")
    return None
