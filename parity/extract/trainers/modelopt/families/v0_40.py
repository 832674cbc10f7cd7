"""The ModelOpt 0.40 family: 0.40.x. 0.40 runs the draft's first step in eval too (its forward's
training-time-test loop); the conversion still takes the architecture config as given, merging no
defaults, and `export_hf_checkpoint` exports the draft.

- conversion: `modelopt.torch.speculative.convert(model, [("eagle", config)])` (variants.convert_whole_default);
- the aux ids: `eagle_architecture_config.eagle_aux_hidden_state_layer_ids`, else its default
  (`HFEagleModel._set_default_aux_hidden_state_layers`: `list(set([1, N//2-1, N-4]))`, a set's
  order), set on `model.eagle_config` by the conversion;
- the capture: a forward hook on each base decoder layer whose index is among the ids
  (`_collect_aux_hidden_states_forward_hook`), concatenated in the order the hooks fire
  (`pop_and_gather_aux_hiddens`) into the draft's `eagle_module.fc`;
- the loss target: the base model's own logits (`model.lm_head` on its last hidden state), detached;
- the draft: `eagle_module` (`plugins.transformers.EagleModule`); its rotary embedding
  `model.eagle_rotary_emb`, made at conversion;
- the export: `modelopt.torch.export.export_hf_checkpoint`, which for an EAGLE-only model writes the
  draft's `config.json` from `hf_spec_export`'s template.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .. import variants

RELEASES = SpecifierSet(">=0.40,<0.41")
VERIFIED = ()

IMPORTS = ("transformers", "modelopt.torch.speculative", "modelopt.torch.export")

CODE_PATHS = {
    "convert": "modelopt.torch.speculative.convert(model, [('eagle', config)]) -> HFEagleModel.modify",
    "ids": "eagle_architecture_config.eagle_aux_hidden_state_layer_ids, else "
           "HFEagleModel._set_default_aux_hidden_state_layers",
    "capture": "HFEagleModel._collect_aux_hidden_states_forward_hook -> HFEagleModel.pop_and_gather_aux_hiddens "
               "-> eagle_module.fc",
    "loss_target": "HFEagleModel.forward: the base model's lm_head logits, detached",
    "draft": "model.eagle_module (plugins.transformers.EagleModule; rotary: model.eagle_rotary_emb)",
    "export": "modelopt.torch.export.export_hf_checkpoint -> plugins.hf_spec_export (config template)",
}

convert = variants.convert_whole_default
export = variants.export_checkpoint
mode = variants.eval_mode
rotary = variants.rotary_on_model

# where the converted model keeps what the probe reads
resolved_ids, fc, lm_head, draft = variants.resolved_ids, variants.fc, variants.lm_head, variants.draft
