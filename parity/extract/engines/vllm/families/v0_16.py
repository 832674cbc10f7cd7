"""vLLM 0.16: the family adapter (one EAGLE-3 runner, no `extract_hidden_states` yet).

What differs from the 0.17 family (v0_17.py), found by running 0.16.0's code:
- no `v1/worker/gpu/spec_decode/eagle/eagle3_utils`: the (opt-in) V2 runner sets no aux
  layers, so V1 is the one runner that serves an EAGLE-3 draft;
- no `extract_hidden_states` speculative method (SpeculativeConfig has none): a
  data-generation dump of 0.16 is what the model's own capture returns for the launch ids set
  with its own setter, as for 0.11;
- the model's default layers are `get_eagle3_aux_hidden_state_layers()` (as in 0.17).
The runner's statement, the CPU platform, the MoE experts (vLLM's own CPU experts) and the
kernel stand-ins are the 0.17 family's.
The built draft (BuiltDraft and its config keys, docs/built-draft.md): its `Eagle3LlamaForCausalLM`
is 0.17.0's (the same installed source), built by V1's `EagleProposer._get_model`, read as there.

Composed of: its own `Runner`, the 0.11 family's `Dump` (the dump set on the model), the 0.17
family's `Platform` and `Capture`, the 0.22 family's `Launch` and `Kernels`, the 0.11 family's
`Platform`, ahead of the 0.33 adapter (never through another family's adapter).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from . import v0_11, v0_17, v0_22, v0_33

RELEASES = SpecifierSet(">=0.16,<0.17")
VERIFIED = ("0.16.0",)

CODE_PATHS = {k: v for k, v in v0_17.CODE_PATHS.items() if k != "v2"}
DUMP_METHOD = "the model's own capture set to the launch ids (0.16 has no extract_hidden_states)"
RUNNERS = ("v1",)
GPU_DEFAULT_RUNNER = "v1"

IMPORTS = tuple(m for m in v0_17.IMPORTS if m != "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils")
REQUIRES = tuple(r for r in v0_17.REQUIRES if "eagle3_utils" not in r)


class Runner:
    """V1, the one runner that sets EAGLE-3 aux layers."""

    def gpu_default_runner(self, vllm_config) -> str:
        return "v1"  # the one runner that sets EAGLE-3 aux layers


class Adapter(Runner, v0_11.Dump, v0_17.Platform, v0_17.Capture, v0_22.Launch, v0_22.Kernels, v0_11.Platform,
              v0_33.Adapter):
    """vLLM 0.16's calls: the 0.33 adapter's, with the 0.11 family's dump and platform, the 0.17
    family's platform and capture and the 0.22 family's launch and kernels, but where 0.16 differs."""
