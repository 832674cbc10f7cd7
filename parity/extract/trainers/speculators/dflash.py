"""A DFlash draft on the training side, in the probe: what speculators' own DFlash model does with
the states its data path hands it.

A DFlash draft (`speculators_model_type` dflash, speculators 0.5 on) is trained through the same
data path as an EAGLE-3 one (the arrow directory, `ArrowDataset`, the collate), with the
preprocess the training CLI picks for `--speculator-type dflash` (the family says where that
choice lives: `dflash_preprocess(run)`). What the path hands over as `hidden_states`, the
DFlash model's forward feeds its `fc` (whose output, through `hidden_norm`, becomes the context of
every draft layer). Nothing is assumed about that step: `fc_chunk_order` builds the release's
own `DFlashDraftModel` at tiny widths, runs its forward on a `hidden_states` whose K chunks each
carry their index, and reads back, at `fc`'s input, which chunk lands where; the same forward
says whether the loss target passes through the verifier's final norm before its LM head.

Imports only torch, transformers and speculators (runs in any speculators environment).
"""

from __future__ import annotations

import inspect
import json
import tempfile
from pathlib import Path
from typing import Any

import torch

HIDDEN = 8  # tiny widths; the sequence holds three blocks of the draft's own block size


class _Stop(BaseException):  # BaseException: not swallowed by the model's own `except Exception`
    pass


def lacks_dflash(run) -> str | None:
    """Why this release trains no DFlash draft (None when it has one): its DFlash model class,
    looked up in the installed source where the family keeps it."""
    if run.look_up(run.family.DFLASH_MODEL) is None or run.look_up(run.family.DFLASH_CONFIG) is None:
        return (f"this trainer release has no DFlash: no {run.family.DFLASH_MODEL} (nor "
                f"{run.family.DFLASH_CONFIG}) in the installed source")
    return None


def draft_settings(run, draft: dict | None) -> dict[str, Any]:
    """The draft config as this release's own code reads it, for what a DFlash model is built with:
    {"config": its DFlashSpeculatorConfig (None: no draft given, the class's defaults), "from": how
    it was read}. A checkpoint in speculators' format is read by that class; the served (z-lab) form
    by the release's own `DFlashConverter` (0.7 on), which reads its block size and mask token as
    the conversion a trainer runs does; a release without the converter reads the served form with
    none of its code: its class's defaults, said so."""
    if draft is None:
        return {"config": None, "from": "no draft given: the config class's defaults"}
    config, config_cls, source = draft["config"], run.look_up(run.family.DFLASH_CONFIG), draft.get("from")
    if config.get("speculators_model_type") == "dflash":
        return {"config": config_cls.from_dict(dict(config)), "from": f"{config_cls.__name__}.from_dict",
                "source": source}
    converter = run.look_up(run.family.DFLASH_CONVERTER)
    if converter is None:
        return {"config": None, "source": source,
                "from": f"no {run.family.DFLASH_CONVERTER} in this release: the served form is read by none of "
                        "its code (the config class's defaults)"}
    with tempfile.TemporaryDirectory(prefix="parity-dflash-base-") as base:  # where it reads the verifier's config
        (Path(base) / "config.json").write_text(json.dumps(draft["target"]))
        read = converter()._build_config(dict(config), base, None)  # noqa: SLF001 - its reader of the served form
    return {"config": read, "source": source,
            "from": f"{converter.__name__}._build_config (the served config, converted as the trainer loads it)"}


def _model(run, num_fc: int, read: dict[str, Any] | None = None):
    """The release's DFlashDraftModel at tiny widths, built by its own constructor from its own config
    class, reading `num_fc` target states (aux_hidden_state_layer_ids 0..K-1: only their count matters
    to the model), with the block size and mask token of the draft config as the release read it
    (`draft_settings`; the class's own defaults where none was read)."""
    from transformers import Qwen3Config

    from speculators.config import SpeculatorsConfig, VerifierConfig
    from speculators.proposals.greedy import GreedyTokenProposalConfig

    model_cls, config_cls = run.look_up(run.family.DFLASH_MODEL), run.look_up(run.family.DFLASH_CONFIG)
    layer = Qwen3Config(hidden_size=HIDDEN, intermediate_size=16, num_attention_heads=2, num_key_value_heads=2,
                        head_dim=4, num_hidden_layers=1, vocab_size=32, max_position_embeddings=512)
    layer._attn_implementation = "eager"  # noqa: SLF001 - the CLI's --draft-attn-impl for hardware without flex
    spec = SpeculatorsConfig(algorithm="dflash", proposal_methods=[GreedyTokenProposalConfig()],
                             default_proposal_method="greedy",
                             verifier=VerifierConfig(name_or_path=None, architectures=[]))
    fields = getattr(config_cls, "model_fields", {})
    given = {"transformer_layer_config": layer, "draft_vocab_size": 32,
             "aux_hidden_state_layer_ids": list(range(num_fc)), "mask_token_id": 31, "speculators_config": spec,
             "max_anchors": 2}
    drafted = (read or {}).get("config")
    if drafted is not None:  # the draft's own block size (its mask token is a target id: past the tiny vocabulary)
        given["block_size"] = drafted.block_size
        ids = getattr(drafted, "aux_hidden_state_layer_ids", None)
        if ids:  # as many context states as the draft config names: a data path giving another count fails below
            given["aux_hidden_state_layer_ids"] = list(range(len(ids)))
    config = config_cls(**{k: v for k, v in given.items() if k in fields})
    torch.manual_seed(0)
    return model_cls(config).eval()


