"""The ModelOpt 0.44 family: where 0.44.0 to 0.47.x keep each step of their HF EAGLE-3 training path.
0.44 is the first release whose conversion takes this config as is (`eagle_use_torch_compile` and
`eagle_export_rope_scaling` appear there, and its architecture defaults are merged in); 0.45 moved
the HF plugin to `plugins.hf_eagle` and `plugins.modeling_eagle` and sorted its default ids. Nothing
below names those modules: each call goes through the converted model, and the default ids are what
its conversion takes when given none.

- conversion: `modelopt.torch.speculative.convert(model, [("eagle", config)])` with
`eagle_decoder_type` "llama" (EAGLE-3: its eagle3 default architecture sets `use_aux_hidden_state`),
`eagle_use_torch_compile` off (a CPU run; it compiles nothing the probe reads), and the run's
`eagle_architecture_config` (the aux ids, the draft's widths); - the aux ids:
`eagle_architecture_config.eagle_aux_hidden_state_layer_ids`, else its default (0.45 on:
`plugins.hf_eagle.default_eagle_aux_layer_ids(N)`, `sorted({1, N//2-1, N-4})`; 0.44: the same set
unsorted), set on `model.eagle_config` by the conversion; - the capture: a forward hook on each base
decoder layer whose index is among the ids (`_collect_aux_hidden_states_forward_hook`), concatenated
in the order the hooks fire (`pop_and_gather_aux_hiddens`) into the draft's `eagle_module.fc`; - the
loss target: the base model's own logits (`model.lm_head` on its last hidden state), detached, as
soft targets (`_compute_eagle_loss`); - the draft: `eagle_module`
(`plugins.modeling_eagle.EagleModule`), built from the base model's config class over the
architecture config; - the export: `modelopt.torch.export.export_speculative_decoding`
(`plugins.hf_spec_export`), which writes `config.json` from its template (values from the draft's
config, else the base's) and, when the draft trained with the default rope, its
`eagle_export_rope_scaling`.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .. import variants

RELEASES = SpecifierSet(">=0.44,<0.48")
VERIFIED = ("0.44.0", "0.47.0")

IMPORTS = variants.IMPORTS
CODE_PATHS = variants.code_paths(
    pop="pop_and_gather_aux_hiddens", ids="the conversion's default",
    loss_target="HFEagleModel.forward: the base model's lm_head logits, detached (soft targets)",
    draft="EagleModule: plugins.modeling_eagle from 0.45, plugins.transformers before",
    export="modelopt.torch.export.export_speculative_decoding -> "
           "modelopt.torch.export.plugins.hf_spec_export (config template, eagle_export_rope_scaling)")

convert = variants.convert_merged_no_compile
export = variants.export_speculative
mode = variants.eval_mode
rotary = variants.rotary_in_draft

resolved_ids, fc, lm_head, draft = variants.resolved_ids, variants.fc, variants.lm_head, variants.draft
