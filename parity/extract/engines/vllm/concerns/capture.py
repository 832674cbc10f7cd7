"""The capture concern: the aux ids each model runner resolves and sets at start-up, the target's
forward (one prefill; a pipeline stage's) and what it captures.

- `Capture` (0.22-0.33): each runner's own function: V1's
  `GPUModelRunner._setup_eagle3_aux_hidden_state_outputs` (which reads the ids with
  `_get_eagle3_aux_layers_from_config`) and V2's `eagle3_utils.set_eagle3_aux_hidden_state_layers`
  (`get_eagle3_aux_layers_from_config`); both fall back to the model's own default. Each runs on
  a shell holding what it reads (the real runner allocates device buffers and a KV cache: a GPU).
- `V2RunnerOnly` (0.34): the V1 model runner is gone (`vllm/v1/worker/gpu_model_runner.py` and
  `vllm/v1/spec_decode/eagle.py` are not in the wheel): V2 is the one runner, for every model and
  for the data-generation dump. V2 sets the aux layers with
  `eagle3_utils.set_eagle3_aux_hidden_state_layers`, as in 0.33; it now also calls
  `reserve_aux_intermediate_tensor_slots`, which does nothing without pipeline parallelism, and
  under it asks `verify_supports_aux_hidden_states_over_pp` and configures the relay of the aux
  states a middle stage passes on.
- `V1ByLoadModelStatement` (0.16-0.21): V1 has no `_setup_eagle3_aux_hidden_state_outputs`:
  `GPUModelRunner.load_model` ends with `if self.use_aux_hidden_state_outputs:` (the ids of
  `_get_eagle3_aux_layers_from_config`, which reads only the top-level
  `eagle_aux_hidden_state_layer_ids` (0.20 on: else `dflash_config.target_layer_ids` + 1; never
  `eagle_config`), or the model's default). parity runs exactly that statement of the installed
  `load_model` (run_until.run_statement) on a holder of the model. V2 (0.17-0.21; opt-in on a GPU)
  sets them with its own `eagle3_utils.set_eagle3_aux_hidden_state_layers`, still run and
  reported; 0.16 has no `eagle3_utils` (its V2 runner sets no aux layers), so V1 is its one runner.
  The model's default layers are `get_eagle3_aux_hidden_state_layers()` in 0.16-0.17 and
  `get_eagle3_default_aux_hidden_state_layers()` from 0.18 (both runners call the one their
  release has); `default_ids` calls the one the model has, the newer name first.
- `DefaultIdsByLoadModelStatement` (0.8.5-0.11): one model runner, the V1 `GPUModelRunner`, whose
  `load_model` ends with `if self.use_aux_hidden_state_outputs: self.model.set_aux_hidden_state_layers(
  self.model.get_eagle3_aux_hidden_state_layers())`: the draft's config is never read, every EAGLE-3
  draft gets the model's default layers. parity runs exactly that statement of the installed
  `load_model` on a holder of the model. The Llama capture appends `hidden_states + residual`
  before layer i for each id i in the loop over the layers: id N is never reached (dropped,
  silently), id 0 has no residual yet (TypeError).
"""

from __future__ import annotations

from ....run_until import run_statement


def run_load_model_statement(model, vllm_config) -> None:
    """The statement of the installed `GPUModelRunner.load_model` that sets the aux layers
    (`if self.use_aux_hidden_state_outputs:`), run on a holder of the model."""
    from vllm.config import set_current_vllm_config
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    holder = _V1Runner(model, vllm_config.speculative_config)
    with set_current_vllm_config(vllm_config):
        run_statement(GPUModelRunner.load_model, "self.use_aux_hidden_state_outputs", holder)


