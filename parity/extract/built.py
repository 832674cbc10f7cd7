"""What a built draft's modules compute, read the same way on every side (docs/built-draft.md).

Run inside an extraction child (an engine's or a trainer's environment) on the draft that
side's own code built: the rotary frequencies its attention applies, the eps of its norms
and the activation of its MLP. Each reader looks at the module tree, not at the config
text, so a key the side never reads cannot show up as a value it uses.
"""

from __future__ import annotations

import contextlib
import copy
import math
from typing import Any, Callable, Iterable

import torch

from .child import jsonable
from .shrink import TOKEN_ID_KEYS


def sig6(x: float) -> float:
    """`x` to 6 significant digits (what both sides report, so their JSON compares)."""
    return float(f"{x:.6g}")


def _rotary(model: torch.nn.Module) -> torch.nn.Module | None:
    """The first rotary-embedding module: SGLang's and vLLM's hold a `cos_sin_cache`,
    transformers' (speculators') an `inv_freq`, SpecForge's both an `inv_freq` and the
    `cos_cached` / `sin_cached` tables its forward returns."""
    for module in model.modules():
        if isinstance(getattr(module, "cos_sin_cache", None), torch.Tensor):
            return module
        if isinstance(getattr(module, "inv_freq", None), torch.Tensor):
            return module
    return None


def _cached_tables(module: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(cos, sin) at position 1 from a module that applies precomputed `cos_cached` and
    `sin_cached` tables ([..., positions, rotary_dim], each cat(freqs, freqs): SpecForge's
    rotary classes, whose linear and YaRN variants scale positions or magnitudes only there)."""
    cos, sin = getattr(module, "cos_cached", None), getattr(module, "sin_cached", None)
    if not (isinstance(cos, torch.Tensor) and isinstance(sin, torch.Tensor)) or cos.shape[-2] < 2:
        return None
    half = cos.shape[-1] // 2
    return cos[..., 1, :half].reshape(-1).double(), sin[..., 1, :half].reshape(-1).double()


@torch.no_grad()
def rope(model: torch.nn.Module) -> dict[str, Any]:
    """{"rope_frequencies", "rope_scale"} as the built rotary module applies them, or {} when
    the draft has none. Frequencies come from the table at position 1 (angle = frequency),
    sorted high to low; the scale is the table's magnitude (YaRN's mscale, else 1)."""
    module = _rotary(model)
    if module is None:
        return {}
    cache = getattr(module, "cos_sin_cache", None)
    tables = _cached_tables(module)
    if isinstance(cache, torch.Tensor):  # [positions, rotary_dim]: cos half, then sin half
        row = cache[1].double()
        half = row.shape[-1] // 2
        cos, sin = row[:half], row[half:]
    elif tables is not None:  # what the module's forward returns: its tables, not inv_freq
        cos, sin = tables
    else:  # transformers: inv_freq [rotary_dim / 2], attention_scaling applied to cos and sin
        scale = float(getattr(module, "attention_scaling", 1.0) or 1.0)
        freq = module.inv_freq.double()
        cos, sin = torch.cos(freq) * scale, torch.sin(freq) * scale
    freqs = torch.atan2(sin, cos)
    mags = torch.hypot(sin, cos)
    return {"rope_frequencies": tuple(sig6(f) for f in sorted(freqs.tolist(), reverse=True)),
            "rope_scale": sig6(float(mags.mean()))}


def norm_eps(model: torch.nn.Module) -> float | None:
    """The eps of the built RMSNorms (the first one that has one; they share it in every
    draft class parity knows)."""
    for module in model.modules():
        if "norm" in type(module).__name__.lower():
            for attr in ("variance_epsilon", "eps", "epsilon"):
                value = getattr(module, attr, None)
                if isinstance(value, float) and not math.isnan(value):
                    return sig6(value)
    return None


def activation(model: torch.nn.Module) -> str | None:
    """The first MLP's activation, named by what it computes: 'silu', 'gelu', 'gelu_tanh',
    'relu', or its class name."""
    for name, module in model.named_modules():
        if name.endswith("act_fn") or name.endswith("act"):
            kind = type(module).__name__.lower()
            approximate = getattr(module, "approximate", "none")
            if "silu" in kind or "swish" in kind:
                return "silu"
            if "gelu" in kind:
                return "gelu_tanh" if approximate == "tanh" or "tanh" in kind else "gelu"
            if "relu" in kind:
                return "relu"
            return type(module).__name__
    return None


@torch.no_grad()
def seeded(model: torch.nn.Module, seed: int = 3) -> torch.Generator:
    """Every parameter of `model` drawn from a seeded normal (x 0.1), so each of its norms scales
    differently and a forward's tensors can be told apart by value; returns the generator, for
    the forward's inputs."""
    gen = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        p.copy_(0.1 * torch.randn(p.shape, generator=gen))
    return gen


