"""Whether SGLang built the target's rotary embeddings with the rope theta its config gives.

A captured state that matches no state of the model can be the engine's own: SGLang 0.5.6.post1
pins transformers 5.0.0rc0, whose config objects keep the rope theta only in
`config.rope_parameters["rope_theta"]` (no `rope_theta` attribute), while its model code reads
`getattr(config, "rope_theta", 10000)`: Llama-3.1 (500000), Qwen3 (1e6), DeepSeek-V3 and gpt-oss
are then served with a rotary base of 10000, another model than the checkpoint, on any hardware
(the code and the transformers it pins are the same on a GPU). 0.5.6.post2 pins transformers
4.57.1 again, whose configs have `rope_theta`.

`misread` compares the `base` of every rotary module of the engine's built model (a module
holding a `cos_sin_cache` buffer, SGLang's `RotaryEmbedding` and its subclasses) with the rope
theta of the target's config as the installed transformers reads it (`rope_theta`, else
`rope_parameters["rope_theta"]`), and says which differ, in the engine's terms. Nothing is
patched: the states stay unidentified; the finding says they are the engine's.
"""

from __future__ import annotations

import math


def config_rope_theta(config) -> tuple[float, str] | None:
    """(the rope theta of `config`, where it is) or None when it names none."""
    theta = getattr(config, "rope_theta", None)
    if isinstance(theta, (int, float)):
        return float(theta), "rope_theta"
    params = getattr(config, "rope_parameters", None)
    if isinstance(params, dict) and isinstance(params.get("rope_theta"), (int, float)):
        return float(params["rope_theta"]), "rope_parameters['rope_theta']"
    return None


def rotary_bases(model) -> dict[str, float]:
    """{class name: base} of the model's rotary modules (each holding a `cos_sin_cache` buffer)."""
    found: dict[str, float] = {}
    for module in model.modules():
        base = getattr(module, "base", None)
        if "cos_sin_cache" in getattr(module, "_buffers", {}) and isinstance(base, (int, float)):
            found.setdefault(type(module).__name__, float(base))
    return found


def misread(model, config, arch: str, version: str) -> str | None:
    """Why the engine's model of `arch` is not the checkpoint's model, when its rotary modules' base
    differs from the rope theta `config` gives; None when they agree or either is unknown."""
    theta = config_rope_theta(config)
    bases = rotary_bases(model)
    if theta is None or not bases:
        return None
    value, where = theta
    wrong = {name: base for name, base in bases.items() if not math.isclose(base, value, rel_tol=1e-6)}
    if not wrong:
        return None
    from transformers import __version__ as transformers_version

    built = ", ".join(f"{name} with base {base:g}" for name, base in sorted(wrong.items()))
    attribute = "" if hasattr(config, "rope_theta") else "; the config object has no rope_theta attribute"
    return (f"sglang {version} builds {arch}'s rotary embeddings ({built}), while the target's config gives rope theta "
            f"{value:g} (config.{where} under transformers {transformers_version}, which it runs{attribute}): the "
            "engine computes another model than the checkpoint, on any hardware, so the states it captures are none "
            "of the model's")
