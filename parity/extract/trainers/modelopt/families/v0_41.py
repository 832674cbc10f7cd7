"""The ModelOpt 0.41 family: 0.41.0 to 0.42.x. 0.41 moved the draft's rotary embedding into the draft
module and added `eagle_decoder_type`; the conversion still merges no defaults.

- conversion: `modelopt.torch.speculative.convert(model, [("eagle", config)])` (variants.convert_whole_default);
- the aux ids: `eagle_architecture_config.eagle_aux_hidden_state_layer_ids`, else its default
  (`HFEagleModel._set_default_aux_hidden_state_layers`: `list(set([1, N//2-1, N-4]))`, a set's
  order), set on `model.eagle_config` by the conversion;
- the capture: a forward hook on each base decoder layer whose index is among the ids
  (`_collect_aux_hidden_states_forward_hook`), concatenated in the order the hooks fire
  (`pop_and_gather_aux_hiddens`) into the draft's `eagle_module.fc`;
- the loss target: the base model's own logits (`model.lm_head` on its last hidden state), detached;
- the draft: `eagle_module` (`plugins.transformers.EagleModule`); its rotary embedding the draft module's own
  `rotary_emb`, made on its first forward;
- the export: `modelopt.torch.export.export_hf_checkpoint` (`hf_spec_export`'s template).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .. import variants

RELEASES = SpecifierSet(">=0.41,<0.43")
VERIFIED = ()

IMPORTS = ("transformers", "modelopt.torch.speculative", "modelopt.torch.export")

CODE_PATHS = {
    "convert": "modelopt.torch.speculative.convert(model, [('eagle', config)]) -> HFEagleModel.modify",
    "ids": "eagle_architecture_config.eagle_aux_hidden_state_layer_ids, else "
           "HFEagleModel._set_default_aux_hidden_state_layers",
    "capture": "HFEagleModel._collect_aux_hidden_states_forward_hook -> HFEagleModel.pop_and_gather_aux_hiddens "
               "-> eagle_module.fc",
    "loss_target": "HFEagleModel.forward: the base model's lm_head logits, detached",
    "draft": "model.eagle_module (plugins.transformers.EagleModule (its rotary_emb))",
    "export": "modelopt.torch.export.export_hf_checkpoint -> plugins.hf_spec_export (config template)",
}

convert = variants.convert_whole_default
export = variants.export_checkpoint
mode = variants.eval_mode
rotary = variants.rotary_in_draft

# where the converted model keeps what the probe reads
resolved_ids, fc, lm_head, draft = variants.resolved_ids, variants.fc, variants.lm_head, variants.draft
