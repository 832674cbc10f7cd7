"""The GPU's memory, answered for the launch resolution only, and never deciding a field.

SGLang 0.4.5.post3-0.4.6.post4's `ServerArgs.__post_init__` asks `gpu_mem =
get_device_memory_capacity(self.device)` and computes with the answer unguarded (`gpu_mem <=
81920` unless `--mem-fraction-static` is given). A GPU start-up gets its card's memory there
(nvidia-smi's `memory.total`, in MiB); off a GPU the query answers None and the resolution stops
(cpu_path.gpu_memory_unknown: parity's limit, never the engine's refusal).

For the launch contract only, parity answers that query as GPU start-ups would, once per card in
`CARDS`, the same arguments resolved from scratch on each (`same_on_every_card`), and keeps the
result only when every card gives the same one: each reported launch field at the same value and
set by the same function, or the same refusal (its type, raised at the same line). Anything else is parity's limit
(`StandInUsed`, naming the field, or the outcome, that depended on the memory), so the stand-in
value never decides what is reported. This check runs on every resolution that needs the answer.
What the memory does decide in these releases (`mem_fraction_static`, `chunked_prefill_size`,
`cuda_graph_max_bs`) is no launch field; where it reaches one, as `--page-size 4096` does
(`chunked_prefill_size % page_size`: 2048 on a card under 25 000 MiB, refused; 8192 above,
resolved), the check says so. The capture never sees the answer: the extraction's server args
do not run `__post_init__`, and the query's own name is restored after each resolution.
"""

from __future__ import annotations

import traceback
from contextlib import contextmanager
from typing import Callable, Iterator

from ...child import words
from ...standins import StandInUsed
from .cpu_path import MEMORY_QUERY

# The cards a GPU start-up could run on, as their query answers (MiB, nvidia-smi's memory.total,
# nominal): each side of every threshold of these releases' memory arithmetic (25 000 MiB for the
# chunked prefill and CUDA graph sizes, 81 920 and 96 GiB for the static memory fraction).
CARDS = {"24 GB": 24 * 1024.0, "80 GB": 80 * 1024.0, "141 GB": 141 * 1024.0}


@contextmanager
def answering(namespace: dict, mib: float) -> Iterator[None]:
    """`namespace`'s `get_device_memory_capacity` (the globals of the release's function that
    asked it: cpu_path.memory_query_namespace) answers `mib`, as a card of that memory would,
    while the block runs; the release's own function is put back after."""
    original = namespace[MEMORY_QUERY]

    def capacity(*args, **kwargs) -> float:
        return mib

    namespace[MEMORY_QUERY] = capacity
    try:
        yield
    finally:
        namespace[MEMORY_QUERY] = original


def _where(exc: BaseException) -> tuple[str, str, int | None]:
    """A refusal by what raised it (its type and the innermost frame: file and line), not by its
    words, which may carry a number the memory decided (the same assert on every card is one
    refusal)."""
    frames = traceback.extract_tb(exc.__traceback__)
    last = frames[-1] if frames else None
    return type(exc).__name__, last.filename if last else "", last.lineno if last else None


def same_on_every_card(attempt: Callable[[float], tuple[dict, dict]]) -> tuple[dict, dict]:
    """`attempt(mib)` (the resolution's effective fields and who set each) on every card of
    `CARDS`; the one result when all agree. Every card refusing at the same line raises the
    first refusal (the engine's answer to these arguments on any of them). A reported field whose
    value or setter differs between cards, or a resolution refused on some cards only, raises
    StandInUsed naming it: the launch would depend on the GPU's memory, which parity's CPU run
    cannot know."""
    outcomes: dict[str, tuple[dict, dict] | BaseException] = {}
    for card, mib in CARDS.items():
        try:
            outcomes[card] = attempt(mib)
        except Exception as exc:  # noqa: BLE001 - compared below: the same refusal on every card is the engine's
            outcomes[card] = exc
    refusals = {card: o for card, o in outcomes.items() if isinstance(o, BaseException)}
    if len(refusals) == len(outcomes) and len({_where(e) for e in refusals.values()}) == 1:
        raise next(iter(refusals.values()))
    if refusals:
        said = "; ".join(f"{card}: " + (f"refused ({words(o)})" if isinstance(o, BaseException) else "resolved")
                         for card, o in outcomes.items())
        raise _depends(f"whether sglang resolves these arguments depends on the GPU's memory: {said}")
    results = list(outcomes.values())
    fields = sorted({f for effective, _ in results for f in effective})
    differ = [f for f in fields if len({repr(effective.get(f)) for effective, _ in results}) > 1]
    setters = [f for f in fields if f not in differ and len({by.get(f) for _, by in results}) > 1]
    if differ or setters:
        parts = [f"{f} ({', '.join(f'{card}: {o[0].get(f)!r}' for card, o in outcomes.items())})" for f in differ]
        parts += [f"who sets {f} ({', '.join(f'{card}: {o[1].get(f)}' for card, o in outcomes.items())})"
                  for f in setters]
        raise _depends("sglang's resolution of these arguments depends on the GPU's memory: " + "; ".join(parts))
    return results[0]


def _depends(what: str) -> StandInUsed:
    return StandInUsed(f"{what}. parity's CPU run answers {MEMORY_QUERY} as a GPU would "
                       f"({', '.join(f'{card}: {mib:g} MiB' for card, mib in CARDS.items())}) and reports a launch "
                       "only where the answer decides none of it; here it would, so no launch is reported")


def said(limit: str) -> str:
    """The report's line for the replaced query (`launch.replaced['gpu_memory']`)."""
    return (f"answered as a GPU would ({', '.join(f'{card}: {mib:g} MiB' for card, mib in CARDS.items())}), for the "
            f"resolution only: {limit}; every launch field is the same on each card, so none depends on it; "
            "the capture runs without it")


__all__ = ["CARDS", "answering", "said", "same_on_every_card"]
