"""The dump concern: the data-generation dump (speculators' `scripts/launch_vllm.py`), what vLLM
writes per token for the launch ids.

- `Dump` (0.17 on): the `extract_hidden_states` speculative method with the launch ids; every
  runner then sets them. Its proposer writes the aux states stacked in the order the model
  returned them (`ExtractHiddenStatesProposer.propose`; 0.34: `ExtractHiddenStatesSpeculator.
  propose` in `v1/worker/gpu/spec_decode/extract_hidden_states.py`, the same stack).
- `DumpSetOnModel` (0.8.5-0.16): no `extract_hidden_states` speculative method (SpeculativeConfig
  has none): a dump is what the model's own capture returns for the launch ids set with its own
  setter (`set_aux_hidden_state_layers`), in the order it captures them.
"""

from __future__ import annotations


class Dump:
    """The dump as the `extract_hidden_states` speculative method writes it."""

    def dump_config(self, launch_ids: list[int]) -> dict | None:
        """The speculative config of speculators' data generation (scripts/launch_vllm.py): the
        `extract_hidden_states` method with the launch ids; both runners then set them."""
        return {"method": "extract_hidden_states", "num_speculative_tokens": 1,
                "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": list(launch_ids)}}}

    def set_dump(self, model, launch_ids: list[int]) -> None:
        """Only for a family without a dump method (dump_config None)."""
        raise NotImplementedError("vLLM 0.33 sets the dump's ids through its speculative config")

    def dump_stack(self, aux):
        """What the extract_hidden_states proposer writes per token: the aux states stacked in
        the order the model returned them ([T, slots, H]), as `ExtractHiddenStatesProposer.propose` does
        (0.34: `ExtractHiddenStatesSpeculator.propose`, the same stack)."""
        import torch

        return torch.stack(aux, dim=1)


class DumpSetOnModel(Dump):
    """No `extract_hidden_states` method: the dump is set on the model itself."""

    def dump_config(self, launch_ids: list[int]) -> dict | None:
        """No extract_hidden_states method: the dump is set on the model itself (set_dump)."""
        return None

    def set_dump(self, model, launch_ids: list[int]) -> None:
        model.set_aux_hidden_state_layers(tuple(launch_ids))
