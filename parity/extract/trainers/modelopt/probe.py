"""Run the installed NVIDIA ModelOpt's EAGLE-3 training path on a tiny seeded target; print what it trains on.

    python -m parity.extract.trainers.modelopt.probe  < request.json

Runs in the environment of the ModelOpt release. The request is {"target_config": {...},
"draft_config": "PATH/config.json" | null, "run_ids": [..] | null, "seq_len": 8, "seed": 0,
"built": {"from": ...} | absent}. The steps, each ModelOpt's own code (families/): a seeded
transformers model of the target (shrunk widths, the target's depth) converted by ModelOpt to
its EAGLE-3 training model with the run's ids (the override, else the ids the draft's config
records, else ModelOpt's default) and the draft's widths; one forward; the concatenation its
hooks hand the draft's fc and the state its loss target's logits come from, each named by
numerical identity against transformers; the token the draft reads at a position, off its
embedding's input; its exporter run on the model it built (what it writes over the rope); the
draft module it built (parity.contract.BuiltDraft: what its modules compute).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from .families import family_for
from .reply import ModelOptReply
from ...built import module_facts, plain_rope_scaling, rope
from ...child import Answered, one_line, place_family, refused_by, run_steps, warm_family, with_limits
from ...identify import identify_slots, named_target
from ...reference import candidate_states, seeded_hf_model, seeded_tokens
from ...shrink import shrink_draft_config, shrunk_target_dir
from ....contract.reply import reply_header
from ....envs import reply_over_stdio

DIST = "nvidia-modelopt"
# The draft widths a run gives ModelOpt's architecture config, read from the served draft's config
# (shrunk as every side's build is): what the export writes is what the run trained with.
ARCH_KEYS = ("num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size", "hidden_act",
             "rms_norm_eps", "rope_theta", "num_hidden_layers")


def warm() -> None:
    """The import-only first steps of `extract` (parity.forkserver): the family and its modules."""
    warm_family(DIST, family_for)


@dataclass
class _Run:
    """What the steps of one extraction share: the request, the reply being written, and what
    each step found for the next."""

    request: dict
    reply: dict
    version: str
    family: Any = None
    work: Path | None = None
    target_dir: Path | None = None
    draft: dict | None = None  # the served draft's config.json, as written
    arch: dict | None = None  # the draft's widths, shrunk, as the run gives them to ModelOpt
    input_ids: Any = None
    refs: Any = None  # every canonical state of the reference model
    model: Any = None  # ModelOpt's EAGLE-3 training model
    n: int = 0

    @property
    def findings(self) -> list:
        return self.reply["findings"]


def extract(request: dict) -> dict[str, Any]:
    """The training contract's material, step by step (a step that completes the reply early
    raises Answered)."""
    version = metadata.version(DIST)
    run = _Run(request=request, reply={**reply_header(version), "findings": []}, version=version)
    return run_steps(run, _place, _inputs, _capture, _alignment, _export, _built)


def _place(run: _Run) -> None:
    """The release's family, its imports checked here."""
    place_family(run, DIST, "modelopt", family_for)


