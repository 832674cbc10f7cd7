"""The ModelOpt 0.35 family: 0.35.0 to 0.36.x. 0.35 is ModelOpt's first release with HF EAGLE-3
(`use_aux_hidden_state`). Its conversion takes the architecture config as given, merging no
defaults, and the package has no exporter of the draft.

- conversion: `modelopt.torch.speculative.convert(model, [("eagle", config)])` (variants.convert_whole_default);
- the aux ids: `eagle_architecture_config.eagle_aux_hidden_state_layer_ids`, else its default
  (`HFEagleModel._set_default_aux_hidden_state_layers`: `list(set([1, N//2-1, N-4]))`, a set's
  order), set on `model.eagle_config` by the conversion;
- the capture: a forward hook on each base decoder layer whose index is among the ids
  (`_collect_aux_hidden_states_forward_hook`), concatenated in the order the hooks fire
  (`pop_aux_hidden_states`) into the draft's `eagle_module.fc`;
- the loss target: the base model's own logits (`model.lm_head` on its last hidden state), detached;
- the draft: `eagle_module` (`plugins.transformers.EagleModule`); its rotary embedding
  `model.eagle_rotary_emb`, made at conversion;
- the export: none in the package (`export_hf_checkpoint` skips `eagle_module`); a served draft
  folder comes from a script outside it, its config read as the user wrote it.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .. import variants

RELEASES = SpecifierSet(">=0.35,<0.37")
VERIFIED = ("0.35.1",)

IMPORTS = ("transformers", "modelopt.torch.speculative", "modelopt.torch.export")

CODE_PATHS = {
    "convert": "modelopt.torch.speculative.convert(model, [('eagle', config)]) -> HFEagleModel.modify",
    "ids": "eagle_architecture_config.eagle_aux_hidden_state_layer_ids, else "
           "HFEagleModel._set_default_aux_hidden_state_layers",
    "capture": "HFEagleModel._collect_aux_hidden_states_forward_hook -> HFEagleModel.pop_aux_hidden_states "
               "-> eagle_module.fc",
    "loss_target": "HFEagleModel.forward: the base model's lm_head logits, detached",
    "draft": "model.eagle_module (plugins.transformers.EagleModule; rotary: model.eagle_rotary_emb)",
    "export": "none in the package: export_hf_checkpoint skips eagle_module",
}

convert = variants.convert_whole_default
export = variants.no_exporter
mode = variants.training_mode
rotary = variants.rotary_on_model

# where the converted model keeps what the probe reads
resolved_ids, fc, lm_head, draft = variants.resolved_ids, variants.fc, variants.lm_head, variants.draft