class Capture:
    """The aux ids each runner sets with its own function, the target's forward and what it captures."""

    def default_ids(self, model) -> list[int]:
        return list(model.get_eagle3_default_aux_hidden_state_layers())

    def config_ids(self, vllm_config, runner: str) -> list[int] | None:
        """The ids runner `runner` reads from the speculative config (None: it found none)."""
        spec = vllm_config.speculative_config
        if runner == "v1":
            from vllm.v1.worker.gpu_model_runner import GPUModelRunner

            ids = GPUModelRunner._get_eagle3_aux_layers_from_config(_V1Runner(None, spec))
        else:
            from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import get_eagle3_aux_layers_from_config

            ids = get_eagle3_aux_layers_from_config(spec)
        return list(ids) if ids else None

    def set_capture(self, model, vllm_config, runner: str) -> None:
        """What runner `runner` does at start-up: resolve the ids (or the model default) and set them."""
        from vllm.config import set_current_vllm_config

        spec = vllm_config.speculative_config
        with set_current_vllm_config(vllm_config):
            if runner == "v1":
                from vllm.v1.worker.gpu_model_runner import GPUModelRunner

                GPUModelRunner._setup_eagle3_aux_hidden_state_outputs(_V1Runner(model, spec))
            else:
                from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import set_eagle3_aux_hidden_state_layers

                set_eagle3_aux_hidden_state_layers(model, spec)

    def set_ids(self, model, ids: list[int]) -> None:
        """The model's own setter, with an id list (the fix search's candidates)."""
        model.set_aux_hidden_state_layers(tuple(ids))

    def capture_ids(self, model) -> list[int] | None:
        layers = getattr(model.model, "aux_hidden_state_layers", None)
        return list(layers) if layers is not None else None

    def forward(self, model, vllm_config, input_ids):
        """One prefill; (final hidden states, [aux states in capture order])."""
        import torch
        from vllm.config import set_current_vllm_config
        from vllm.forward_context import set_forward_context

        positions = torch.arange(input_ids.shape[0])
        with set_current_vllm_config(vllm_config), torch.no_grad(), \
                set_forward_context(None, vllm_config, num_tokens=input_ids.shape[0]):
            out = model(input_ids=input_ids, positions=positions, intermediate_tensors=None)
        if isinstance(out, tuple):
            return out[0], list(out[1])
        return out, []

    relay: tuple[str, ...] = ()  # the aux states a middle pipeline stage passes on (a family's set_capture)

    def stage_forward(self, model, vllm_config, input_ids):
        """One prefill of this rank's pipeline stage as V2 runs a stage: a stage after the first takes
        the previous stage's intermediate tensors (`pp_group.recv_tensor_dict(all_gather_group=tp
        group)`, as `Worker.execute_model`'s irecv, blocking here), copied into the model's own
        `make_empty_intermediate_tensors` buffers (as `GPUModelRunner.execute_model` does, aux slots
        included), and no input ids unless the model needs raw tokens; a stage before the last
        passes on its output with the relayed aux states (`PPHandler.relay_aux_hidden_states`) by
        `send_tensor_dict` (`Worker.execute_model`'s isend). Returns the aux states the last stage
        hands the draft (a list, in capture order), None on an earlier stage."""
        import torch
        from vllm.config import set_current_vllm_config
        from vllm.distributed.parallel_state import get_pp_group, get_tp_group
        from vllm.forward_context import set_forward_context
        from vllm.sequence import IntermediateTensors
        from vllm.model_executor.models.interfaces import requires_raw_input_tokens

        pp, n = get_pp_group(), input_ids.shape[0]
        intermediate = None
        with set_current_vllm_config(vllm_config):
            if not pp.is_first_rank:
                received = pp.recv_tensor_dict(all_gather_group=get_tp_group())
                buffers = model.make_empty_intermediate_tensors(n, torch.float32, input_ids.device)
                intermediate = IntermediateTensors({k: v[:n].copy_(received[k][:n])
                                                    for k, v in buffers.tensors.items()})
            tokens = input_ids if pp.is_first_rank or requires_raw_input_tokens(model) else None
            with torch.no_grad(), set_forward_context(None, vllm_config, num_tokens=n):
                out = model(input_ids=tokens, positions=torch.arange(n), intermediate_tensors=intermediate)
            if not pp.is_last_rank:
                relayed = {k: intermediate[k] for k in self.relay} if self.relay else {}
                pp.send_tensor_dict(out.tensors | relayed, all_gather_group=get_tp_group())
                return None
        return list(out[1]) if isinstance(out, tuple) else []

    def stage(self, model) -> dict:
        """This rank's place and its model's part: pipeline and tensor ranks, the decoder layers its
        stage holds ([start, end): vLLM's own partition) and the layer indices it captures at."""
        from vllm.distributed.parallel_state import get_pp_group, get_tp_group

        inner = model.get_language_model().model if hasattr(model, "get_language_model") else model.model
        return {"pp_rank": get_pp_group().rank_in_group, "tp_rank": get_tp_group().rank_in_group,
                "is_last": bool(get_pp_group().is_last_rank),
                "layers": [int(getattr(inner, "start_layer", 0)), int(getattr(inner, "end_layer", 0))],
                "capture": self.capture_ids(model)}


