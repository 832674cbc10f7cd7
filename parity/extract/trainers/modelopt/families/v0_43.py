"""The ModelOpt 0.43 family: 0.43.x. 0.43 merges the run's architecture config over its defaults (still
the llama3 rope, base 500000) and exports with `export_speculative_decoding`; it has no
`eagle_use_torch_compile` and no `eagle_export_rope_scaling`.

Its picks (parity.extract.trainers.modelopt.variants): convert_merged, export_speculative,
eval_mode, rotary_in_draft.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from .. import variants

RELEASES = SpecifierSet(">=0.43,<0.44")
VERIFIED = ("0.43.0",)

IMPORTS = variants.IMPORTS
CODE_PATHS = variants.code_paths(pop="pop_and_gather_aux_hiddens", export="speculative",
                                 draft="plugins.transformers.EagleModule (its rotary_emb)")

convert = variants.convert_merged
export = variants.export_speculative
mode = variants.eval_mode
rotary = variants.rotary_in_draft

resolved_ids, fc, lm_head, draft = variants.resolved_ids, variants.fc, variants.lm_head, variants.draft
