"""A trained draft's checkpoint in the form an engine's draft class loads it.

Two differences are found by the serving extraction on the installed engine's own
`load_weights` (`ServingContract.checkpoint_renames` and `.checkpoint_zero_biases`) and
applied here, by `parity export` to the files it writes and by `parity forward` to the
served form it runs:

- a decoder layer loaded under another name (SGLang before 0.5.11 names the draft's one
  layer `midlayer`, speculators saves it as `layers.0`): each prefix renamed;
- a bias the engine's layer has and the trained draft's does not (SGLang 0.4.8.post1 builds
  the draft's `fc` with a bias, speculators' has none): written as zeros, which is exactly the
  layer training ran, where left out it would keep its random initial value. Only a bias is
  ever filled this way: a zero is its one value that means "no bias".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def rename_tensor(name: str, renames: dict[str, str]) -> str:
    """A checkpoint tensor's name as the engine loads it: the first prefix of `renames` it starts
    with replaced."""
    old = next((o for o in renames if name.startswith(o)), None)
    return name if old is None else renames[old] + name[len(old):]


def bias_weight(bias: str) -> str:
    """The weight of the layer a bias belongs to ('fc.bias' -> 'fc.weight')."""
    return bias[: -len("bias")] + "weight"


def served_tensors(tensors: dict[str, "torch.Tensor"], renames: dict[str, str],
                   zero_biases: tuple[str, ...] | list[str] = ()) -> dict[str, "torch.Tensor"]:
    """`tensors` renamed, plus a zero bias (one per output row of its layer's weight, in the
    weight's dtype) for each name in `zero_biases` whose layer's weight is among them (names
    as the engine loads them; a sharded checkpoint gets each bias in its weight's shard)."""
    import torch

    out = {rename_tensor(n, renames): t for n, t in tensors.items()}
    for bias in zero_biases:
        weight = out.get(bias_weight(bias))
        if weight is not None:
            out[bias] = torch.zeros(weight.shape[0], dtype=weight.dtype)
    return out