class V2RunnerOnly(Capture):
    """V2, the one runner."""

    def config_ids(self, vllm_config, runner: str) -> list[int] | None:
        return super().config_ids(vllm_config, _only_v2(runner))

    def set_capture(self, model, vllm_config, runner: str) -> None:
        """V2's start-up, as `GPUModelRunner.load_model` runs it: `set_eagle3_aux_hidden_state_layers(model,
        spec, use_pp)`, which under pipeline parallelism also asks `verify_supports_aux_hidden_states_over_pp`
        (the model's `supports_aux_hidden_states_over_pp`), then the PP handler's
        `configure_aux_hidden_state_relay` (the keys a middle stage passes on)."""
        from vllm.config import set_current_vllm_config
        from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import (aux_hidden_state_relay_keys,
                                                                       set_eagle3_aux_hidden_state_layers)

        _only_v2(runner)
        # as loaded, before V2's start-up reserves the aux slots in it (set_ids starts again from it)
        self.unreserved = model.make_empty_intermediate_tensors
        with set_current_vllm_config(vllm_config):
            set_eagle3_aux_hidden_state_layers(model, vllm_config.speculative_config,
                                               vllm_config.parallel_config.pipeline_parallel_size > 1)
            self.relay = aux_hidden_state_relay_keys(model)

    def set_ids(self, model, ids: list[int]) -> None:
        """The model's own setter with an id list (the fix search's), then what V2's start-up does
        after it under pipeline parallelism: the aux slots reserved in the stage's intermediate
        tensors as loaded (not on top of the served ids' reservation) and the relay keys, for these ids."""
        from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import (aux_hidden_state_relay_keys,
                                                                       reserve_aux_intermediate_tensor_slots)

        super().set_ids(model, ids)
        if getattr(self, "unreserved", None) is not None:  # the buffers as loaded, the slots reserved for these ids
            model.make_empty_intermediate_tensors = self.unreserved
        reserve_aux_intermediate_tensor_slots(model)
        self.relay = aux_hidden_state_relay_keys(model)


class V1ByLoadModelStatement(Capture):
    """The model's default layers under either name; V1's capture by the `load_model` statement."""

    def default_ids(self, model) -> list[int]:
        default = getattr(model, "get_eagle3_default_aux_hidden_state_layers", None)  # 0.18 on
        return list(default() if default is not None else model.get_eagle3_aux_hidden_state_layers())

    def set_capture(self, model, vllm_config, runner: str) -> None:
        if runner == "v1":
            run_load_model_statement(model, vllm_config)
        else:
            super().set_capture(model, vllm_config, runner)


class DefaultIdsByLoadModelStatement(Capture):
    """The model's default layers under their old name, no ids read from any config, and V1's
    `load_model` statement."""

    def default_ids(self, model) -> list[int]:
        return list(model.get_eagle3_aux_hidden_state_layers())  # 0.33: get_eagle3_default_...

    def config_ids(self, vllm_config, runner: str) -> list[int] | None:
        """0.11 reads no ids from any config: None (the runner sets the model's default)."""
        return None

    def set_capture(self, model, vllm_config, runner: str) -> None:
        """The statement of the installed `GPUModelRunner.load_model` that sets the aux layers."""
        run_load_model_statement(model, vllm_config)


def _only_v2(runner: str) -> str:
    if runner != "v2":
        raise ValueError(f"vLLM 0.34 has one model runner (v2), not {runner!r}")
    return runner


class _V1Runner:
    """The attributes of a `GPUModelRunner` its two aux-layer methods read, and nothing else
    (the real runner allocates device buffers and a KV cache: a GPU)."""

    def __init__(self, model, speculative_config):
        self.model = model
        self.speculative_config = speculative_config
        self.use_aux_hidden_state_outputs = True

    def get_model(self):
        return self.model

    def __getattr__(self, name):  # the runner's own methods, bound to this object
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner

        attr = getattr(GPUModelRunner, name, None)
        if attr is None or not callable(attr):
            raise AttributeError(f"parity's V1 runner shell has no {name!r}: vLLM's runner code reads "
                                 "more than parity set up")
        return attr.__get__(self)
