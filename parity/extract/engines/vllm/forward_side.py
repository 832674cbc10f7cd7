"""The serving path, run with the installed vLLM's own model code: tokens -> target -> EAGLE-3 draft.

    python -m parity.extract.engines.vllm.forward_side  < request.json

One process (vLLM's parallel state is process-global) serves every variant of a request:
1. vLLM's target model class for the target config (tiny widths, real depth), built by
   `get_model` and loaded from the same seeded transformers checkpoint the training side uses
   (safetensors on disk, vLLM's own `load_weights` and `process_weights_after_loading`);
2. per variant (one served draft directory, vLLM's format): vLLM's config classes read it
   (`SpeculativeConfig(method="eagle3", model=DIR)`), the GPU-default runner's own function sets
   the aux layers (docs/vllm.md), and one prefill gives the aux states the runner concatenates
   for the draft, plus the target's next token;
3. the draft: vLLM's `Eagle3LlamaForCausalLM`, built by `initialize_model` from the draft config
   the speculative config holds, loaded by its own `load_weights` (d2t -> draft_id_to_target_id,
   t2d dropped), the target's embedding and head shared exactly where the proposer's own
   `_maybe_share_embeddings` / `_maybe_share_lm_head` share them (run on a holder of the draft);
4. the draft's first step as the proposer runs it: `combine_hidden_states` (the fc, with
   `norm_before_fc` / `fc_norm` as the class applies them) on the aux states, then the draft
   model on the input ids shifted left by one with the target's next token appended, then
   `compute_logits`.

Only the first step is run: later TTT steps attend over the draft's own KV cache, which needs
vLLM's paged attention kernels, and parity's CPU stand-in (kernels.py) computes one prefill
sequence without a cache; `parity forward --engine vllm` refuses --steps > 1 in one line.
The draft's logits are recorded in the draft vocabulary (what its `logits_processor` returns)
and the vocabulary mapping is read off `compute_logits`' own scatter into the target vocabulary.

`"solve_taps"` on a variant: try id lists on the engine (the taps' layers shifted by -1, 0,
+1, as the gate does) and write the first whose captured states are, numerically, those taps
into the served config where vLLM reads them (the top-level key).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from ....contract.tap import Tap
from ....envs import reply_over_stdio
from ...forward_variants import serve_variants
from ...candidates import candidate_id_lists
from . import write_ids
from ...shrink import shrink_config
from .families import place
from ...child import free_port
from .probe import name_slots, warm as warm_probe
from .reply import VLLMForwardReply


def warm() -> None:
    """parity.forkserver: the vLLM probe's import-only first steps (the same family adapter)."""

    warm_probe()


