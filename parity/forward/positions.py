"""Which positions `parity forward` feeds the draft: today's first rows, then runs past each
position the draft declares.

Rope enters attention only through position differences, and a short sequence at positions
0..T-1 has differences below T: the lowest frequencies barely turn there, so a rope base or a
scaling that changes only them (llama3's scaling leaves every wavelength below
`original_max_position_embeddings / high_freq_factor` as it was) gives the same logits. A long
context makes them turn. So the draft's rows are placed as a long context places them, with
the context in between left out: the first rows at 0, 1, ..., then a run of a few rows just
before and past each declared bound (the draft's `max_position_embeddings`, its rope scaling's
`original_max_position_embeddings`, as trained and as served). A row of such a run attends to
the first rows from hundreds or thousands of positions away, as a token that deep in a context
does; each side computes its rope at those position values with its own code (SGLang's
ForwardBatch positions, vLLM's positions tensor, speculators' position_ids), nothing of length
131072 is built.

A bound the served context does not reach (the target's `max_position_embeddings`) is not fed:
a server never runs positions past its context.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

RUN = 5  # rows per bound: bound-1, bound, ..., bound+3
WITHIN = "within, near 0"


class PositionBound(BaseModel):
    position: int = Field(description="The first position past the declared one (its value: positions "
                                      "0..value-1 are declared).")
    key: str = Field(description="The config key that declares it (max_position_embeddings or "
                                 "rope_scaling.original_max_position_embeddings).")
    sides: list[str] = Field(description="Which configs declare it: trained, served or both.")

    @property
    def group(self) -> str:
        """The name of the rows at or past it."""
        return f"past {self.key} {self.position}"


class PositionPlan(BaseModel):
    positions: list[int] = Field(description="The serving position of each draft row at TTT step 0 (row "
                                             "t; step k feeds position + k; training numbers the same row "
                                             "one higher, as its shift_batch does).")
    bounds: list[PositionBound] = Field(default_factory=list, description="The bounds fed past, ascending.")
    notes: list[str] = Field(default_factory=list, description="Bounds not fed and why.")

    @model_validator(mode="after")
    def _increasing(self):
        if any(b <= a for a, b in zip(self.positions, self.positions[1:])):
            raise ValueError(f"positions must increase: {self.positions}")
        if [b.position for b in self.bounds] != sorted({b.position for b in self.bounds}):
            raise ValueError("bounds must be distinct and ascending")
        return self

    def group(self, position: int) -> str:
        """The group of a (serving) position: past the highest bound it reaches; else 'within, near
        0' (the first rows) or 'within, just below' the lowest bound (its run's first row)."""
        past = [b for b in self.bounds if position >= b.position]
        if past:
            return past[-1].group
        return self._below() if self.bounds and position >= self.bounds[0].position - 1 else WITHIN

    def _below(self) -> str:
        return f"within, just below {self.bounds[0].key} {self.bounds[0].position}"

    def groups(self) -> list[str]:
        return [WITHIN] + ([self._below()] if self.bounds else []) + [b.group for b in self.bounds]

    def rows_by_group(self, rows: int, step: int) -> dict[str, list[int]]:
        """The rows 0..rows-1 of TTT step `step` by the group of the position they run at."""
        out: dict[str, list[int]] = {}
        for r in range(min(rows, len(self.positions))):
            out.setdefault(self.group(self.positions[r] + step), []).append(r)
        return out


def declared(config: dict) -> dict[str, int]:
    """The positions a draft config (a served one, or speculators' transformer_layer_config)
    declares: max_position_embeddings and the rope scaling's original_max_position_embeddings
    (rope_scaling, or transformers 5's rope_parameters)."""
    out = {}
    if isinstance(config.get("max_position_embeddings"), int):
        out["max_position_embeddings"] = config["max_position_embeddings"]
    for key in ("rope_scaling", "rope_parameters"):
        scaling = config.get(key)
        if isinstance(scaling, dict) and isinstance(scaling.get("original_max_position_embeddings"), int):
            out["rope_scaling.original_max_position_embeddings"] = scaling["original_max_position_embeddings"]
    return out


def plan(seq_len: int, steps: int, trained: dict, served: dict, context: int | None) -> PositionPlan:
    """Positions for `seq_len` draft rows: the first at 0.., then RUN rows around each bound
    `trained` or `served` declares that the served `context` reaches past (steps included)."""
    found: dict[int, PositionBound] = {}
    for side, config in (("trained", trained), ("served", served)):
        for key, position in declared(config).items():
            if position in found:
                if side not in found[position].sides:
                    found[position].sides.append(side)
            else:
                found[position] = PositionBound(position=position, key=key, sides=[side])
    notes = []
    bounds = []
    for b in sorted(found.values(), key=lambda b: b.position):
        top = b.position + RUN - 2 + steps  # the highest position its run reaches at the last step
        if context is not None and top >= context:
            notes.append(f"{b.key} {b.position} ({' and '.join(b.sides)}) not fed past: the served "
                         f"context ends at {context}")
        else:
            bounds.append(b)
    while bounds and seq_len - RUN * len(bounds) < RUN:  # too short for every run: the highest go
        dropped = bounds.pop()
        notes.append(f"{dropped.key} {dropped.position} not fed past: --seq-len {seq_len} leaves no room "
                     "for its rows")
    while True:  # a run that would overlap the first rows or the run before it is no run of its own
        first = seq_len - RUN * len(bounds)
        end, overlapping = first - 1, None
        for b in bounds:
            if b.position - 1 <= end:
                overlapping = b
                break
            end = b.position + RUN - 2
        if overlapping is None:
            break
        bounds.remove(overlapping)
        notes.append(f"{overlapping.key} {overlapping.position} lies among the rows before it (fed as they are)")
    positions = list(range(first))
    for b in bounds:
        positions += [b.position - 1 + i for i in range(RUN)]
    return PositionPlan(positions=positions, bounds=bounds, notes=notes)


def spans(positions: list[int]) -> str:
    """[0, 1, 2, 511, 512] -> '0..2, 511..512'."""
    out, start = [], 0
    for i in range(1, len(positions) + 1):
        if i == len(positions) or positions[i] != positions[i - 1] + 1:
            a, b = positions[start], positions[i - 1]
            out.append(str(a) if a == b else f"{a}..{b}")
            start = i
    return ", ".join(out)
