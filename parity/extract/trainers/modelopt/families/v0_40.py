"""The ModelOpt 0.40 family: 0.40.x. 0.40 runs the draft's first step in eval too (its
training-time-test loop), gathering with `pop_and_gather_aux_hiddens`; otherwise as 0.37.

Its picks (parity.extract.trainers.modelopt.variants): convert_whole_default, export_checkpoint,
eval_mode, rotary_on_model.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .. import variants

RELEASES = SpecifierSet(">=0.40,<0.41")
VERIFIED = ()

IMPORTS = variants.IMPORTS
CODE_PATHS = variants.code_paths(pop="pop_and_gather_aux_hiddens", export="checkpoint",
                                 draft="plugins.transformers.EagleModule; rotary: model.eagle_rotary_emb")

convert = variants.convert_whole_default
export = variants.export_checkpoint
mode = variants.eval_mode
rotary = variants.rotary_on_model

resolved_ids, fc, lm_head, draft = variants.resolved_ids, variants.fc, variants.lm_head, variants.draft