class Serving:
    """The target (built once) and what depends only on it."""

    def __init__(self, req: dict, timings: dict):
        from importlib import metadata

        from ...datagen_target import data_generation_target

        t0 = time.perf_counter()
        self.version = metadata.version("vllm")
        self.family = place(self.version).module
        self.adapter = self.family.Adapter()
        self.adapter.platform()
        self.adapter.replace_kernels()
        if req.get("dtype", "float32") != "float32" or req.get("device", "cpu") != "cpu":
            raise ValueError("parity runs vLLM's forward on the CPU in float32 only")
        # rows past the draft's declared positions (parity.forward.positions): the context vLLM serves
        # by default, the target config's (no --max-model-len), so that its SpeculativeConfig treats
        # the draft's max_position_embeddings as it does in a deployment; else parity's 128
        self.max_model_len = None if any(v.get("positions") for v in req["variants"]) else 128
        self.work = Path(tempfile.mkdtemp(prefix="parity-forward-vllm-"))
        self.target_dir = self.work / "target"
        self.target_dir.mkdir()
        (self.target_dir / "config.json").write_text(json.dumps(shrink_config(req["target_config"])))
        self.hf, _ = data_generation_target(str(self.target_dir), req.get("seed", 0))
        self.hf.save_pretrained(str(self.target_dir), safe_serialization=True)  # what vLLM loads
        self.port = free_port()
        timings["import_setup"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        first = req["variants"][0]["served_dir"]
        self.base_config = self.config(first)
        self.model = self.adapter.build_target(self.base_config)
        self.tokens = torch.tensor(req["tokens"], dtype=torch.long)
        self._refs = None
        self._solved: dict[tuple, list[int]] = {}
        timings["target_build"] = time.perf_counter() - t1
        timings["target_forward"] = 0.0
        self.timings = timings

    def config(self, served_dir: str):
        """The VllmConfig of the target with this served draft as its EAGLE-3 drafter."""
        return self.adapter.config(str(self.target_dir), {"method": "eagle3", "model": served_dir,
                                                          "num_speculative_tokens": 1}, self.port,
                                   max_model_len=self.max_model_len)

    def refs(self):
        from ...reference import candidate_states

        if self._refs is None:
            self._refs = candidate_states(self.hf, self.tokens)
        return self._refs

    def forward(self, vllm_config) -> tuple[torch.Tensor, torch.Tensor]:
        """One target prefill: (the aux states concatenated as the runner hands them, final hidden)."""
        started = time.perf_counter()
        hidden, aux = self.adapter.forward(self.model, vllm_config, self.tokens)
        self.timings["target_forward"] += time.perf_counter() - started
        return torch.cat(aux, dim=-1), hidden

    def solve(self, taps: list[str]) -> list[int]:
        """The id list that makes this engine capture `taps`, tried on the engine itself."""

        key = tuple(taps)
        if key in self._solved:
            return self._solved[key]
        tried = []
        for ids in candidate_id_lists(tuple(Tap.parse(t) for t in taps)):
            try:
                self.adapter.set_ids(self.model, ids)
                aux, _ = self.forward(self.base_config)
            except Exception as exc:  # noqa: BLE001 - the engine refuses this list
                tried.append(f"{ids} -> {type(exc).__name__}: {exc}")
                continue
            h = self.hf.config.hidden_size
            got = [s["tap"] for s in name_slots([aux[:, k * h:(k + 1) * h] for k in range(aux.shape[-1] // h)],
                                                self.refs())]
            tried.append(f"{ids} -> {got}")
            if got == list(taps):
                self._solved[key] = ids
                return ids
        raise RuntimeError(f"no id list makes vllm {self.version} capture {list(taps)} (tried {'; '.join(tried)})")

    def draft(self, vllm_config):
        """vLLM's draft class for the served draft, loaded by its own load_weights, with the
        target's embedding and head shared where the proposer shares them."""
        from safetensors.torch import load_file

        draft = self.adapter.build_draft(vllm_config)
        served = Path(vllm_config.speculative_config.draft_model_config.model)
        tensors = {}
        for f in sorted(served.glob("*.safetensors")):
            tensors.update(load_file(str(f)))
        self.adapter.load_draft_weights(draft, vllm_config, list(tensors.items()))
        self.adapter.share_with_target(draft, self.model, vllm_config)
        return draft


class Recorder:
    """Hooks on the draft: what its first decoder layer receives, what its last returns, and
    the draft-vocabulary logits its logits processor computes."""

    def __init__(self, draft):
        self.cur: dict[str, torch.Tensor] = {}
        layers = draft.model.layers
        self.hooks = [layers[0].register_forward_pre_hook(self._layer_in, with_kwargs=True),
                      layers[-1].register_forward_hook(self._layer_out),
                      draft.logits_processor.register_forward_hook(self._logits)]

    def _layer_in(self, module, args, kwargs):
        bound = dict(zip(("positions", "embeds", "hidden_states", "residual"), args), **kwargs)
        self.cur["embeddings"] = bound["embeds"].detach().clone()
        self.cur["fc_output"] = bound["hidden_states"].detach().clone()

    def _layer_out(self, module, args, out):
        hidden, residual = out
        self.cur["layer_output"] = (hidden + residual if residual is not None else hidden).detach().clone()

    def _logits(self, module, args, out):
        self.cur["logits"] = out.detach().clone()

    def remove(self):
        for h in self.hooks:
            h.remove()


def vocab_map(draft_logits: torch.Tensor, full: torch.Tensor) -> torch.Tensor:
    """For each draft index, the target id `compute_logits` put its logits at: read off the
    scatter it ran (each draft column is found among the target columns by its values)."""
    out = torch.full((draft_logits.shape[-1],), -1, dtype=torch.long)
    for d in range(draft_logits.shape[-1]):
        hits = (full == draft_logits[:, d:d + 1]).all(dim=0).nonzero().flatten()
        if hits.numel():
            out[d] = hits[0]
    return out


def run_variant(sv: Serving, variant: dict, req: dict, out: dict[str, torch.Tensor]) -> dict[str, Any]:
    """One served variant: its ids (solved where asked), the GPU-default runner's capture with
    them, the draft built as the engine does, and its first step run stage by stage (`out` gets
    each stage's tensors). A variant the engine cannot serve says so under `unservable`."""
    if int(req.get("steps", 1)) != 1:
        raise ValueError("vLLM's draft steps after the first attend over its paged KV cache, which parity's "
                         "CPU kernel stand-in does not compute: run with steps 1")
    served = variant["served_dir"]
    meta: dict[str, Any] = {"device": "cpu", "attention": {"target": "parity causal SDPA stand-in (kernels.py)",
                                                           "draft": "parity causal SDPA stand-in (kernels.py)"}}
    if variant.get("solve_taps"):
        config_path = Path(served) / "config.json"
        ids = sv.solve(variant["solve_taps"])
        config_path.write_text(json.dumps(write_ids(json.loads(config_path.read_text()), ids), indent=2) + "\n")
        meta["solved_ids"] = ids
    vllm_config = sv.config(served)
    aux, next_token = _captured(sv, vllm_config, meta)
    draft = sv.draft(vllm_config)
    if not callable(getattr(draft, "combine_hidden_states", None)):  # 0.8.5-0.10.x: fc inside its forward
        raise NotImplementedError(
            f"parity runs vLLM's draft forward stage by stage from its 0.11 family on, through the draft's "
            f"combine_hidden_states (the fc step); vllm {sv.version}'s {type(draft).__name__} has none: not yet")
    meta["embedding"] = "target" if draft.model.embed_tokens is sv.adapter.target_embedding(sv.model) else "draft"
    meta["graph"] = sv.adapter.draft_graph(draft)
    meta["engine"], meta["draft_class"] = "vllm", type(draft).__name__
    shifted = torch.cat([sv.tokens[1:], torch.tensor([next_token])])  # x_1..x_T
    t = shifted.shape[0]
    positions = torch.tensor(variant["positions"][:t]) if variant.get("positions") else torch.arange(t)
    if variant.get("positions"):
        meta["draft_positions"] = draft_positions(sv, served, draft, vllm_config)
        refused = past_what_vllm_serves(sv, vllm_config, draft, int(positions.max()), meta["draft_positions"])
        if refused:
            return {**meta, "unservable": refused}
    return _first_step(variant["name"], req, draft, vllm_config, aux, shifted, positions, meta, out)


def _captured(sv: Serving, vllm_config, meta: dict) -> tuple[torch.Tensor, int]:
    """(aux, next token): the target's states as the GPU-default runner's own start-up sets its
    capture, and the token the target proposes next."""
    from vllm.config import set_current_vllm_config

    runner = sv.adapter.gpu_default_runner(vllm_config)
    meta["runner"] = runner
    meta["requested_ids"] = sv.adapter.config_ids(vllm_config, runner)
    sv.adapter.set_capture(sv.model, vllm_config, runner)  # the runner's own start-up function
    meta["capture_ids"] = sv.adapter.capture_ids(sv.model)
    aux, hidden = sv.forward(sv.base_config)  # the config the target was built under (its layer registry)
    with set_current_vllm_config(sv.base_config), torch.no_grad():
        next_token = int(sv.model.compute_logits(hidden[-1:]).argmax(dim=-1)[0])
    meta["next_token"] = next_token
    return aux, next_token


def _first_step(name: str, req: dict, draft, vllm_config, aux, shifted, positions, meta: dict,
                out: dict[str, torch.Tensor]) -> dict[str, Any]:
    """The draft's first step, through its combine_hidden_states (the fc), each stage recorded into
    `out` under the variant's name, unless `bare`."""
    from vllm.config import set_current_vllm_config
    from vllm.forward_context import set_forward_context

    recorder = None if req.get("bare") else Recorder(draft)
    started = time.perf_counter()
    with set_current_vllm_config(vllm_config), torch.no_grad(), \
            set_forward_context(None, vllm_config, num_tokens=shifted.shape[0]):
        g = draft.combine_hidden_states(aux)
        last, _ = draft(input_ids=shifted, positions=positions, hidden_states=g)
        full = draft.compute_logits(last)
    meta["forward_s"] = time.perf_counter() - started
    if recorder is None:
        return meta
    recorder.remove()
    stages = recorder.cur
    out[f"{name}/0/fc_input"] = aux.float().clone()
    for key in ("fc_output", "embeddings", "layer_output", "logits"):
        out[f"{name}/0/{key}"] = stages[key].float()
    mapping = getattr(draft, "draft_id_to_target_id", None)
    out[f"{name}/vocab_map"] = (vocab_map(stages["logits"], full) if mapping is not None
                                else torch.arange(stages["logits"].shape[-1]))
    meta["vocab_mapping"] = ("read off compute_logits (target id = draft index + d2t[draft index])"
                             if mapping is not None else "none (draft index = target id)")
    meta["input_ids"] = shifted.tolist()
    meta["positions"] = positions.tolist()
    return meta


def rope_rows(draft) -> int | None:
    """The positions the built draft's rope table holds (its first layer's `cos_sin_cache` rows)."""
    attention = getattr(draft.model.layers[0], "self_attn", None)
    cache = getattr(getattr(attention, "rotary_emb", None), "cos_sin_cache", None)
    return int(cache.shape[0]) if isinstance(cache, torch.Tensor) else None


def draft_positions(sv: Serving, served: str, draft, vllm_config) -> str:
    """What vLLM's config classes made of the positions the served draft declares: the
    `max_position_embeddings` of its config.json (a speculators-format config's
    transformer_layer_config, where vLLM reads it) against the one the built draft holds (0.33 on,
    `SpeculativeConfig` raises it to the target's max_model_len for a rope type that only sizes
    the table), the rows of the rope table built, and the context served (`max_model_len`, which
    `VllmConfig` lowers to the draft's where it does not raise it)."""
    written = json.loads((Path(served) / "config.json").read_text())
    layer = written.get("transformer_layer_config")
    declared = (layer if isinstance(layer, dict) else written).get("max_position_embeddings")
    built = getattr(draft.config, "max_position_embeddings", None)
    context = vllm_config.model_config.max_model_len
    how = ("as declared" if built == declared else
           f"raised by vllm {sv.version}'s config classes from the declared {declared}")
    return (f"the draft's max_position_embeddings {built} ({how}), rope table {rope_rows(draft)} rows; "
            f"served context (max_model_len) {context}")


def past_what_vllm_serves(sv: Serving, vllm_config, draft, top: int, note: str) -> str | None:
    """Why the rows cannot run at positions up to `top` as this release serves the draft, or None:
    past the context it serves (its VllmConfig lowered max_model_len to the draft's: the target's
    context is not served at all), or past the draft's rope table (a release that never raises the
    draft's positions: its CPU rotary path raises IndexError; a GPU kernel reads past the table)."""
    context = vllm_config.model_config.max_model_len
    if top >= context:
        return (f"vllm {sv.version} serves a context of {context} positions with this draft ({note}), "
                f"below the target's; position {top} is never served")
    rows = rope_rows(draft)
    if rows is not None and top >= rows:
        return (f"vllm {sv.version} serves the target's context with the draft as built ({note}): position {top} "
                "is past the draft's rope table (vLLM's own CPU path raises IndexError there; what a GPU kernel "
                "reads past it is not run here)")
    return None


def run(req: dict) -> dict[str, Any]:
    return serve_variants(req, Serving, run_variant)


def main() -> None:
    reply_over_stdio(VLLMForwardReply.checked(run))


if __name__ == "__main__":
    raise SystemExit(main())
