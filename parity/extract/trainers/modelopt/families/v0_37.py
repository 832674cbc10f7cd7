"""The ModelOpt 0.37 family: 0.37.0 to 0.39.x. 0.37 added the draft's exporter to
`export_hf_checkpoint` (`plugins.hf_spec_export`'s template); otherwise as 0.35. 0.39's training
forward compiles flex attention, which parity's CPU children do not (its limit, exit 2).

Its picks (parity.extract.trainers.modelopt.variants): convert_whole_default, export_checkpoint,
training_mode, rotary_on_model.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .. import variants

RELEASES = SpecifierSet(">=0.37,<0.40")
VERIFIED = ()

IMPORTS = variants.IMPORTS
CODE_PATHS = variants.code_paths(pop="pop_aux_hidden_states", export="checkpoint",
                                 draft="plugins.transformers.EagleModule; rotary: model.eagle_rotary_emb")

convert = variants.convert_whole_default
export = variants.export_checkpoint
mode = variants.training_mode
rotary = variants.rotary_on_model

resolved_ids, fc, lm_head, draft = variants.resolved_ids, variants.fc, variants.lm_head, variants.draft
