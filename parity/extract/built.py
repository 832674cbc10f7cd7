"""What a built draft's modules compute, read the same way on every side (docs/built-draft.md).

Run inside an extraction child (an engine's or a trainer's environment) on the draft that
side's own code built: the rotary frequencies its attention applies, the eps of its norms
and the activation of its MLP. Each reader looks at the module tree, not at the config
text, so a key the side never reads cannot show up as a value it uses.
"""

from __future__ import annotations

import math
from typing import Any

import torch


def sig6(x: float) -> float:
    """`x` to 6 significant digits (what both sides report, so their JSON compares)."""
    return float(f"{x:.6g}")


def _rotary(model: torch.nn.Module) -> torch.nn.Module | None:
    """The first rotary-embedding module: SGLang's and vLLM's hold a `cos_sin_cache`,
    transformers' (the trainers') an `inv_freq`."""
    for module in model.modules():
        if isinstance(getattr(module, "cos_sin_cache", None), torch.Tensor):
            return module
        if isinstance(getattr(module, "inv_freq", None), torch.Tensor):
            return module
    return None


@torch.no_grad()
def rope(model: torch.nn.Module) -> dict[str, Any]:
    """{"rope_frequencies", "rope_scale"} as the built rotary module applies them, or {} when
    the draft has none. Frequencies come from the table at position 1 (angle = frequency),
    sorted high to low; the scale is the table's magnitude (YaRN's mscale, else 1)."""
    module = _rotary(model)
    if module is None:
        return {}
    cache = getattr(module, "cos_sin_cache", None)
    if isinstance(cache, torch.Tensor):  # [positions, rotary_dim]: cos half, then sin half
        row = cache[1].double()
        half = row.shape[-1] // 2
        cos, sin = row[:half], row[half:]
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
