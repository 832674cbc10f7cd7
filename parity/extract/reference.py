"""The transformers reference: every canonical state of the target, computed independently.

The engine's captured tensors are identified by numerical identity against these, so
the serving contract never trusts the engine's own idea of what it captured.
"""

from __future__ import annotations

import torch

from ..contract.tap import Norm, Tap


# Where a published multimodal wrapper's checkpoint keeps its text model: Kimi-K2.5's and
# Llama-4's safetensors name the text weights `language_model.model.*` and
# `language_model.lm_head.*` (the causal LM's names under this prefix), which is what the
# engine's wrapper `load_weights` reads (SGLang strips the prefix and hands the rest to its
# text model). A wrong prefix cannot pass silently: the text weights would stay unloaded
# and no captured state would match the reference.
WRAPPER_TEXT_PREFIX = "language_model."


def seeded_hf_model(config_dir: str, seed: int) -> torch.nn.Module:
    """The transformers implementation of the architecture, with seeded random weights.

    For a wrapper config (Kimi-K2.5, Llama-4) this is transformers' causal LM of its text
    config (`get_text_config()`): the draft reads the text model's hidden states, and the
    vision tower takes no part in a text-only forward.

    Weights are drawn wider than a real init (std 0.1, norms around 1) so that
    neighbouring residual states differ clearly and identification is unambiguous.
    """
    import transformers
    from packaging.version import Version
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(config_dir).get_text_config(decoder=True)
    # transformers 4.56 renamed `torch_dtype` to `dtype` (older SGLang releases pin 4.5x)
    dtype_kw = "dtype" if Version(transformers.__version__) >= Version("4.56") else "torch_dtype"
    model = AutoModelForCausalLM.from_config(config, **{dtype_kw: torch.float32}).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=gen)
            param.copy_(1 + 0.1 * noise if "norm" in name else 0.1 * noise)
        for name, buf in model.named_buffers():
            if "e_score_correction_bias" in name:  # DeepSeek router bias: a weight, not a cache
                buf.copy_(0.1 * torch.randn(buf.shape, generator=gen))
    return model


def checkpoint_tensors(model: torch.nn.Module, out_dir: str, prefix: str = "") -> dict[str, torch.Tensor]:
    """The model's weights as a checkpoint on disk names them (transformers' save_pretrained
    converts its in-memory layout, e.g. fused MoE experts, back to the checkpoint's), which
    is what an engine's load_weights is written to read. `prefix`: where a wrapper's
    checkpoint keeps the text model (WRAPPER_TEXT_PREFIX)."""
    from safetensors.torch import load_file
    from pathlib import Path

    model.save_pretrained(out_dir, safe_serialization=True)
    tensors: dict[str, torch.Tensor] = {}
    for f in sorted(Path(out_dir).glob("*.safetensors")):
        tensors.update((prefix + k, v) for k, v in load_file(str(f)).items())
    return tensors


def _decoder(model: torch.nn.Module):
    inner = model.model
    return inner, inner.layers, inner.norm


@torch.no_grad()
def candidate_states(model: torch.nn.Module, input_ids: torch.Tensor) -> dict[Tap, torch.Tensor]:
    """Every tap of the model on `input_ids` [T] -> {Tap: [T, H]}.

    h0..hN (residual stream), final, hK.delta (layer K-1's MLP output before its
    residual add), hK.normed (final norm of hK), hK.ln (layer K's input_layernorm of hK).
    """
    inner, layers, norm = _decoder(model)
    n = len(layers)
    streams: dict[int, torch.Tensor] = {}
    deltas: dict[int, torch.Tensor] = {}
    lns: dict[int, torch.Tensor] = {}
    hooks = []
    for i, layer in enumerate(layers):
        hooks.append(layer.register_forward_hook(
            lambda mod, args, out, i=i: streams.__setitem__(i + 1, (out[0] if isinstance(out, tuple) else out)[0])))
        hooks.append(layer.mlp.register_forward_hook(
            lambda mod, args, out, i=i: deltas.__setitem__(i + 1, (out[0] if isinstance(out, tuple) else out)[0])))
        hooks.append(layer.input_layernorm.register_forward_hook(
            lambda mod, args, out, i=i: lns.__setitem__(i, out[0])))
    hooks.append(inner.embed_tokens.register_forward_hook(
        lambda mod, args, out: streams.__setitem__(0, out[0])))
    try:
        out = model(input_ids[None], output_hidden_states=True)
    finally:
        for h in hooks:
            h.remove()

    taps: dict[Tap, torch.Tensor] = {}
    for k in range(n + 1):
        taps[Tap.stream(k)] = streams[k]
        taps[Tap(kind="stream", layer=k, norm=Norm.final)] = norm(streams[k][None])[0]
        if k in deltas:
            taps[Tap(kind="stream", layer=k, residual=False)] = deltas[k]
        if k in lns:
            taps[Tap(kind="stream", layer=k, norm=Norm.input)] = lns[k]
    final = out.hidden_states[-1][0]  # transformers: the last entry is post-norm
    taps.pop(Tap(kind="stream", layer=n, norm=Norm.final))
    taps[Tap.final()] = final
    return taps


def seeded_tokens(request: dict, hf) -> torch.Tensor:
    """The probe's input: `seq_len` token ids of the model's vocabulary, seeded by `seed`."""
    gen = torch.Generator().manual_seed(request.get("seed", 0) + 1)
    return torch.randint(0, hf.config.vocab_size, (request.get("seq_len", 8),), generator=gen)
