"""The target concern: the target model as vLLM's loader builds it (`get_model` builds the model
class vLLM's registry picks, runs its `load_weights` on the checkpoint's safetensors and the real
`process_weights_after_loading`).

- `Target` (0.11 on): the loader's model, in eval mode.
- `TargetLogitsTakeNone` (0.8.5-0.10): the model's `compute_logits` takes a second argument,
  `sampling_metadata`, which the V1 runner and proposer pass as None (`self.model.compute_logits(
  sample_hidden_states, None)`); parity passes the same (`logits_as_proposed`, also the draft's in
  these releases).
"""

from __future__ import annotations

import functools
import inspect


def logits_as_proposed(model):
    """`model` (a draft or the target) whose `compute_logits(hidden_states)` passes the
    `sampling_metadata=None` the V1 proposer and runner pass (`self.model.compute_logits(
    sample_hidden_states, None)`, 0.8.5-0.10.x)."""
    if "sampling_metadata" in inspect.signature(model.compute_logits).parameters:
        model.compute_logits = functools.partial(model.compute_logits, sampling_metadata=None)
    return model


class Target:
    """The target as vLLM's loader builds it."""

    def build_target(self, vllm_config):
        from vllm.config import set_current_vllm_config
        from vllm.model_executor.model_loader import get_model

        with set_current_vllm_config(vllm_config):
            return get_model(vllm_config=vllm_config).eval()


class TargetLogitsTakeNone(Target):
    """The target's `compute_logits` taking the runner's None."""

    def build_target(self, vllm_config):
        """`Target`'s build, with the target's `compute_logits` taking the `None` the V1 runner
        passes it (`self.model.compute_logits(sample_hidden_states, None)`), as the draft's."""
        return logits_as_proposed(super().build_target(vllm_config))
