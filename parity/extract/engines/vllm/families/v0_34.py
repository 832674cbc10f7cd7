"""vLLM 0.34: the family adapter (the V2 model runner only).

What differs from the 0.33 family (v0_33.py), found by running 0.34.0's code:
- the V1 model runner is gone (`vllm/v1/worker/gpu_model_runner.py` and
  `vllm/v1/spec_decode/eagle.py` are not in the wheel): V2 is the one runner, for every model
  and for the data-generation dump (`v1/worker/gpu/spec_decode/extract_hidden_states.py`:
  `ExtractHiddenStatesSpeculator.propose` stacks the aux states as 0.33's proposer did);
- V2 sets the aux layers with `eagle3_utils.set_eagle3_aux_hidden_state_layers`, as in 0.33
  (it now also calls `reserve_aux_intermediate_tensor_slots`, which does nothing without
  pipeline parallelism);
- the target's embedding and LM head are shared with the draft by V2's
  `spec_decode/eagle/utils.load_eagle_model`: `maybe_share_target_embed` and
  `share_target_lm_head(get_target_lm_head(...))`, on the target's language model;
- `MLAAttention.forward` takes a `mqa_q_prepared` (a pre-absorbed query, passed by models with a
  sparse-attention indexer, none of the targets parity runs; the stand-in raises if given one);
- the CPU platform's `check_and_update_config` refuses an x86 CPU without Triton ("vLLM on
  x86 CPUs requires Triton (triton-cpu)": its CPU deployment runs Triton-CPU kernels). parity
  deploys nothing on the CPU and runs no Triton kernel: while that one check runs (in `config`),
  it reads Triton as present; every other reading of `HAS_TRITON` is unchanged.
The CPU platform, config classes, loading, MoE experts and the other kernel stand-ins are the
0.33 family's. Composed of: its own `Launch`, `Config`, `Capture` and `Draft`, ahead of the 0.33
adapter.

DFlash (method "dflash", which a DFlash draft is served with unless the serve arguments name
another): the ids come from the same `get_eagle3_aux_layers_from_config` as EAGLE-3's (a
top-level `eagle_aux_hidden_state_layer_ids` as written, else `dflash_config.target_layer_ids`
+1, ...), else the target's EAGLE-3 default; the same `set_eagle3_aux_hidden_state_layers`
sets the capture, and the draft class (`DFlashQwen3ForCausalLM`) takes the concatenation in
`combine_hidden_states`. As in the 0.33 family (which also runs it, on both runners); the 0.16-0.27
families refuse it as parity's limit, or as the release's answer where its SpeculativeConfig has
no dflash.
"""

from __future__ import annotations

from contextlib import contextmanager

from packaging.specifiers import SpecifierSet

from . import v0_33
from .. import launch

RELEASES = SpecifierSet(">=0.34,<0.35")
VERIFIED = ("0.34.0",)

CODE_PATHS = {
    **{k: v for k, v in v0_33.CODE_PATHS.items() if k != "v1"},
    "share": "vllm.v1.worker.gpu.spec_decode.eagle.utils.maybe_share_target_embed / share_target_lm_head "
             "(as load_eagle_model calls them)",
}
DFLASH_CODE_PATHS = {  # the same keys for a DFlash draft (method "dflash"): the contract records these
    **CODE_PATHS,
    "v2": v0_33.DFLASH_CODE_PATHS["v2"],
}
DUMP_METHOD = v0_33.DUMP_METHOD
RUNNERS = ("v2",)
GPU_DEFAULT_RUNNER = "v2"

# A release that still has V1 is not run by this family (its v1 column would vanish unseen).
ABSENT = ("vllm.v1.worker.gpu_model_runner",)

IMPORTS = (
    *(m for m in v0_33.IMPORTS if m not in ("vllm.v1.worker.gpu_model_runner", "vllm.v1.spec_decode.eagle")),
    "vllm.v1.worker.gpu.spec_decode.eagle.utils",
)
REQUIRES = (
    *v0_33.REQUIRES,
    "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils.set_eagle3_aux_hidden_state_layers",
    "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils.get_eagle3_aux_layers_from_config",
    "vllm.v1.worker.gpu.spec_decode.eagle.utils.maybe_share_target_embed",
    "vllm.v1.worker.gpu.spec_decode.eagle.utils.share_target_lm_head",
    "vllm.v1.worker.gpu.spec_decode.eagle.utils.get_target_lm_head",
)


class Launch:
    """The resolved config's own answer for the aux states; DFlash drafts run."""

    # The launch contract: whether the target's aux states are captured is the resolved
    # config's own `SpeculativeConfig.uses_aux_hidden_states` (what V2's runner reads in 0.34).
    LAUNCH = staticmethod(launch.uses_aux_hidden_states)
    RUNS_DFLASH = True  # a DFlash draft is extracted (probe.dflash_refusal)
    RUNS_RANKS = True  # the capture runs under a parallel layout (vllm/ranks.py): V2, the one runner


class Config:
    """0.33's config, with the CPU platform's config check run as on an x86 CPU with Triton-CPU."""

    def config(self, target_dir: str, speculative: dict | None, port: int, max_model_len: int | None = 128):
        """0.33's, with the CPU platform's config check run as on an x86 CPU with Triton-CPU
        (only while this config is built; afterwards the platform's own check is back)."""
        with _triton_read_as_present_by_the_platform_check():
            return super().config(target_dir, speculative, port, max_model_len)


class Capture:
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


class Draft:
    """The target's embedding and LM head shared as V2's `load_eagle_model` shares them."""

    def share_with_target(self, draft, target, vllm_config) -> None:
        """Share the target's embedding and LM head with the draft exactly as V2's
        `load_eagle_model` does after building it: on the target's language model (a
        multimodal target's `get_language_model()`), its embedding, then its LM head."""
        from vllm.config import set_current_vllm_config
        from vllm.v1.worker.gpu.spec_decode.eagle.utils import (
            get_target_lm_head,
            maybe_share_target_embed,
            share_target_lm_head,
        )

        language_model = target.get_language_model() if hasattr(target, "get_language_model") else target
        spec = vllm_config.speculative_config
        with set_current_vllm_config(vllm_config):
            maybe_share_target_embed(draft, draft.model, language_model.model)
            share_target_lm_head(draft, get_target_lm_head(target, language_model),
                                 spec.draft_lm_head_quantization)


class Adapter(Launch, Config, Capture, Draft, v0_33.Adapter):
    """vLLM 0.34's calls: the 0.33 adapter's, but where 0.34 differs."""


@contextmanager
def _triton_read_as_present_by_the_platform_check():
    """The current platform's `check_and_update_config` reads `vllm.triton_utils.HAS_TRITON` as
    True while it runs; no other code sees the flag changed, and the method is restored on exit."""
    import vllm.triton_utils as triton_utils
    from vllm.platforms import current_platform

    platform = type(current_platform)
    own = platform.__dict__.get("check_and_update_config")  # the classmethod object, where defined
    bound = current_platform.check_and_update_config

    def check_with_triton(*args, **kwargs):
        had, triton_utils.HAS_TRITON = triton_utils.HAS_TRITON, True
        try:
            return bound(*args, **kwargs)
        finally:
            triton_utils.HAS_TRITON = had

    platform.check_and_update_config = staticmethod(check_with_triton)
    try:
        yield
    finally:
        if own is None:
            del platform.check_and_update_config  # inherited again
        else:
            platform.check_and_update_config = own


def _only_v2(runner: str) -> str:
    if runner != "v2":
        raise ValueError(f"vLLM 0.34 has one model runner (v2), not {runner!r}")
    return runner
