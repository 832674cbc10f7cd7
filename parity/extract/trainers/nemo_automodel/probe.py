"""Run the installed NVIDIA NeMo Automodel's EAGLE-3 training path on a tiny seeded target; print
what it trains on.

    python -m parity.extract.trainers.nemo_automodel.probe  < request.json

Runs in the environment of the NeMo Automodel release. The request is {"target_config": {...},
"run_ids": [..] | null, "seq_len": 8, "seed": 0, "built": {"from": ...} | absent, "offline":
{"manifest": "CACHE_DIR/manifest.json"} | absent}. The steps, each NeMo Automodel's own code
(families/): a seeded transformers model of the target (shrunk widths, the target's depth) wrapped
by its target class with the run's ids (None: its default); the draft its recipe builds; one
training step's forward (with "offline": its offline path, the run's ids those of the cache's
manifest: the sample its precompute caches, written and read back as its cache is, handed to
its trainer module); the concatenation the draft's fc is handed and the state the target's
logits (the loss target) come from, each named by numerical identity against transformers; the
shift of the batch's tokens, read off the batch; the draft it built (parity.contract.BuiltDraft: what
its modules compute).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import torch

from .families import family_for
from .reply import NemoAutomodelReply
from ...built import hf_sizes, module_facts
from ...child import one_line, place_family, refused_by, run_steps, warm_family, with_limits
from ...identify import identify_slots, named_target
from ...reference import candidate_states, seeded_hf_model, seeded_tokens
from ...shrink import shrunk_target_dir
from ....contract.reply import reply_header
from ....envs import reply_over_stdio

DIST = "nemo-automodel"


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
    work: Any = None
    target_dir: Any = None
    manifest: dict | None = None  # the offline cache's manifest, as its own reader reads it
    cached: Any = torch.float32  # the dtype the fc's states were stored in (the offline cache's)
    input_ids: Any = None
    refs: Any = None  # every canonical state of the reference model
    n: int = 0
    batch: Any = None
    draft: Any = None  # the draft its recipe built

    @property
    def findings(self) -> list:
        return self.reply["findings"]


def extract(request: dict) -> dict[str, Any]:
    """The training contract's material, step by step (a step that completes the reply early
    raises Answered)."""
    version = metadata.version(DIST)
    run = _Run(request=request, reply={**reply_header(version), "findings": []}, version=version)
    return run_steps(run, _place, _inputs, _cache, _capture, _alignment, _built)


def _place(run: _Run) -> None:
    """The release's family, its imports checked here."""
    place_family(run, DIST, "nemo_automodel", family_for)


def _inputs(run: _Run) -> None:
    """The shrunk target, the reference's states on seeded tokens."""
    request = run.request
    torch.manual_seed(request.get("seed", 0))
    run.work, run.target_dir = shrunk_target_dir(request["target_config"], "parity-nemo-automodel-")
    hf = seeded_hf_model(str(run.target_dir), request.get("seed", 0))
    run.n = hf.config.num_hidden_layers
    run.input_ids = seeded_tokens(request, hf)
    run.refs = candidate_states(hf, run.input_ids)


def _cache(run: _Run) -> None:
    """The offline cache's manifest (its own reader; its ids are the run's), and the check its
    recipe makes of a cache against the target (`_validate_cached_eagle3_manifest`: the target's
    vocabulary), in its words."""
    offline = run.request.get("offline")
    if not offline:
        return
    cache_dir = os.path.dirname(offline["manifest"])
    try:
        run.manifest = manifest = run.family.read_cache_manifest(cache_dir)
        vocab = run.request["target_config"].get("vocab_size")
        if vocab is not None and manifest.get("target_vocab_size") not in (None, vocab):
            raise ValueError(f"EAGLE-3 cache at {cache_dir} was built for target_vocab_size="
                             f"{manifest['target_vocab_size']}, but the configured target has {vocab}")
        missing = [key for key in ("aux_layer_ids", "dtype") if key not in manifest]
        if missing:
            raise ValueError(f"EAGLE-3 cache manifest at {cache_dir} records no {' and no '.join(missing)}")
        run.reply["cache_ids"] = list(manifest["aux_layer_ids"])
        run.reply["cache_dtype"] = str(manifest["dtype"])
    except (OSError, ValueError) as exc:  # its reader or its recipe's check refuses the cache
        refused_by(run, "nemo-automodel", exc)