def built(run, model, read: dict[str, Any], version: str) -> dict[str, Any]:
    """The DFlash fields of parity.contract.BuiltDraft as this release built the draft: the block size
    its DFlashDraftModel holds (built from the draft config's, as read), the target states its fc
    projects (its input width over the target width) and the mask token its config reader holds."""
    drafted = read.get("config")
    return {"built_by": f"speculators {version} {type(model).__name__} ({read['from']})",
            "config_from": read.get("source") or "no draft config", "draft_kind": "dflash",
            "block_size": int(model.block_size) if drafted is not None else None,
            # sized from the draft config's ids as read; without a config, parity's own count: not reported
            "num_context_features": int(model.fc.in_features) // HIDDEN if drafted is not None else None,
            "mask_token_id": getattr(drafted, "mask_token_id", None)}


def _run_forward(model, chunks: torch.Tensor, target: torch.Tensor, seq: int) -> None:
    """The release's own DFlashDraftModel.forward (not compiled) on the marked chunks, with the
    arguments its signature takes, until a hook stops it."""
    forward = model.forward
    forward = getattr(forward, "_torchdynamo_orig_callable", forward)  # the release's own code, not compiled
    takes = inspect.signature(forward).parameters
    args: dict[str, Any] = {"hidden_states": chunks, "input_ids": torch.randint(0, 30, (1, seq)),
                            "loss_mask": torch.ones(1, seq, dtype=torch.long),
                            "verifier_last_hidden_states": target, "position_ids": torch.arange(seq)[None]}
    if "document_ids" in takes:
        args["document_ids"] = torch.zeros(1, seq, dtype=torch.long)
    if "lengths" in takes:
        args["lengths"] = torch.tensor([seq])
    if "max_anchors" in takes:
        args["max_anchors"] = 2
    bound = forward if hasattr(forward, "__self__") else forward.__get__(model)
    try:
        with torch.no_grad():
            bound(**{k: v for k, v in args.items() if k in takes or "kwargs" in takes})
    except _Stop:
        pass


def _head_normed(seen: dict[str, torch.Tensor], target: torch.Tensor, where: str) -> tuple[bool | None, str]:
    """Whether the verifier's LM head saw `target` normed by the verifier's final norm, read off
    what the hooks saw, and the evidence in words."""
    if "head_in" not in seen:
        return None, f"ran {where}.forward: it never called verifier_lm_head before its draft layers"
    if torch.equal(seen["head_in"], target):
        return False, f"ran {where}.forward: verifier_lm_head received verifier_last_hidden_states as is"
    if "norm_out" in seen and torch.equal(seen["head_in"], seen["norm_out"]) and seen["norm_in"].shape[-1] == HIDDEN:
        return True, f"ran {where}.forward: verifier_lm_head received verifier_norm(verifier_last_hidden_states)"
    return None, f"ran {where}.forward: verifier_lm_head received something else"


def fc_chunk_order(run, num_fc: int, read: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run the release's DFlashDraftModel.forward on a `hidden_states` [1, T, K*H] whose chunk k is
    all (k + 1): which input chunk its `fc` reads at each of its K positions (`order`), and whether
    its LM head sees the verifier's final norm of `verifier_last_hidden_states` (`normed`); the
    model built with the draft config as read (`draft_settings`) is returned too (`built_model`)."""
    model = _model(run, num_fc, read)
    seq = 3 * int(model.block_size)  # more than one block of the model's own block size
    fc = model.fc
    if fc.in_features != num_fc * HIDDEN:
        raise ValueError(f"{type(model).__name__}.fc takes {fc.in_features} features for {num_fc} target "
                         f"states of width {HIDDEN}: not K*H")
    seen: dict[str, torch.Tensor] = {}
    fc.register_forward_pre_hook(lambda m, i: seen.setdefault("fc_in", i[0].detach().clone()))
    norm, head = getattr(model, "verifier_norm", None), getattr(model, "verifier_lm_head", None)
    if norm is not None:
        norm.register_forward_hook(lambda m, i, o: seen.update(norm_in=i[0].detach(), norm_out=o.detach()))

    def stop(m, i):
        if m is head:
            seen["head_in"] = i[0].detach()
        raise _Stop

    if head is not None:
        head.register_forward_pre_hook(stop)
    model.layers[0].register_forward_pre_hook(stop)  # older releases never use the verifier's head
    chunks = torch.cat([torch.full((1, seq, HIDDEN), float(k + 1)) for k in range(num_fc)], dim=-1)
    target = torch.randn(1, seq, HIDDEN) * 3 + 1  # far from unit RMS
    _run_forward(model, chunks, target, seq)
    where = f"{type(model).__module__}.{type(model).__qualname__}"
    if "fc_in" not in seen:
        raise ValueError(f"{where}.forward never called its fc")
    fc_in = seen["fc_in"].reshape(-1, num_fc, HIDDEN)  # [R, K, H]
    order = []
    for k in range(num_fc):
        values = fc_in[:, k].unique()
        if values.numel() != 1 or not 1 <= values.item() <= num_fc or values.item() != int(values.item()):
            raise ValueError(f"{where}.forward fed its fc something other than the data path's chunks "
                             f"(fc chunk {k} holds {values.tolist()[:4]})")
        order.append(int(values.item()) - 1)
    normed, evidence = _head_normed(seen, target, where)
    return {"order": order, "model": where, "normed": normed, "evidence": evidence, "built_model": model}