def _inputs(run: _Run) -> None:
    """The shrunk target, the reference's states on seeded tokens, the draft's widths."""
    request = run.request
    torch.manual_seed(request.get("seed", 0))
    run.work, run.target_dir = shrunk_target_dir(request["target_config"], "parity-modelopt-")
    hf = seeded_hf_model(str(run.target_dir), request.get("seed", 0))
    run.n = hf.config.num_hidden_layers
    run.input_ids = seeded_tokens(request, hf)
    run.refs = candidate_states(hf, run.input_ids)
    path = request.get("draft_config")
    run.draft = json.loads(Path(path).read_text()) if path else None
    tiny = shrink_draft_config(run.draft) if run.draft else None
    config = hf.config
    heads = config.num_attention_heads
    run.arch = {"num_attention_heads": heads, "num_key_value_heads": config.num_key_value_heads,
                "head_dim": config.hidden_size // heads, "intermediate_size": config.intermediate_size}
    if tiny is not None:  # the widths the run trained with, as its export records them
        run.arch.update({k: tiny[k] for k in ARCH_KEYS if tiny.get(k) is not None})


def _draft_ids(draft: dict | None) -> list[int] | None:
    """The aux ids the draft's config records (ModelOpt's export writes the run's, as given)."""
    nested = (draft or {}).get("eagle_config")
    ids = nested.get("eagle_aux_hidden_state_layer_ids") if isinstance(nested, dict) else None
    return list(ids) if isinstance(ids, list) and ids else None


_RELEASE_DEFAULT = object()  # `converted`'s rope: the release's default


def converted(run: _Run, rope_scaling: Any = _RELEASE_DEFAULT):
    """ModelOpt's EAGLE-3 training model of a fresh seeded target (the reference's weights), with
    the run's ids and the draft's widths (`rope_scaling`: the draft trained with that rope, None
    the default rope; left out, the release's default)."""
    model = seeded_hf_model(str(run.target_dir), run.request.get("seed", 0))
    ids = run.request.get("run_ids")
    ids = _draft_ids(run.draft) if ids is None else ids
    arch = {**run.arch, **({} if rope_scaling is _RELEASE_DEFAULT else {"rope_scaling": rope_scaling})}
    return run.family.mode(run.family.convert(model, ids, arch))


def trained_rope(model) -> dict | None:
    """The rope_scaling ModelOpt's training model `model` trains its draft with (None: the default rope)."""
    return plain_rope_scaling(getattr(model.eagle_config, "rope_scaling", None))


def _capture(run: _Run) -> None:
    """The run's ids as ModelOpt resolves them; one forward of its training model; the fc input
    its hooks gather and the state its loss target's logits come from, named."""
    reply, family = run.reply, run.family
    try:
        run.model = model = converted(run)
    except Exception as exc:  # noqa: BLE001 - its own conversion refuses the run
        refused_by(run, "modelopt", exc)
    reply["ids"] = ids = family.resolved_ids(model)
    seen: dict[str, Any] = {}
    hooks = [family.fc(model).register_forward_pre_hook(lambda m, a: seen.setdefault("fc", a[0].detach())),
             family.lm_head(model).register_forward_pre_hook(lambda m, a: seen.setdefault("head", a[0].detach()))]
    try:
        with torch.no_grad():
            model(input_ids=run.input_ids[None])
    except Exception as exc:  # noqa: BLE001 - its own forward refuses the run's ids (an id no layer has)
        refused_by(run, "modelopt", exc)
    finally:
        for hook in hooks:
            hook.remove()
    if "fc" not in seen:
        reply["error"] = f"modelopt {run.version}'s draft fc was never run on the forward"
        raise Answered
    reply["fc"] = identify_slots(seen["fc"][0].float(), run.refs, run.n, ids, len(ids), run.findings)
    # the base logits it trains the draft to match: the state its lm_head reads
    reply["target"] = target = named_target(seen["head"][0].float(), run.refs, run.findings,
                                            "the state the loss target's logits come from")
    reply["target_normed_by_trainer"] = False  # the base model's own lm_head on its own output
    reply["target_norm_evidence"] = (f"the loss target is the base model's own logits: its lm_head's input is "
                                     f"{target['tap'] or '?'} (identified), no norm of training's")


def _alignment(run: _Run) -> None:
    """Which token the draft reads beside the states of a position: its embedding's input on the
    forward, against the tokens the base model read."""
    model, t = run.model, run.input_ids.shape[0]
    marks = torch.arange(t)[None] % model.config.vocab_size  # a distinct token at each position
    calls: list[torch.Tensor] = []
    embed = model.get_input_embeddings()
    hook = embed.register_forward_pre_hook(lambda m, a: calls.append(a[0].detach().clone()))
    try:
        with torch.no_grad():
            model(input_ids=marks)
    finally:
        hook.remove()
    drafted = next((c for c in calls[1:] if c.shape == marks.shape), None)
    shift = next((s for s in range(t) if drafted is not None and torch.equal(drafted[0, :t - s], marks[0, s:])), None)
    run.reply["alignment"] = (f"the draft at position t reads the states at t and the token at t+{shift} (its "
                              f"embedding's input on the forward); its loss target at t is the base model's "
                              f"distribution at t+{shift}" if shift is not None else
                              "the draft's token input could not be aligned with the base model's")


def _export(run: _Run) -> None:
    """Its exporter on the model it trained (the release's default rope): the ids and rope_scaling
    it writes, and whether that rope is another than the one the draft trained with. A release
    with no exporter in its package writes nothing."""
    out = Path(tempfile.mkdtemp(prefix="export-", dir=run.work))
    if not run.family.export(run.model, str(out)):
        return
    written = json.loads((out / "config.json").read_text())
    rope = written.get("rope_scaling")
    run.reply["exported"] = {"ids": _draft_ids(written), "rope_scaling": rope,
                             "rope_overrides": plain_rope_scaling(rope) != trained_rope(run.model),
                             "architectures": written.get("architectures")}


def _built(run: _Run) -> None:
    """The draft module ModelOpt built (BuiltDraft: what its modules compute at tiny widths), with
    the rope it trained with: the served config's, unless that is the rope its exporter writes over
    another one (then the run's own); a model is converted again where that is not the rope the
    run's model was converted with."""
    if not run.request.get("built"):
        return
    served = (run.draft or {}).get("rope_scaling")
    exported = run.reply.get("exported") or {}
    overridden = exported.get("rope_overrides") and plain_rope_scaling(served) == plain_rope_scaling(
        exported.get("rope_scaling"))
    trained = trained_rope(run.model) if overridden else plain_rope_scaling(served)
    try:
        model = run.model if trained == trained_rope(run.model) else converted(run, served)
        draft = run.family.draft(model)
        if model is not run.model:  # its rotary module may be made on the first forward (run.model's ran)
            with torch.no_grad():
                model(input_ids=run.input_ids[None])
        built: dict[str, Any] = module_facts(draft, None, getattr(draft, "lm_head", None))
        built.update(rope(run.family.rotary(model, draft)))
        built["rope_theta"] = getattr(draft.config, "rope_theta", None) or (run.draft or {}).get("rope_theta")
        built["rope_scaling"] = trained  # None: the default rope it trained with
        built["layers_built"] = len(draft.layers)
        if built["layers_built"] == 1:
            built["later_layer_input_norms"] = ()
        built["built_by"] = f"modelopt {run.version} {type(draft).__name__}"
        built["config_from"] = (f"{run.request['built'].get('from', 'the served config.json')} (its widths as the "
                                f"run's eagle_architecture_config; rope: "
                                + ("the run's own, which its exporter overwrote)" if overridden
                                   else "as the config holds it)"))
        run.reply["built"] = built
    except Exception as exc:  # noqa: BLE001 - a finding: this side's built draft is not compared
        run.reply["built_error"] = one_line(exc)


def main() -> None:
    reply_over_stdio(ModelOptReply.checked(with_limits(extract, "modelopt", DIST)))


if __name__ == "__main__":
    raise SystemExit(main())
