"""vLLM 0.9-0.10: the family adapter (EAGLE-3 on the V1 engine, before any config key for the ids).

What differs from the 0.11 family (v0_11.py), found by running 0.10.2's code and reading each
release's installed `EagleProposer.load_model` (0.9.0, 0.9.0.1, 0.9.1, 0.9.2, 0.10.0, 0.10.1,
0.10.1.1, 0.10.2):
- the proposer shares the target's token embedding with the draft in one statement,
  `if get_pp_group().world_size == 1 and <draft embedding shape> == <target embedding shape>:`
  (0.9.1 on: a draft with its own embedding of another shape keeps it), written on
  `target_language_model` (0.9.2 on) or `target_model` (0.9.1); in 0.9.0-0.9.0.1 the test is
  `get_pp_group().world_size == 1` alone: the draft's embedding is replaced whatever its
  shape. The LM head is shared only for a method other than eagle3 (`... != 'eagle3' and
  hasattr(<target>, 'lm_head')`): an EAGLE-3 draft keeps its own. parity runs the statements
  of the installed method (SHARE_EMBEDDING, SHARE_HEAD: the first found);
- SpeculativeConfig takes EAGLE-3 only for a Llama target (0.9.x: "Eagle3 is only supported for
  Llama models") or Llama and Qwen (0.10.x); other targets are the engine's own refusal;
- the draft's `compute_logits` takes a second argument, `sampling_metadata`, which the V1
  proposer passes as None; parity passes the same;
- 0.9.0-0.9.0.x's CPU attention backend is still V0's `TorchSDPABackend`, whose constructor
  refuses a head size its PagedAttention kernels lack (32-256): the tiny target's 16 is added to
  the list it reads (replace_kernels); its kernels are never called (parity's attention body runs);
- `SiluAndMul.__init__` fetches `torch.ops._C.silu_and_mul` on the CPU too (its `forward_native`
  runs): registered, where absent, as an op that raises if called (kernels.absent_custom_ops);
- the config module is one file (`vllm/config.py`) up to 0.10.0 and a package from 0.10.1; the
  names parity calls (`ModelConfig`, `SpeculativeConfig`, `VllmConfig`, `CompilationConfig(level=)`)
  are the same in both.
As in 0.11: the CPU platform set by hand, compilation off with `level=0`, the V1 runner alone
(its `load_model` ends with `if self.use_aux_hidden_state_outputs:` setting the model's default
layers: the draft's config is never read), the Llama capture `hidden_states + residual` before
layer i, no `extract_hidden_states` (a dump is the model's own capture of the launch ids), and
only the attention body stood in; those calls are the 0.11 family's.

Composed of: its own `Launch` (the 0.11 family's rule and call, these releases' parser), `Kernels` (ahead of the 0.11 family's, which it extends),
`Target` (also the 0.8.5 family's) and `Draft`, the 0.11 family's `Platform`, `Kernels`, `Config`,
`Capture` and `Dump`, ahead of the 0.33 adapter (never through another family's adapter).
Config keys read (docs/built-draft.md): not recorded. The installed code would allow it (0.10.2's
`SpeculatorsConfig`, the draft class the proposer's statement builds), but this family's draft build
is not read (BUILDS_DRAFT False), and parity carries the reads in the built-draft contract, judged
only beside a built draft: a contract holding reads alone would report a built draft compared in
every field. They come with this family's built draft.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect

from packaging.specifiers import SpecifierSet

from . import v0_11, v0_33
from .. import launch
from ....run_until import CodePathMoved, find_statement, run_statement
from ....shrink import TINY

RELEASES = SpecifierSet(">=0.9,<0.11")
VERIFIED = ("0.10.2",)

CODE_PATHS = {**v0_11.CODE_PATHS,
              "share": "vllm.v1.spec_decode.eagle.EagleProposer.load_model (its embedding and LM-head "
                       "sharing statements)"}
DUMP_METHOD = "the model's own capture set to the launch ids (0.9-0.10 have no extract_hidden_states)"
RUNNERS = v0_11.RUNNERS
GPU_DEFAULT_RUNNER = v0_11.GPU_DEFAULT_RUNNER
IMPORTS = v0_11.IMPORTS
# the loader function the proposer builds the draft with (0.8.5 builds the class itself)
REQUIRES = (*v0_11.REQUIRES, "vllm.model_executor.model_loader.utils.initialize_model")

# The `if` tests of the installed `EagleProposer.load_model` that share the target's embedding and
# LM head with the draft, as each release writes them (newest first).
SHARE_EMBEDDING = (
    "get_pp_group().world_size == 1 and self.model.model.embed_tokens.weight.shape == "
    "target_language_model.model.embed_tokens.weight.shape",  # 0.9.2-0.10.x
    "get_pp_group().world_size == 1 and self.model.model.embed_tokens.weight.shape == "
    "target_model.model.embed_tokens.weight.shape",  # 0.9.1
    "get_pp_group().world_size == 1",  # 0.9.0, 0.9.0.1: whatever the shapes
)
SHARE_HEAD = (
    "self.vllm_config.speculative_config.method != 'eagle3' and hasattr(target_language_model, 'lm_head')",
    "self.vllm_config.speculative_config.method != 'eagle3' and hasattr(target_model, 'lm_head')",  # 0.9.0-0.9.1
)


def first_statement(func, tests: tuple[str, ...]) -> str:
    """The first of `tests` whose `if` statement is in `func`'s installed source; CodePathMoved
    naming every one looked for when none is."""
    for test in tests:
        try:
            find_statement(func, test)
        except CodePathMoved:
            continue
        return test
    raise CodePathMoved(f"looked for one of the statements {' | '.join(f'`if {t}:`' for t in tests)} in "
                        f"{func.__module__}.{func.__qualname__}; there is none")


def logits_as_proposed(draft):
    """`draft` (or the target) whose `compute_logits(hidden_states)` passes the
    `sampling_metadata=None` the V1 proposer and runner pass (`self.model.compute_logits(
    sample_hidden_states, None)`, 0.8.5-0.10.x)."""
    if "sampling_metadata" in inspect.signature(draft.compute_logits).parameters:
        draft.compute_logits = functools.partial(draft.compute_logits, sampling_metadata=None)
    return draft


class Launch:
    """The launch contract (also the 0.8.5 family's): `vllm serve`'s parser where these releases
    keep it (`make_arg_parser` in `vllm.entrypoints.openai.cli_args`, FlexibleArgumentParser in
    `vllm.utils`), `create_speculative_config` called as their `create_engine_config` calls it,
    and the aux states captured as their `GPUModelRunner.__init__` decides (`use_eagle()` and the
    method eagle3, inline, as in 0.11: checked on 0.8.5 and 0.10.2)."""

    LAUNCH = launch.Launch(aux=launch.runner_0_11_answer, parser=("vllm.entrypoints.openai.cli_args", "vllm.utils"),
                           speculative=launch.speculative_config_0_11)


class Kernels:
    """`silu_and_mul` registered where absent, then the 0.11 family's stand-ins, then the V0
    attention backend's head sizes (also the 0.8.5 family's)."""

    def replace_kernels(self) -> list[str]:
        """The 0.11 family's attention stand-in, and (0.8.5-0.9.0.x) the head sizes the CPU
        platform's V0 attention backend accepts: `TorchSDPABackendImpl.__init__` refuses a head
        size PagedAttention's CPU kernels lack (32-256), and the tiny target's is shrink.TINY's
        16 (the real models' 128 is listed). Those kernels are never called: the attention body
        is parity's stand-in, and the CUDA wheel has no CPU paged kernel (`torch.ops._C` has none:
        a call raises)."""
        from .. import kernels  # deferred: heavy, imports torch (a family module imports without it)

        # SiluAndMul.__init__ looks up torch.ops._C.silu_and_mul on the CPU too (0.8.5-0.10.1; its
        # forward_native runs): registered where absent as an op that raises if called.
        replaced = [*(f"torch.ops._C.{name} -> raises if called (looked up, never called, on this path)"
                      for name in kernels.absent_custom_ops("silu_and_mul")), *super().replace_kernels()]
        if importlib.util.find_spec("vllm.attention.backends.torch_sdpa") is None:
            return replaced
        from vllm.attention.backends import torch_sdpa

        if TINY["head_dim"] in torch_sdpa.PagedAttention.get_supported_head_sizes():
            return replaced
        listed = list(torch_sdpa.PagedAttention.get_supported_head_sizes())
        torch_sdpa.PagedAttention = type("PagedAttention", (torch_sdpa.PagedAttention,), {
            "get_supported_head_sizes": staticmethod(lambda: [*listed, TINY["head_dim"]])})
        return [*replaced, f"vllm.attention.backends.torch_sdpa.PagedAttention.get_supported_head_sizes -> also "
                           f"{TINY['head_dim']}, the tiny target's (its paged kernels are never called)"]


class Target:
    """The target's `compute_logits` taking the runner's None (also the 0.8.5 family's)."""

    def build_target(self, vllm_config):
        """The 0.33 family's build, with the target's `compute_logits` taking the `None` the V1
        runner passes it (`self.model.compute_logits(sample_hidden_states, None)`), as the draft's."""
        return logits_as_proposed(super().build_target(vllm_config))


class Draft:
    """The draft's `compute_logits` taking the proposer's None, and the proposer's sharing statements."""

    BUILDS_DRAFT = False  # the built draft is read from the 0.11 family on

    def build_draft(self, vllm_config, prefix: str = "draft"):
        """The 0.33 family's build, with the draft's `compute_logits(hidden_states,
        sampling_metadata)` taking the `None` the V1 proposer passes it (`compute_logits(
        sample_hidden_states, None)`): these releases' draft classes have no default for it."""
        return logits_as_proposed(super().build_draft(vllm_config, prefix))

    def share_with_target(self, draft, target, vllm_config) -> None:
        """The installed `EagleProposer.load_model`'s two sharing statements, run on a holder of
        the draft with the target under both names the releases give it."""
        from vllm.config import set_current_vllm_config
        from vllm.v1.spec_decode.eagle import EagleProposer

        holder = v0_33._Proposer(draft, vllm_config)
        with set_current_vllm_config(vllm_config):
            for tests in (SHARE_EMBEDDING, SHARE_HEAD):
                run_statement(EagleProposer.load_model, first_statement(EagleProposer.load_model, tests), holder,
                              target_model=target, target_language_model=target)


class Adapter(Launch, Kernels, Target, Draft, v0_11.Platform, v0_11.Kernels, v0_11.Config, v0_11.Capture,
              v0_11.Dump, v0_33.Adapter):
    """vLLM 0.9-0.10's calls: the 0.11 family's, but the proposer's sharing statements."""
