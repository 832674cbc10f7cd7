"""The launch concern: how the user's serve arguments resolve (the launch contract,
parity.extract.engines.vllm.launch: `vllm serve`'s parser, `create_speculative_config`, and
whether the target's aux states are captured), which drafts the family runs (DFlash) and whether
it runs the capture on several ranks.

- `Launch` (0.28-0.33): vLLM's own parser and config classes, and V2's
  `eagle3_utils.requires_aux_hidden_states` for whether the target's aux states are captured
  (0.28-0.32 have none: V1's `EagleProposer` answers there). 0.28's parser is imported from
  where its `entrypoints/cli/serve.py` imports it (`vllm.entrypoints.openai.cli_args`); the typed
  0.33 parser and answer had stopped the seed launch there (ModuleNotFoundError
  vllm.entrypoints.common). A DFlash draft (method "dflash") is extracted: both runners read its
  `dflash_config.target_layer_ids` +1 with their EAGLE-3 reader (`get_eagle3_aux_layers_from_config`:
  a top-level `eagle_aux_hidden_state_layer_ids` as written, else those, else the target's EAGLE-3
  default) and set them with their EAGLE-3 setter, and the proposer's `DFlashQwen3ForCausalLM`
  takes the concatenation in `combine_hidden_states` (the family's DFLASH_CODE_PATHS). Not yet on
  several ranks (two runners).
- `AuxStatesByResolvedConfig` (0.34): whether the target's aux states are captured is the
  resolved config's own `SpeculativeConfig.uses_aux_hidden_states` (what V2's runner reads);
  DFlash as in `Launch`; the capture runs under a parallel layout (vllm/ranks.py): V2, the one runner.
- `ProposerAnswerWithoutDflash` (0.16-0.27): `vllm serve`'s parser is
  `vllm.entrypoints.openai.cli_args.make_arg_parser`; whether the aux states are captured is V1's
  `EagleProposer`'s answer (`_get_eagle3_use_aux_hidden_state_from_config`, for a `use_eagle()`
  method): V2, where a GPU runs it, captures them for the method eagle3 inline in its runner, the
  same answer for a draft whose eagle_config does not turn `use_aux_hidden_state` off (V1's alone
  reads it). 0.21 and 0.22-0.27 have the method dflash, but V2 refuses it in 0.22 (its
  `init_speculator`: "dflash is not supported yet"; `use_v2_model_runner` then picks V1), which
  parity's per-runner columns do not yet express (V2's would read the EAGLE-3 default): a DFlash
  draft is refused as parity's limit, never the release's (probe.dflash_refusal). 0.17.0 has no
  dflash.
- `RunnerInitAnswer` (0.11): `vllm serve`'s parser is `vllm.entrypoints.openai.cli_args.
  make_arg_parser` on the `FlexibleArgumentParser` that module imports, taken from it: 0.11.0 keeps
  the class in `vllm.utils`, later releases placed here (0.12-0.15, outside every range) in
  `vllm.utils.argparse_utils` (0.15 no longer re-exports it from `vllm.utils`);
  `create_speculative_config` also takes the chunked-prefill and log-stats flags (passed where the
  release's signature has them: 0.15 takes the two configs only); whether the aux states are
  captured is decided inline in `GPUModelRunner.__init__` (`use_eagle()` and the method eagle3).
- `RunnerInitAnswerParserInUtils` (0.8.5-0.10): as `RunnerInitAnswer`, the parser where these
  releases keep it (`make_arg_parser` in `vllm.entrypoints.openai.cli_args`,
  FlexibleArgumentParser in `vllm.utils`), `create_speculative_config` called as their
  `create_engine_config` calls it (checked on 0.8.5 and 0.10.2).
"""

from __future__ import annotations

from .. import launch as resolution


class Launch:
    """How the serve command resolves (the launch contract) and which drafts this family runs."""

    LAUNCH = staticmethod(resolution.requires_or_proposer_answer)
    RUNS_DFLASH = True  # a DFlash draft is extracted (probe.dflash_refusal)
    # Whether the capture runs on several ranks (a parallel layout: parity's multi-process
    # capture, vllm/ranks.py); where not, a layout of more than one rank is parity's limit, said
    # (docs/launch.md, "The parallel layout"). 0.33 runs two runners: not yet.
    RUNS_RANKS = False
    rank, tp, pp = 0, 1, 1  # this process's place in the layout (setup_rank)

    def setup_rank(self, rank: int, tp: int, pp: int) -> None:
        """The next `config` builds its process group as rank `rank` of `tp` x `pp` ranks."""
        self.rank, self.tp, self.pp = rank, tp, pp


class AuxStatesByResolvedConfig(Launch):
    """The resolved config's own answer for the aux states; DFlash drafts run; several ranks run."""

    LAUNCH = staticmethod(resolution.uses_aux_hidden_states)
    RUNS_RANKS = True  # the capture runs under a parallel layout (vllm/ranks.py): V2, the one runner


class ProposerAnswerWithoutDflash(Launch):
    """The parser where these releases keep it, V1's EagleProposer's answer; a DFlash draft is
    parity's limit."""

    LAUNCH = resolution.Launch(aux=resolution.eagle_proposer_answer, parser=resolution.OPENAI_PARSER)
    RUNS_DFLASH = False


class RunnerInitAnswer(Launch):
    """0.11's parser, its create_speculative_config call and its runner's rule for the aux states."""

    LAUNCH = resolution.Launch(aux=resolution.runner_0_11_answer,
                               parser=("vllm.entrypoints.openai.cli_args", "vllm.entrypoints.openai.cli_args"),
                               speculative=resolution.speculative_config_0_11)


class RunnerInitAnswerParserInUtils(Launch):
    """0.11's rule and call, the parser's class in `vllm.utils`."""

    LAUNCH = resolution.Launch(aux=resolution.runner_0_11_answer,
                               parser=("vllm.entrypoints.openai.cli_args", "vllm.utils"),
                               speculative=resolution.speculative_config_0_11)
