"""The serving path, run with the installed SGLang's own model code: tokens -> target -> draft.

    python -m parity.extract.engines.sglang.forward_side  < request.json

One process (SGLang's runtime is process-global: own gloo port, published server args)
serves every variant of a request:
1. SGLang's target model class for the target config (tiny widths, real depth), loaded
   through its own `load_weights` from the same seeded transformers checkpoint the
   training side uses;
2. per variant (one served draft directory, in SGLang's format): the draft's aux ids are
   read by SGLang's start-up code (the same code the serving extractor runs, e.g.
   `resolve_spec_aux_hidden_state_config` in 0.5.23, with the server args re-published for
   that draft), set on the target by SGLang's capture set-up, and one prefill of the tokens gives the
   concatenated aux states SGLang hands the draft plus the target's next token;
3. the draft: SGLang's `LlamaForCausalLMEagle3` built by its config reader and model
   class, loaded by its own `load_weights` (d2t -> `hot_token_id = d2t + arange`), the
   target's `embed_tokens` bound as the release's EAGLE-3 worker binds it (`set_embed`, or
   `set_embed_and_head` when the draft takes its head from the target);
4. the draft's prefill (EXTEND: input ids shifted left by one with the target's next
   token appended, the aux states as `spec_info.hidden_states`, positions 0..T-1, or with
   `"positions"` in the variant those of parity.forward.positions: the draft then built as the
   EAGLE worker builds it, with the target's context length, `as_eagle_worker`)
   and then, for TTT steps >= 1, DECODE batches in which each position is its own
   request: its KV context is the prefill's KV up to that position plus its own earlier
   draft steps, exactly the chain a draft decode runs, fed the state the previous step
   returned. The draft's attention is SGLang's `TorchNativeAttnBackend` over a real
   `MHATokenToKVPool` / `ReqToTokenPool` on the CPU.

On CUDA (`"device": "cuda"`, the GPU tier) the target and the draft both run through the
attention backend SGLang itself picks for the GPU (its own default resolver: fa3 on
Hopper, trtllm_mha on Blackwell, else flashinfer or triton), built from SGLang's backend
registry over the same pools, in the request's dtype (bf16). MHA targets only. This path
has not been run yet (no GPU where it was written): bench/gpu_forward.sh runs it.

Step k feeds the ground-truth token of position t+1+k at row t (teacher forcing, as the
training TTT loop does); in production the draft feeds its own guess, which equals the
ground truth exactly when the guess is accepted.

Every SGLang call that differs between releases (server args, forward context, batches,
KV pools, attention backends, embedding binding) is a method of the release family's
adapter (families/); this module runs unchanged under every release `parity check` runs.

One deviation from a production server, on purpose: SGLang's prefill computes logits
only for each request's last row; here the draft's `LogitsProcessor` is called with its
batch metadata marked DECODE, which keeps every row (the same `lm_head` code path), so
logits of all positions can be compared.

`"solve_taps"` on a variant: try id lists on the engine (the taps' layers shifted by
-1, 0, +1, as the gate does) and write into the served config the first whose captured
states are, numerically, those taps of the transformers reference.
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
from ... import standins
from ....checkpoint import served_tensors
from .draft_facts import built_flags, served_form
from .reply import SGLangForwardReply
from ....extract.shrink import shrink_config
from ....inputs import is_wrapper

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class Runtime:
    """A model's KV pools and one of SGLang's attention backends over them (the adapter's)."""

    def __init__(self, adapter, *, model_config, kv_heads: int, head_dim: int, layers: int, rows: int,
                 steps: int, dtype: torch.dtype, device: str, backend: str, is_draft: bool = False,
                 positions: list[int] | None = None):
        self.adapter, self.rows, self.device = adapter, rows, device
        # the rows' positions (ForwardBatch.positions): 0..rows-1, or as deep in a context as the
        # request places them (parity.forward.positions); a decode step k runs row r at positions[r] + k
        self.positions = torch.tensor(positions[:rows] if positions else range(rows), device=device)
        self.kv, self.req = adapter.kv_pools(size=rows * (steps + 1) + 2, requests=rows + 2,
                                             context=rows + steps + 2, kv_heads=kv_heads,
                                             head_dim=head_dim, layers=layers, dtype=dtype, device=device)
        self.backend = adapter.attention_backend(backend, model_config=model_config, kv=self.kv,
                                                 req=self.req, dtype=dtype, device=device,
                                                 is_draft=is_draft)

    def loc(self, step: int, row: int) -> int:
        return 1 + step * self.rows + row  # slot 0 is SGLang's padding slot

    def _run(self, model, batch, hidden: torch.Tensor | None):
        batch.req_to_token_pool, batch.token_to_kv_pool = self.req, self.kv
        return self.adapter.run_batch(model, batch, self.backend, hidden)

    def prefill(self, model, input_ids: torch.Tensor, hidden: torch.Tensor | None = None):
        t, dev = input_ids.shape[0], self.device
        locs = torch.tensor([self.loc(0, r) for r in range(t)], device=dev)
        self.req.req_to_token[1, :t] = locs.to(self.req.req_to_token.dtype)
        batch = self.adapter.extend_batch(input_ids.to(dev), out_cache_loc=locs, req_pool_index=1)
        batch.positions = self.positions[:t].clone()
        return self._run(model, batch, hidden)

    def decode(self, draft, step: int, input_ids: torch.Tensor, hidden: torch.Tensor):
        """Step `step` for rows 0..len(input_ids)-1, each a request continuing its own chain."""
        n, dev = input_ids.shape[0], self.device
        table = self.req.req_to_token
        for r in range(n):
            slot = 2 + r
            table[slot, :r + 1] = torch.tensor([self.loc(0, p) for p in range(r + 1)], dtype=table.dtype)
            for j in range(1, step + 1):
                table[slot, r + j] = self.loc(j, r)
        seq_lens = torch.tensor([r + 1 + step for r in range(n)], dtype=torch.int32, device=dev)
        batch = self.adapter.decode_batch(
            input_ids.to(dev), req_pool_indices=torch.arange(2, 2 + n, dtype=torch.int32, device=dev),
            seq_lens=seq_lens, out_cache_loc=torch.tensor([self.loc(step, r) for r in range(n)], device=dev),
            positions=self.positions[:n] + step)
        return self._run(draft, batch, hidden)


class Recorder:
    """Hooks on the draft's decoder layers: what layer 0 receives and what the last returns."""

    def __init__(self, adapter, draft):
        self.cur: dict[str, torch.Tensor] = {}
        layers = adapter.draft_layers(draft)
        self.hooks = [layers[0].register_forward_pre_hook(self._layer_in, with_kwargs=True),
                      layers[-1].register_forward_hook(self._layer_out)]

    def _layer_in(self, module, args, kwargs):
        names = ("positions", "embeds", "hidden_states", "forward_batch", "residual")
        bound = dict(zip(names, args), **kwargs)
        self.cur["embeddings"] = bound["embeds"].detach().clone()
        self.cur["fc_output"] = bound["hidden_states"].detach().clone()

    def _layer_out(self, module, args, out):
        hidden, residual = out
        self.cur["layer_output"] = (hidden + residual if residual is not None else hidden).detach().clone()

    def take(self) -> dict[str, torch.Tensor]:
        cur, self.cur = self.cur, {}
        return cur

    def remove(self):
        for h in self.hooks:
            h.remove()


class Serving:
    """The target model (built once) and everything that depends only on it."""

    def __init__(self, req: dict, timings: dict):
        from ....extract.reference import checkpoint_tensors
        from ...datagen_target import data_generation_target
        from .runtime import adapter_for, setup_on_a_free_port
        from importlib import metadata

        t0 = time.perf_counter()
        self.version = metadata.version("sglang")
        self.adapter, _, self.placement = adapter_for(self.version)
        standins.install()
        self.work = Path(tempfile.mkdtemp(prefix="parity-forward-serve-"))
        target_dir = self.work / "target"
        target_dir.mkdir()
        (target_dir / "config.json").write_text(json.dumps(shrink_config(req["target_config"])))
        self.dtype = DTYPES[req.get("dtype", "float32")]
        self.device = req.get("device", "cpu")
        first = req["variants"][0]["served_dir"]
        self.gpu = self.device.startswith("cuda")
        setup_on_a_free_port(self.adapter, first, device=self.device)
        self.backend = "torch_native"  # CPU: SGLang's device-agnostic backend for the draft
        timings["import_setup"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        self.target_cfg = self.adapter.model_config(str(target_dir))
        if self.gpu:
            self.backend = self.adapter.default_gpu_attention_backend(self.target_cfg)
            self.adapter.publish(first, self.backend)
            self.target_cfg = self.adapter.model_config(str(target_dir))
        self.hf, _ = data_generation_target(str(target_dir), req.get("seed", 0))
        with _default_dtype(self.dtype):
            self.model = self.adapter.build_target(self.target_cfg)
        from ....extract.reference import WRAPPER_TEXT_PREFIX

        prefix = WRAPPER_TEXT_PREFIX if is_wrapper(req["target_config"]) else ""
        self.adapter.load_weights(self.model, checkpoint_tensors(self.hf, str(self.work / "weights"), prefix))
        self.model = self.model.to(device=self.device, dtype=self.dtype)
        self.n = self.adapter.text_layers(self.target_cfg)
        self.tokens = torch.tensor(req["tokens"], dtype=torch.long)
        self._refs = None
        self._outputs: dict[tuple, Any] = {}
        self._solved: dict[tuple, list[int]] = {}
        timings["target_build"] = time.perf_counter() - t1
        timings["target_forward"] = 0.0
        self.timings = timings

    def refs(self):
        from ....extract.reference import candidate_states

        if self._refs is None:
            self._refs = candidate_states(self.hf, self.tokens)
        return self._refs

    def solve(self, taps: list[str]) -> list[int]:
        """The id list that makes this engine capture `taps`, tried on the engine itself: the
        taps' layers shifted by -1, 0, +1 (the gate's candidates), each captured by a real
        forward and named by numerical identity against the transformers reference."""

        key = tuple(taps)
        if key in self._solved:
            return self._solved[key]
        started = time.perf_counter()
        tried = []
        try:
            for ids in candidate_id_lists(tuple(Tap.parse(t) for t in taps)):
                try:
                    aux, _, capture = self.target_forward(True, ids)
                except Exception as exc:  # noqa: BLE001 - the engine refuses this list
                    tried.append(f"{ids} -> {type(exc).__name__}: {exc}")
                    continue
                got = self._name_slots(aux)
                tried.append(f"{ids} -> {got}")
                if got == list(taps):
                    self._solved[key] = ids
                    return ids
        finally:
            self.timings["solve"] = self.timings.get("solve", 0.0) + time.perf_counter() - started
        raise NoIdList(f"no id list makes sglang {self.version} capture {list(taps)} "
                       f"(tried {'; '.join(tried)})")

    def _name_slots(self, aux: torch.Tensor) -> list[str | None]:
        """Each H-wide slice of `aux` named by numerical identity (fp32: within identify's
        MATCH_RTOL; bf16/fp16: the clear nearest, its rounding being far above that bound)."""
        from ....extract.identify import identify

        refs = self.refs()
        h = next(iter(refs.values())).shape[-1]
        names = []
        for k in range(aux.shape[-1] // h):
            ident = identify(aux[:, k * h:(k + 1) * h].float().cpu(), refs)
            if ident.tap is None and self.dtype != torch.float32 and ident.rel_err < 5e-2 \
                    and (ident.runner_up_err or 1.0) > 5 * ident.rel_err:
                names.append(ident.best.name)
            else:
                names.append(ident.tap.name if ident.tap else None)
        return names

    def target_forward(self, use_aux: bool, ids) -> tuple[torch.Tensor, int, list[int] | None]:
        self.adapter.configure_capture(self.model, use_aux, ids)
        capture = self.adapter.capture_indices(self.model)
        key = (bool(use_aux), tuple(capture) if capture is not None else None)
        if key not in self._outputs:
            started = time.perf_counter()
            tokens = self.tokens.to(self.device)
            if self.gpu:  # SGLang's default GPU backend over real pools
                out = self.runtime_for(self.target_cfg, self.model.config, steps=0).prefill(self.model, tokens)
            else:  # parity's prefill SDPA backend (serves MLA prefill too; see sdpa_backend.py)
                out = self.adapter.forward(self.model, tokens)
            self.timings["target_forward"] += time.perf_counter() - started
            next_token = int(out.next_token_logits[-1].float().argmax())  # greedy sample
            self._outputs[key] = (out.hidden_states, next_token)
        aux, next_token = self._outputs[key]
        return aux, next_token, capture

    def runtime_for(self, model_config, hf_config, steps: int, is_draft: bool = False,
                    positions: list[int] | None = None) -> "Runtime":
        if self.adapter.is_mla(model_config):
            raise NotImplementedError("the GPU tier runs MHA targets (Llama, Qwen3); an MLA target "
                                      "needs SGLang's MLA KV pool, which this harness does not build")
        head_dim = getattr(hf_config, "head_dim", None) or hf_config.hidden_size // hf_config.num_attention_heads
        return Runtime(self.adapter, model_config=model_config, kv_heads=hf_config.num_key_value_heads,
                       head_dim=head_dim, layers=hf_config.num_hidden_layers, rows=self.tokens.shape[0],
                       steps=steps, dtype=self.dtype, device=self.device, backend=self.backend,
                       is_draft=is_draft, positions=positions)


class _default_dtype:
    """Build modules in `dtype`, as SGLang's loader does (its caches follow the default dtype)."""

    def __init__(self, dtype: torch.dtype):
        self.dtype, self.saved = dtype, None

    def __enter__(self):
        self.saved = torch.get_default_dtype()
        torch.set_default_dtype(self.dtype)

    def __exit__(self, *exc):
        torch.set_default_dtype(self.saved)


OVERWRITE = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"


def rope_rows(adapter, draft) -> int | None:
    """The positions the built draft's rope table holds (its first layer's `cos_sin_cache` rows)."""
    attention = getattr(adapter.draft_layers(draft)[0], "self_attn", None)
    cache = getattr(getattr(attention, "rotary_emb", None), "cos_sin_cache", None)
    return int(cache.shape[0]) if isinstance(cache, torch.Tensor) else None


class as_eagle_worker:
    """Within it, the adapter builds the draft's ModelConfig as SGLang's EAGLE worker does: with
    the target's context length, so that the draft's rope serves every position of the context.
    Releases give it one of two ways, both tried here in turn: 0.5.18 on, the worker passes it to
    the draft's ModelConfig (`context_length=`; the adapter's `draft_model_config`); before, it
    sets `server_args.context_length` to it and builds the ModelConfig from the server args
    (0.5.18 on, server args are read-only). The same value then meets the same check: a draft
    declaring fewer positions makes the ModelConfig raise unless
    SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set; it is then set, as published drafts are
    served, and SGLang sets the draft's max_position_embeddings to the context. `note` says
    what was done. Where neither way builds it, the draft is built from its own config, and a
    position past it meets what the engine does with it."""

    ROUTES = ("context_length argument", "server_args.context_length")

    def __init__(self, adapter, served: str, context: int | None):
        self.adapter, self.served, self.context = adapter, served, context
        self.note = "the draft's ModelConfig as the draft declares it (no context length to give it)"
        self.undo: list = []

    def _install(self, route: str) -> None:
        adapter, context = self.adapter, self.context
        if route == self.ROUTES[0]:
            build = adapter.draft_model_config  # AttributeError: an adapter without it
            adapter.model_config = lambda model_dir, is_draft=False: (
                build(model_dir, context) if is_draft else type(adapter).model_config(adapter, model_dir))
            self.undo.append(lambda: adapter.__dict__.pop("model_config", None))
        else:
            args = adapter.server_args
            saved = args.context_length
            args.context_length = context  # AttributeError: read-only server args
            self.undo.append(lambda: setattr(args, "context_length", saved))

    def _uninstall(self) -> None:
        while self.undo:
            self.undo.pop()()

    def __enter__(self):
        import os

        if self.context is None:
            return self
        for route in self.ROUTES:
            try:
                self._install(route)
                self.adapter.model_config(self.served, is_draft=True)
            except ValueError:  # the draft declares fewer positions: served with the override set
                self.undo.append(self._restore_env(os.environ.get(OVERWRITE)))
                os.environ[OVERWRITE] = "1"
                self.note = (f"the draft's ModelConfig with the target's context length {self.context} ({route}), "
                             f"as the EAGLE worker builds it, with {OVERWRITE}=1 (the draft declares fewer positions)")
                return self
            except Exception:  # noqa: BLE001 - not this release's way
                self._uninstall()
                continue
            self.note = (f"the draft's ModelConfig with the target's context length {self.context} ({route}), "
                         "as the EAGLE worker builds it")
            return self
        self.note = "the draft's ModelConfig as the draft declares it (this release's adapter takes no context length)"
        return self

    @staticmethod
    def _restore_env(saved: str | None):
        import os

        return lambda: os.environ.pop(OVERWRITE, None) if saved is None else os.environ.__setitem__(OVERWRITE, saved)

    def __exit__(self, *exc):
        self._uninstall()


class NoIdList(RuntimeError):
    """No id list makes the engine capture the taps asked for."""


class _Unservable(Exception):
    """The engine cannot serve this variant as written (what a launch would hit): its words."""


def run_variant(sv: Serving, variant: dict, req: dict, out: dict[str, torch.Tensor]) -> dict[str, Any]:
    """One served variant: its ids (solved where asked), the target's capture with them, the
    draft built and loaded as the engine does, and its steps unrolled (`out` gets each stage's
    tensors). A variant the engine cannot serve says so under `unservable`."""
    served = variant["served_dir"]
    meta: dict[str, Any] = {"device": sv.device, "attention": {
        "target": sv.backend if sv.gpu else "parity prefill SDPA (sdpa_backend.py)",
        "draft": sv.backend}}
    if variant.get("solve_taps"):
        _solve_ids(sv, variant, meta)
    sv.adapter.publish(served, sv.backend)
    use_aux, ids = sv.adapter.resolve_aux_ids(sv.target_cfg)  # the engine's own config reading
    meta["requested_ids"] = list(ids) if isinstance(ids, (list, tuple)) else ids
    aux, next_token, capture = sv.target_forward(use_aux, ids)
    meta["capture_ids"], meta["next_token"] = capture, next_token
    try:
        draft, hot = _loaded_draft(sv, variant, meta)
        return _unroll(sv, variant, req, draft, hot, aux, next_token, meta, out)
    except _Unservable as exc:
        return {**meta, "unservable": str(exc)}


def _solve_ids(sv: Serving, variant: dict, meta: dict) -> None:
    """The ids that make the engine feed the variant's taps, written in its config (none found:
    served with the ids as written, the forward shows what it is fed)."""
    config_path = Path(variant["served_dir"]) / "config.json"
    try:
        ids = sv.solve(variant["solve_taps"])
    except NoIdList as exc:
        meta["unsolved"] = str(exc)
        return
    config = json.loads(config_path.read_text())
    config.setdefault("eagle_config", {})["eagle_aux_hidden_state_layer_ids"] = ids
    config_path.write_text(json.dumps(config, indent=2) + "\n")
    meta["solved_ids"] = ids


def _loaded_draft(sv: Serving, variant: dict, meta: dict):
    """(draft, hot_token_id): the draft built by the engine's class (as its EAGLE worker builds it
    where positions are asked), loaded with the checkpoint (parity's export form where the ids
    were solved), bound to the target's embedding, and its worker's start-up call made."""
    from safetensors.torch import load_file

    served, positions = variant["served_dir"], variant.get("positions")
    if positions:
        with as_eagle_worker(sv.adapter, served, getattr(sv.target_cfg, "context_len", None)) as worker, \
                _default_dtype(sv.dtype):
            draft = sv.adapter.build_draft(served)
        meta["draft_positions"] = worker.note
    else:
        with _default_dtype(sv.dtype):
            draft = sv.adapter.build_draft(served)
    tensors = {}
    for f in sorted(Path(served).glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    if variant.get("solve_taps"):  # parity's export form: tensors as this release's draft class loads them
        with _default_dtype(sv.dtype):
            form = served_form(sv.adapter, sv.adapter.build_draft(served), dict.fromkeys(tensors))
        tensors = served_tensors(tensors, form["renames"], form["zero_biases"])
        meta["checkpoint_renames"], meta["checkpoint_zero_biases"] = form["renames"], form["zero_biases"]
    try:
        draft.load_weights(list(tensors.items()))
    except Exception as exc:  # the engine cannot load this checkpoint: what a launch would hit
        raise _Unservable(f"sglang {sv.version} cannot load the served checkpoint: its draft class's "
                          f"load_weights raised {type(exc).__name__}: {exc}") from None
    meta["embedding"] = sv.adapter.bind_target_embedding(sv.model, draft)
    draft = draft.to(device=sv.device, dtype=sv.dtype)
    sv.adapter.keep_all_rows(draft)
    meta["graph"] = built_flags(draft)
    meta["engine"], meta["draft_class"] = "sglang", type(draft).__name__
    try:  # the EAGLE worker's own start-up call
        return draft, draft.get_hot_token_id()
    except Exception as exc:  # e.g. 0.4.x without d2t: the attribute is set only by loading one
        raise _Unservable(f"sglang {sv.version} cannot serve this draft: the EAGLE worker's start-up call "
                          f"get_hot_token_id() raises {type(exc).__name__}: {exc}") from None


def _unroll(sv: Serving, variant: dict, req: dict, draft, hot, aux, next_token: int, meta: dict,
            out: dict[str, torch.Tensor]) -> dict[str, Any]:
    """The draft's steps as the engine's runtime unrolls them (prefill, then decodes), each stage
    recorded into `out` under the variant's name, unless `bare`."""
    name, positions = variant["name"], variant.get("positions")
    t = sv.tokens.shape[0]
    steps = int(req.get("steps", 3))
    rows = rope_rows(sv.adapter, draft)
    if positions and rows is not None and max(positions[:t]) + steps - 1 >= rows:
        top = max(positions[:t]) + steps - 1
        raise _Unservable(f"sglang {sv.version} builds the draft's rope table for {rows} positions "
                          f"({meta.get('draft_positions')}), but its EAGLE worker serves the target's context "
                          f"{getattr(sv.target_cfg, 'context_len', '?')}: position {top} is past the table (SGLang's "
                          "own CPU path raises IndexError there; what a GPU kernel reads past it is not run here)")
    shifted = torch.cat([sv.tokens[1:], torch.tensor([next_token])])  # x_1..x_T
    runtime = sv.runtime_for(sv.adapter.model_config(variant["served_dir"], is_draft=True), draft.config, steps,
                             is_draft=True, positions=positions)
    recorder = None if req.get("bare") else Recorder(sv.adapter, draft)
    started = time.perf_counter()
    result = runtime.prefill(draft, shifted, aux.to(sv.dtype))
    records = [(recorder.take() if recorder else {}, result)]
    for k in range(1, steps):
        rows = t - k  # row r feeds x_{r+1+k}, which exists for r + k <= T - 1
        prev = result.hidden_states[:rows]
        result = runtime.decode(draft, k, shifted[k:k + rows], prev)
        records.append((recorder.take() if recorder else {}, result))
    meta["forward_s"] = time.perf_counter() - started
    if recorder is None:
        return meta
    recorder.remove()
    out[f"{name}/0/fc_input"] = aux.float().cpu().clone()
    for k, (stages, res) in enumerate(records):
        for key, value in stages.items():
            out[f"{name}/{k}/{key}"] = value.float().cpu()
        out[f"{name}/{k}/logits"] = res.next_token_logits.float().cpu()
    vocab = out[f"{name}/0/logits"].shape[-1]
    # SGLang's mapping: a draft index d is proposed as target token hot_token_id[d]
    out[f"{name}/vocab_map"] = hot.cpu().long() if hot is not None else torch.arange(vocab)
    meta["vocab_mapping"] = "hot_token_id = d2t + arange" if hot is not None else "none (draft index = target id)"
    meta["input_ids"] = shifted.tolist()
    meta["positions"] = runtime.positions.tolist()
    return meta


def warm() -> None:
    """parity.forkserver: the serving probe's import-only first steps (the same adapter)."""
    from .probe import warm as warm_probe

    warm_probe()


def run(req: dict) -> dict[str, Any]:
    return serve_variants(req, Serving, run_variant)


def main() -> None:
    reply_over_stdio(SGLangForwardReply.checked(run))


if __name__ == "__main__":
    raise SystemExit(main())
