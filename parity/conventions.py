"""Layer-id conventions of systems parity does not run live, translated to canonical taps.

Each system numbers hidden states its own way (docs/numbering.md); a number read
in the wrong convention is the commonest EAGLE-3 bug. `to_taps("eagle", [2, 16, 29], 32)`
says what those ids mean physically. SGLang is deliberately absent: its meaning is
always extracted from the installed code (parity.extract.engines.sglang).

The table here holds the systems that are not an engine or a trainer of parity's. An engine or
a trainer declares its own convention in its folder (`CONVENTION`, built with `input_to` or
`output_of`), and the full table is `parity.extract.numbering.conventions()`, read through the
registries: this module knows no engine or trainer by name.

A convention with `run_by` set is a typed rule for a system parity runs instead (SpecForge:
`--trainer specforge`) or does not run at all (TensorRT-LLM): it translates ids for reading
(`parity conventions`, `to_taps`), but never describes a dump for a verdict or a fix
(`datagen_refusal`): a typed rule cannot fail when the system changes, and SpecForge trains
on no speculators dump at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from .contract.tap import Tap
from .errors import UserError


class ConventionError(UserError, ValueError):
    """An id list that the named convention cannot express."""


@dataclass(frozen=True)
class Convention:
    name: str
    summary: str
    source: str  # where the rule was read
    defaults: Callable[[int], list[int]]  # ids used when none are given, for N layers
    tap: Callable[[int, int], Tap]  # (id, N) -> canonical tap; raises ConventionError
    sorts: bool = False  # the system sorts and de-duplicates ids before capturing
    appends_last: bool = False  # data generation appends hN after the given ids
    run_by: str | None = None  # typed rule, not run: what to use instead of it for a verdict

    @property
    def label(self) -> str:
        return "typed rule, not run: translation only" if self.run_by else "data-generation convention"


def datagen_refusal(name: str, table: "dict[str, Convention] | None" = None) -> str | None:
    """Why `name` (in `table`, else CONVENTIONS) cannot describe a dump for a verdict (None: it can)."""
    conv = (CONVENTIONS if table is None else table).get(name)
    if conv is None or conv.run_by is None:
        return None
    return (f"convention {name!r} is a typed rule, not run, and gives no verdict or fix: {conv.run_by}")


def _check(k: int, lo: int, hi: int, name: str, n: int) -> None:
    if not lo <= k <= hi:
        raise ConventionError(f"id {k} is out of range for {name} on a {n}-layer model "
                              f"(valid: {lo}..{hi})")


def input_to(name: str, allow_zero: bool = True):
    """id k = input to 0-based layer k = hk (k = N is the last layer's output, pre-norm)."""
    def tap(k: int, n: int) -> Tap:
        _check(k, 0 if allow_zero else 1, n, name, n)
        return Tap.stream(k)
    return tap


def output_of(name: str, minus_one_is_final: bool = False):
    """id k = output of 0-based layer k = h(k+1)."""
    def tap(k: int, n: int) -> Tap:
        if k == -1 and minus_one_is_final:
            return Tap.final()
        _check(k, 0, n - 1, name, n)
        return Tap.stream(k + 1)
    return tap


def _hf_hidden_states(k: int, n: int) -> Tap:
    # transformers utils/generic.py: hidden_states[k] is the input to layer k for k < N;
    # the last entry is appended after model.norm, so [N] is post-final-norm.
    _check(k, 0, n, "HF output_hidden_states", n)
    return Tap.final() if k == n else Tap.stream(k)


CONVENTIONS: dict[str, Convention] = {c.name: c for c in [
    Convention(
        "hf", "HF transformers output_hidden_states index: [k] = hk for k < N, [N] = final (post-norm)",
        "transformers utils/generic.py (verified by running transformers 5.19)",
        defaults=lambda n: [], tap=_hf_hidden_states),
    Convention(
        "speculators-datagen", "speculators 0.5-0.9 data generation (vLLM ids) plus the appended last layer N",
        "speculators scripts/launch_vllm.py --include-last-layer (0.5-0.9)",
        defaults=lambda n: [2, n // 2, n - 3], tap=input_to("speculators data generation"),
        sorts=True, appends_last=True),
    Convention(
        "speculators-datagen-0.3", "speculators 0.3-0.4 custom vLLM worker: id k = output of layer k = h(k+1)",
        "speculators v0.3.0/v0.4.0 data generation worker",
        defaults=lambda n: [2, n // 2, n - 3, n - 1], tap=output_of("speculators 0.3-0.4 data generation")),
    Convention(
        "eagle", "SafeAILab EAGLE-3 training: id k = input to layer k = hk (no embedding)",
        "SafeAILab EAGLE traineagle3/modeling_llama_kv.py",
        defaults=lambda n: [2, n // 2, n - 3], tap=input_to("SafeAILab EAGLE", allow_zero=False)),
    Convention(
        "trtllm", "TensorRT-LLM: id k = output of 0-based layer k = h(k+1); sorted; -1 = final",
        "tensorrt_llm/_torch/speculative/eagle3.py",
        defaults=lambda n: [1, n // 2 - 1, n - 4], tap=output_of("TensorRT-LLM", minus_one_is_final=True),
        sorts=True, run_by="parity does not run TensorRT-LLM's data generation, so no dump layout can be "
                           "derived from it; give the dump's layout itself (--dump-layout)"),
]}


def to_taps(system: str, ids: Sequence[int] | None, num_layers: int,
            table: dict[str, Convention] | None = None) -> list[Tap]:
    """Translate `ids` written in `system`'s convention (None: its defaults) into taps, in the
    order the system captures them (appending hN where its data generation does). `system` is
    looked up in `table` (None: CONVENTIONS, the systems that are not an engine or a trainer)."""
    table = CONVENTIONS if table is None else table
    conv = table.get(system)
    if conv is None:
        raise ConventionError(f"unknown convention {system!r}; known: {', '.join(table)}")
    if num_layers < 1:
        raise ConventionError(f"a model needs at least one layer, got {num_layers}")
    ids = list(conv.defaults(num_layers) if ids is None else ids)
    if conv.sorts:
        ids = sorted(set(ids))
    elif len(set(ids)) != len(ids):
        raise ConventionError(f"duplicate ids {ids} for {system}")
    taps = [conv.tap(k, num_layers) for k in ids]
    if conv.appends_last and Tap.stream(num_layers) not in taps:
        taps.append(Tap.stream(num_layers))
    return taps
