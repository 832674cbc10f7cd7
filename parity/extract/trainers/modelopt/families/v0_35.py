"""The ModelOpt 0.35 family: 0.35.0 to 0.36.x. 0.35 is ModelOpt's first release with HF EAGLE-3
(`use_aux_hidden_state`): its conversion merges no defaults, its forward runs the draft only in
training, its rotary is the training model's, and its package has no exporter of the draft (a served
folder comes from a script outside it, its config read as the user wrote it).

Its picks (parity.extract.trainers.modelopt.variants): convert_whole_default, no_exporter,
training_mode, rotary_on_model.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .. import variants

RELEASES = SpecifierSet(">=0.35,<0.37")
VERIFIED = ("0.35.1",)

IMPORTS = variants.IMPORTS
CODE_PATHS = variants.code_paths(pop="pop_aux_hidden_states", export="none",
                                 draft="plugins.transformers.EagleModule; rotary: model.eagle_rotary_emb")

convert = variants.convert_whole_default
export = variants.no_exporter
mode = variants.training_mode
rotary = variants.rotary_on_model

resolved_ids, fc, lm_head, draft = variants.resolved_ids, variants.fc, variants.lm_head, variants.draft
