"""Injected: an unseen SGLang release (0.5.99) whose aux-id reading moved: the installed
0.5.23 with `resolve_spec_aux_hidden_state_config` gone from its module.

Run as `python -m tests.drift.serving_unseen_release_moved` in place of the serving probe:
no family's code paths are then all found, and the probe must refuse the release loudly,
naming what each family looked for."""

import importlib

from parity.extract import standins
from tests.drift.serving_unseen_release import probe  # reports 0.5.99

standins.install()
moved = importlib.import_module("sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state")
del moved.resolve_spec_aux_hidden_state_config

if __name__ == "__main__":
    raise SystemExit(probe.main())
