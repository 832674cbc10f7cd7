"""The ModelOpt 0.43 family: 0.43.0 to 0.43.x. 0.43 merges the run's architecture config over its
defaults (still the llama3 rope, base 500000) and exports with `export_speculative_decoding`; it has
no `eagle_use_torch_compile` and no `eagle_export_rope_scaling`.

- conversion: `modelopt.torch.speculative.convert(model, [("eagle", config)])` (variants.convert_merged);
- the aux ids: `eagle_architecture_config.eagle_aux_hidden_state_layer_ids`, else its default
  (`HFEagleModel._set_default_aux_hidden_state_layers`: `list(set([1, N//2-1, N-4]))`, a set's
  order), set on `model.eagle_config` by the conversion;
- the capture: a forward hook on each base decoder layer whose index is among the ids
  (`_collect_aux_hidden_states_forward_hook`), concatenated in the order the hooks fire
  (`pop_and_gather_aux_hiddens`) into the draft's `eagle_module.fc`;
- the loss target: the base model's own logits (`model.lm_head` on its last hidden state), detached;
- the draft: `eagle_module` (`plugins.transformers.EagleModule`); its rotary embedding the draft module's own
  `rotary_emb`, made on its first forward;
- the export: `modelopt.torch.export.export_speculative_decoding` (`plugins.hf_spec_export`).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .. import variants

RELEASES = SpecifierSet(">=0.43,<0.44")
VERIFIED = ("0.43.0",)

IMPORTS = ("transformers", "modelopt.torch.speculative", "modelopt.torch.export")

CODE_PATHS = {
    "convert": "modelopt.torch.speculative.convert(model, [('eagle', config)]) -> HFEagleModel.modify",
    "ids": "eagle_architecture_config.eagle_aux_hidden_state_layer_ids, else "
           "HFEagleModel._set_default_aux_hidden_state_layers",
    "capture": "HFEagleModel._collect_aux_hidden_states_forward_hook -> HFEagleModel.pop_and_gather_aux_hiddens "
               "-> eagle_module.fc",
    "loss_target": "HFEagleModel.forward: the base model's lm_head logits, detached",
    "draft": "model.eagle_module (plugins.transformers.EagleModule (its rotary_emb))",
    "export": "modelopt.torch.export.export_speculative_decoding -> plugins.hf_spec_export (config template)",
}

convert = variants.convert_merged
export = variants.export_speculative
mode = variants.eval_mode
rotary = variants.rotary_in_draft

# where the converted model keeps what the probe reads
resolved_ids, fc, lm_head, draft = variants.resolved_ids, variants.fc, variants.lm_head, variants.draft
