"""Injected drift: the installed SpecForge's id resolution changes its default (a release that
picks [2, N//2, N-3] when neither the run nor the draft names ids, instead of [1, N//2-1, N-4]).

Patches `specforge.algorithms.model_providers.resolve_eagle_capture_layers` in place (its eagle3
provider looks it up there at each call), then runs the real SpecForge probe.
Run as `python -m tests.drift.specforge_moved_default` in place of that probe."""

import specforge.algorithms.model_providers as providers

from parity.extract.trainers.specforge import probe

original = providers.resolve_eagle_capture_layers


def _moved_default(cfg, draft_config, target_config):
    layers = original(cfg, draft_config, target_config)
    eagle = (draft_config.get("eagle_config", {}) if isinstance(draft_config, dict)
             else getattr(draft_config, "eagle_config", {})) or {}
    if cfg.model.aux_hidden_state_layer_ids is None and eagle.get("eagle_aux_hidden_state_layer_ids") is None:
        n = int(getattr(target_config, "text_config", target_config).num_hidden_layers)
        return [2, n // 2, n - 3]
    return layers


providers.resolve_eagle_capture_layers = _moved_default

if __name__ == "__main__":
    raise SystemExit(probe.main())