def _output(out: Any) -> torch.Tensor:
    return out if torch.is_tensor(out) else out[0]  # a fused norm returns (normed, residual)


@torch.no_grad()
def later_layer_input_norms(layers: list[torch.nn.Module], forward) -> tuple[str, ...]:
    """For each decoder layer after the first, in order: the name of the norm module of that
    layer (a child whose name holds "norm") whose output its attention (`self_attn`) reads, found
    by value on one run of `forward()` (the side's own forward of its built draft, its
    parameters `seeded`): 'none' when no norm of the layer produced it, the names joined with
    '+' when several did. A one-layer draft: () and nothing runs. Only each module's first call
    counts (a TTT loop runs the layers again)."""
    later = list(layers)[1:]
    if not later:
        return ()
    attn_in: dict[int, list[torch.Tensor]] = {}
    norm_out: dict[int, dict[str, torch.Tensor]] = {i: {} for i in range(len(later))}

    def took(i, module, args, kwargs):
        if i not in attn_in:  # its hidden states by keyword (every engine's layer), else every tensor argument
            given = [kwargs["hidden_states"]] if torch.is_tensor(kwargs.get("hidden_states")) else list(args)
            attn_in[i] = [a.detach().clone() for a in given if torch.is_tensor(a) and a.is_floating_point()]

    def gave(i, name, module, args, out):
        norm_out[i].setdefault(name, _output(out).detach().clone())

    hooks = []
    for i, layer in enumerate(later):
        hooks.append(layer.self_attn.register_forward_pre_hook(
            lambda m, a, k, i=i: took(i, m, a, k), with_kwargs=True))
        for name, child in layer.named_children():
            if "norm" in name.lower():
                hooks.append(child.register_forward_hook(lambda m, a, o, i=i, name=name: gave(i, name, m, a, o)))
    try:
        forward()
    finally:
        for h in hooks:
            h.remove()
    found = []
    for i in range(len(later)):
        if i not in attn_in:
            raise LookupError(f"the attention of decoder layer {i + 1} never ran in the draft's forward")
        names = sorted(n for n, out in norm_out[i].items()
                       if any(x.shape == out.shape and torch.allclose(x, out) for x in attn_in[i]))
        found.append("+".join(names) if names else "none")
    return tuple(found)


def module_facts(model: torch.nn.Module, embed: torch.nn.Module | None, head: torch.nn.Module | None
                 ) -> dict[str, Any]:
    """The facts read off a built draft: rope, eps, activation, and whether its lm_head is
    its own token embedding."""
    facts: dict[str, Any] = {**rope(model), "rms_norm_eps": norm_eps(model), "hidden_act": activation(model)}
    if embed is not None and head is not None:
        facts["lm_head_tied"] = head is embed or getattr(head, "weight", None) is getattr(embed, "weight", 0)
    return facts


def plain_rope_scaling(value: Any) -> dict[str, Any] | None:
    """A config's rope scaling as plain JSON, None for none or the default type (transformers 5
    writes `{"rope_type": "default", "rope_theta": ...}` for an unscaled rope); the base is
    shown on its own (rope_theta)."""
    if not isinstance(value, dict):
        return None
    kind = value.get("rope_type", value.get("type", "default"))
    if kind in (None, "default"):
        return None
    plain = {str(k): (v if isinstance(v, (bool, int, float, str)) or v is None else str(v))
             for k, v in value.items() if k not in ("rope_theta", "type")}
    plain["rope_type"] = kind
    return plain


def max_token_id(d2t: torch.Tensor | None, mapping: str | None, draft_vocab_size: int | None) -> int | None:
    """The largest target token id the draft can emit, by the side's own mapping of a draft
    index (`mapping`: "offsets", speculators' d2t as the engines read it, target id = d + d2t[d];
    "absolute", target id = d2t[d]); with no d2t table, the draft index itself (its lm_head's
    last row). None: the side's mapping is not known."""
    if d2t is not None and d2t.numel():
        table = d2t.long().reshape(-1)
        if mapping == "offsets":
            return int((torch.arange(table.numel()) + table).max())
        if mapping == "absolute":
            return int(table.max())
        return None
    return draft_vocab_size - 1 if draft_vocab_size else None


def checkpoint_d2t(draft_dir: str) -> tuple[bool, torch.Tensor | None]:
    """(whether the draft directory holds safetensors at all, its d2t tensor or None)."""
    from pathlib import Path

    from safetensors import safe_open

    files = sorted(Path(draft_dir).glob("*.safetensors"))
    for f in files:
        with safe_open(str(f), framework="pt") as fh:
            for name in fh.keys():
                if name.split(".")[-1] == "d2t":
                    return True, fh.get_tensor(name)
    return bool(files), None


