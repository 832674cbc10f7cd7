"""SpecForge release families: one module per family, each declaring the releases it covers.

A family module defines
- `RELEASES`: a `packaging` SpecifierSet, the version range of the family;
- `VERIFIED`: the releases in that range the test suite runs the probe against;
- `CODE_PATHS`: the SpecForge functions the probe runs (recorded in every contract);
- `resolve_ids(run_ids, draft_config_path, target_dir)`, `capture_backend(model)`,
  `wrap_logits(model)`, `normalize(raw, max_len)`, `target_head(target_dir, lm_head)`,
  `shift(input_ids, target, loss_mask)`: the steps of SpecForge's own data path, each calling
  the installed release's code where this family finds it;
- `draft_config(draft_config_path, target_dir)`, `build_draft(cfg, config)`, `train_dtype(cfg)`:
  the draft as training resolves its config and builds it (parity.contract.BuiltDraft).

Adding a family is adding one module here (parity.extract.families finds it); a release
outside every family's range is refused by the probe, naming the ranges looked in.
"""

from __future__ import annotations

from types import ModuleType

from ....families import family_for as _family_for


def family_for(version: str) -> ModuleType:
    """The family module whose range holds specforge `version`; UnsupportedRelease when none does."""
    return _family_for("specforge", version, __name__)