def _capture(run: _Run) -> None:
    """The run's ids as its target class resolves them; one training step; the fc input and the
    state the loss target's logits come from, named."""
    reply, family = run.reply, run.family
    model = seeded_hf_model(str(run.target_dir), run.request.get("seed", 0))
    ids = run.input_ids[None]
    run_ids = run.request.get("run_ids")
    try:
        wrapper = family.target(model, run.reply.get("cache_ids") if run_ids is None else run_ids)
    except ValueError as exc:  # its own resolution refuses the ids (too shallow, repeated, out of range)
        refused_by(run, "nemo-automodel", exc)
    reply["ids"] = family.resolved_ids(wrapper)
    reply["default_ids"] = family.default_ids(model)
    try:
        built, selected, selected_mask = family.draft(model, ids)
    except Exception as exc:  # noqa: BLE001 - its recipe's draft for this target: none, or one that breaks
        refused_by(run, "nemo-automodel", exc)
    run.draft = built
    seen: dict[str, Any] = {}
    hooks = [family.fc(built).register_forward_pre_hook(lambda m, a: seen.setdefault("fc", a[0].detach())),
             model.get_output_embeddings().register_forward_pre_hook(
                 lambda m, a: seen.setdefault("head", a[0].detach()))]
    try:
        if run.manifest is None:
            run.batch = family.step(wrapper, built, selected, selected_mask, ids)
        else:
            run.batch, run.cached = family.offline_step(wrapper, built, selected, selected_mask, ids, run.manifest,
                                                        tempfile.mkdtemp(prefix="cache-", dir=run.work),
                                                        family.cache_sample)
    except Exception as exc:  # noqa: BLE001 - its own step refuses the run
        refused_by(run, "nemo-automodel", exc)
    finally:
        for hook in hooks:
            hook.remove()
    # the offline path hands the fc its cache's states (bf16 by default): named against the reference
    # states stored in that dtype, where distinct states still differ by far more than the rounding
    refs = {tap: t.to(run.cached).float() for tap, t in run.refs.items()}
    reply["fc"] = identify_slots(seen["fc"][0].float(), refs, run.n, reply["ids"], len(reply["ids"]), run.findings)
    reply["target"] = target = named_target(seen["head"][0].float(), run.refs, run.findings,
                                            "the state the loss target's logits come from")
    reply["target_normed_by_trainer"] = False  # the target's own lm_head on its own output
    reply["target_norm_evidence"] = (f"the loss target is the target model's own logits: its lm_head's input is "
                                     f"{target['tap'] or '?'} (identified), no norm of training's")


def _alignment(run: _Run) -> None:
    """How the batch lines tokens and targets up with the states, read off the batch."""
    t, ids, batch = run.input_ids.shape[0], run.input_ids[None], run.batch
    shift = next((s for s in range(t) if torch.equal(batch.input_ids[0, :t - s], ids[0, s:])), None)
    run.reply["alignment"] = (f"the draft at position t reads the states at t and the token at t+{shift}; its loss "
                              f"target at t is the target model's distribution at t+{shift} (the batch's tokens "
                              "and logits shifted left, zero-filled)" if shift is not None else
                              "the batch's tokens could not be aligned with the target's")


def _built(run: _Run) -> None:
    """The draft its recipe built for the run (BuiltDraft): rope, eps, activation, depth and head off
    its modules (built at the target's shrunk widths); its sizes from the config its recipe
    assembles from the target's real one."""
    if not run.request.get("built"):
        return
    draft = run.draft
    try:
        # its sizes: the config its recipe assembles from the target's real config (the draft class's input)
        real = run.family.draft_config(type(draft.config).from_dict(run.request["target_config"]))
        built: dict[str, Any] = hf_sizes(real)
        built.update(module_facts(draft, run.family.embedding(draft), draft.get_output_embeddings()))
        built["layers_built"] = built["num_hidden_layers"] = len(run.family.layers(draft))
        if built["layers_built"] == 1:
            built["later_layer_input_norms"] = ()
        built["built_by"] = f"nemo-automodel {run.version} {type(draft).__name__}"
        built["config_from"] = ("the target's config as its EAGLE-3 recipe assembles the draft's "
                                "(TrainEagle3Recipe.setup); its modules built at the target's shrunk widths")
        run.reply["built"] = built
    except Exception as exc:  # noqa: BLE001 - a finding: this side's built draft is not compared
        run.reply["built_error"] = one_line(exc)


def main() -> None:
    reply_over_stdio(NemoAutomodelReply.checked(with_limits(extract, "nemo_automodel", DIST)))


if __name__ == "__main__":
    raise SystemExit(main())