def plain(value: Any) -> Any:
    """A config value as plain JSON: a dict key by key, the rest as `jsonable` gives it."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return jsonable(value)


SIZE_KEYS = ("vocab_size", "draft_vocab_size", "hidden_size", "target_hidden_size", "num_hidden_layers",
             "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size",
             "max_position_embeddings", "rope_theta")


def hf_sizes(hf: Any) -> dict[str, Any]:
    """The BuiltDraft sizes an HF-style draft config object holds, with the EAGLE-3 draft
    classes' common defaults (draft_vocab_size: vocab_size; target_hidden_size: hidden_size;
    head_dim: hidden_size / heads) and the rope as transformers 5 keeps it (rope_parameters).
    A side whose class takes another default overrides the field after this."""
    built: dict[str, Any] = {k: plain(getattr(hf, k, None)) for k in SIZE_KEYS}
    if built["draft_vocab_size"] is None:
        built["draft_vocab_size"] = built["vocab_size"]
    if built["target_hidden_size"] is None:
        built["target_hidden_size"] = built["hidden_size"]
    if built["head_dim"] is None and built["hidden_size"] and built["num_attention_heads"]:
        built["head_dim"] = built["hidden_size"] // built["num_attention_heads"]
    rope_parameters = getattr(hf, "rope_parameters", None)
    if isinstance(rope_parameters, dict):
        built["rope_theta"] = built["rope_theta"] or plain(rope_parameters.get("rope_theta"))
    built["rope_scaling"] = plain_rope_scaling(getattr(hf, "rope_scaling", None) or rope_parameters)
    return built


def dtype_name(dtype: Any) -> str | None:
    return str(dtype).removeprefix("torch.") if dtype is not None else None


# -- config keys read for training only (docs/built-draft.md, "Config keys read") --------------

# The forwards that decide: the first runs every token of the tiny vocabulary once (at most this
# many positions); the second, for the keys the first finds the same, runs past every length the
# tiny config holds (a window), up to LONG_POSITIONS.
MAX_POSITIONS = 512
LONG_POSITIONS = 4096


def _without(config: dict, key: str, nested: tuple[str, ...]) -> dict:
    """A copy of `config` without `key`, removed where it sits: at the top level and in each
    nested config named in `nested` (speculators' transformer_layer_config, whose keys are spelled
    bare)."""
    out = copy.deepcopy(config)
    out.pop(key, None)
    for name in nested:
        if isinstance(out.get(name), dict):
            out[name].pop(key, None)
    return out


def _places(config: dict, key: str, nested: tuple[str, ...]) -> list[tuple[str | None, Any]]:
    """Where `key` sits in `config`: (None for the top level, else the nested config's name; its value)."""
    found = [(None, config[key])] if key in config else []
    found += [(name, config[name][key]) for name in nested
              if isinstance(config.get(name), dict) and key in config[name]]
    return found


def _integers(value: Any) -> list[int]:
    """Every integer `value` holds (a list's, a dict's values', at any depth), booleans left out."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, (list, tuple)):
        return [n for v in value for n in _integers(v)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _integers(v)]
    return []


def _decidable(key: str, real: dict, tiny: dict, nested: tuple[str, ...], positions: int) -> bool:
    """Whether forwards of the tiny build over up to `positions` positions can show all that `key`
    changes: the tiny copy holds it at every place the real config does, with the real value (a
    width the shrink changed is tried at another value than the one written: a real `head_dim`
    other than hidden / heads is, shrunk, hidden / heads), or, for a token id the shrink keeps
    inside the tiny vocabulary (`shrink.TOKEN_ID_KEYS`), a value inside it; and no integer it holds
    reaches past the positions run (a window, a context length or a token id past them could act
    only where no forward looks). Such a key can still be found to matter; it is never found to be
    read for training only."""
    where_real, where_tiny = _places(real, key, nested), dict(_places(tiny, key, nested))
    if not where_real:
        return False
    for place, value in where_real:
        if place not in where_tiny:
            return False  # dropped by the shrink (a quantisation config)
        held = where_tiny[place]
        if held != value and key not in TOKEN_ID_KEYS:
            return False
        if any(n < 0 or n >= positions for n in _integers(held)):
            return False
    return True


def _tensors(value: Any) -> list[torch.Tensor]:
    """Every tensor in a forward's result (tuples, lists, dicts and model outputs, in order)."""
    if torch.is_tensor(value):
        return [value.detach().clone()]
    if isinstance(value, dict) or hasattr(value, "to_tuple"):
        values = value.values() if isinstance(value, dict) else value.to_tuple()
        return [t for v in values for t in _tensors(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


Run = Callable[[torch.nn.Module, torch.Generator, int], Any]


def _eager():
    """Compiled functions run eagerly (SpecForge 0.2.0's RMSNorm is `torch.compile`d: compiling it
    on a CPU took 30 s here, the whole decision otherwise 1 s). Both builds of a key run so, so
    what they compute compares like for like."""
    stance = getattr(torch.compiler, "set_stance", None)  # torch 2.6 on
    return stance("force_eager") if stance is not None else contextlib.nullcontext()


@torch.no_grad()
def _computed(model: torch.nn.Module, run: Run, positions: int, seed: int) -> list[torch.Tensor]:
    """What one `run` of `model` over `positions` positions, on inputs drawn from `seed`, computes:
    the output of every module on every call, in call order (a TTT loop's steps each), then the
    run's own result."""
    seen: list[torch.Tensor] = []
    hooks = [m.register_forward_hook(lambda mod, args, out: seen.extend(_tensors(out))) for m in model.modules()]
    try:
        with _eager():
            result = run(model, torch.Generator().manual_seed(seed), positions)
    finally:
        for hook in hooks:
            hook.remove()
    return seen + _tensors(result)


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    """Bit for bit: the same code on the same weights and inputs, on one CPU, computes exactly the
    same (no tolerance: a key that changes anything, however little, changes the draft)."""
    return len(a) == len(b) and all(x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)
                                    for x, y in zip(a, b))


def _buffers(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    return [(name, b.detach().clone()) for name, b in model.named_buffers()]


def _same_buffers(a: list[tuple[str, torch.Tensor]], b: list[tuple[str, torch.Tensor]]) -> bool:
    return [n for n, _ in a] == [n for n, _ in b] and _same([t for _, t in a], [t for _, t in b])


def every_token(vocab: int, positions: int, gen: torch.Generator) -> torch.Tensor:
    """[1, positions] token ids: the tiny vocabulary's `vocab` tokens in seeded orders, one after
    another (each token once in the first `vocab` positions)."""
    orders = [torch.randperm(vocab, generator=gen) for _ in range(-(-positions // vocab))]
    return torch.cat(orders)[:positions][None]


def training_only_keys(build: Callable[[dict], torch.nn.Module], run: Run, real: dict, tiny: dict,
                       keys: Iterable[str], vocab: int, nested: tuple[str, ...] = (), seed: int = 7
                       ) -> tuple[str, ...] | None:
    """Of `keys` (config keys a side read while building the draft, off their default), those read
    for training only (initialisation, the padding row of an embedding the checkpoint holds,
    dropout): the draft the side builds from `tiny` (the shrunk copy of `real`, the config.json as
    written) and the one it builds from `tiny` without the key (removed where it sits, `nested`)
    compute exactly the same, given the same weights. `build`: the side's own config reading and
    draft class, config dict -> draft module; `run(model, generator, positions)`: its own forward
    of that module on one sequence of that many positions, inputs drawn from the generator
    (`every_token` of the `vocab` rows of its token embedding).

    The first build's parameters are seeded (`seeded`) and are its checkpoint (`state_dict`: the
    parameters and the persistent buffers, a d2t table; a rotary table is computed from the
    config, never loaded); the second must take them strictly (a tensor more, less or of another
    shape: the key matters), its buffers before loading must be the first's (a rotary table of
    another length or base), and every module's output must be the same, bit for bit
    (`_computed`), first over every token of the vocabulary, then, for the keys still the same,
    over one position more than the largest integer the tiny config holds below LONG_POSITIONS (a
    sliding window of 2048 acts only past 2048 positions, whichever key turns it on). A key whose
    build or forward fails, or that no forward can show (`_decidable`), is not one: kept as read.
    None: the draft as written did not build or run here, nothing is decided."""
    short = min(vocab, MAX_POSITIONS)
    lengths = [n for n in _integers(tiny) if short <= n < LONG_POSITIONS]
    long = max(lengths) + 1 if lengths else None
    try:
        base = build(copy.deepcopy(tiny)).eval()
        seeded(base)
        checkpoint = {k: v.detach().clone() for k, v in base.state_dict().items()}
        buffers = _buffers(base)
        reference = _computed(base, run, short, seed)
        long_reference = _computed(base, run, long, seed) if long else None
    except Exception:  # noqa: BLE001 - the side's own code refuses its own draft here: nothing decided
        return None
    found = []
    for key in keys:
        if not _decidable(key, real, tiny, nested, long or short):
            continue
        try:
            other = build(_without(tiny, key, nested)).eval()
            if not _same_buffers(_buffers(other), buffers):
                continue
            other.load_state_dict(checkpoint, strict=True)
            if _same(_computed(other, run, short, seed), reference) and (
                    long_reference is None or _same(_computed(other, run, long, seed), long_reference)):
                found.append(key)
        except Exception:  # noqa: BLE001 - it does not build or run without the key: it matters, or cannot tell
            continue
    return tuple(sorted(found))
