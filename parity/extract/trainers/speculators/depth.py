"""The draft's trained depth as the installed speculators reads it, in its probe
(parity.contract.TrainedDepth; docs/launch.md).

speculators' trainer writes the TTT steps it unrolled the draft over into the checkpoint it
saves: `Eagle3DraftModel.from_training_args` builds the config with
`GreedyTokenProposalConfig(speculative_tokens=ttt_steps)`. The depth is the default proposal
method's `speculative_tokens`, read from the config the release's own classes load (the same
loading the built draft uses, parity.extract.trainers.speculators.built): a speculators-format
checkpoint by its `Eagle3SpeculatorConfig`, which records it; a config in the served EAGLE-3
form as its `Eagle3Converter` maps it, which records none and sets the converter's own value.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from .built import _config, is_speculators_format


def trained_depth(run, request: dict) -> dict[str, Any] | None:
    """{TrainedDepth fields} for the probe's draft request ({"config", "target", "from"}); None
    when the loaded config has no greedy proposal with a token count."""
    draft = request["config"]
    with tempfile.TemporaryDirectory(prefix="parity-depth-") as tmp:
        config, _how = _config(run, draft, request["target"], Path(tmp) / "real")
    spec = getattr(config, "speculators_config", None)
    methods = list(getattr(spec, "proposal_methods", None) or ())
    default = getattr(spec, "default_proposal_method", None)
    method = next((m for m in methods if getattr(m, "proposal_type", None) == default), methods[0] if methods else None)
    steps = getattr(method, "speculative_tokens", None)
    if not isinstance(steps, int) or steps < 1:
        return None
    key = f"speculators_config.proposal_methods[{getattr(method, 'proposal_type', '?')}].speculative_tokens"
    if is_speculators_format(draft):
        return {"steps": steps, "recorded": True,
                "source": f"{key} of {request.get('from', 'the draft')}, read by its Eagle3SpeculatorConfig "
                          "(speculators' trainer writes its ttt_steps there)"}
    return {"steps": steps, "recorded": False,
            "source": f"speculators' own {key}, filled in by its Eagle3Converter loading the served config, "
                      "which records no depth; give --trained for the checkpoint's"}


__all__ = ["trained_depth"]
