"""The ModelOpt 0.41 family: 0.41.0 to 0.42.x. 0.41 moved the draft's rotary embedding into the draft
module (made on its first forward) and added `eagle_decoder_type`; otherwise as 0.40. 0.42's
training allows only the cuDNN attention kernel, so its forward runs in eval.

Its picks (parity.extract.trainers.modelopt.variants): convert_whole_default, export_checkpoint,
eval_mode, rotary_in_draft.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .. import variants

RELEASES = SpecifierSet(">=0.41,<0.43")
VERIFIED = ()

IMPORTS = variants.IMPORTS
CODE_PATHS = variants.code_paths(pop="pop_and_gather_aux_hiddens", export="checkpoint",
                                 draft="plugins.transformers.EagleModule (its rotary_emb)")

convert = variants.convert_whole_default
export = variants.export_checkpoint
mode = variants.eval_mode
rotary = variants.rotary_in_draft

resolved_ids, fc, lm_head, draft = variants.resolved_ids, variants.fc, variants.lm_head, variants.draft
