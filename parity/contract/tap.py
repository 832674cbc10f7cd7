"""`Tap`: one canonical name for "which hidden state of the target".

The residual-stream index (docs/numbering.md, 'The residual-stream index'):

    h0      embedding output (input to decoder layer 0)
    hK      residual stream after K decoder layers = output of 0-based layer K-1,
            residual included, before any norm
    final   the model's final norm applied to hN: the state that feeds the LM head

Two qualifiers make a different tap, because a tensor that differs by them is a
different input to the draft:

    hK.delta   layer K-1's update without the residual added (hK - h(K-1))
    hK.normed  the final norm applied to hK (for K = N this is `final`)
    hK.ln      layer K's own input_layernorm applied to hK

Short names parse and print round-trip: `Tap.parse("h31").name == "h31"`.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Norm(str, Enum):
    """Which norm, if any, was applied to a residual-stream state."""

    none = "none"
    final = "final"  # the model's final norm (model.norm)
    input = "input"  # the input_layernorm of the next decoder layer


_NAME = re.compile(r"^(?:h(?P<k>0|[1-9][0-9]*)(?:\.(?P<q>delta|normed|ln))?|(?P<final>final))$", re.ASCII)
_QUALIFIER = {"delta": (False, Norm.none), "normed": (True, Norm.final), "ln": (True, Norm.input)}


class Tap(BaseModel):
    """A hidden state of the target model, named independently of any system's ids."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["stream", "final"] = Field(
        description="'stream': the residual stream after `layer` decoder layers (layer 0 is "
        "the embedding output); 'final': the final norm applied to the last layer's output."
    )
    layer: int | None = Field(
        default=None,
        ge=0,
        description="For kind 'stream': K, the number of decoder layers applied "
        "(0 = embedding output). None for kind 'final'.",
    )
    residual: bool = Field(
        default=True,
        description="True when the residual is included (the stream itself); False for the "
        "layer's update alone, before the residual add.",
    )
    norm: Norm = Field(default=Norm.none, description="Norm applied to the state, if any.")

    @model_validator(mode="after")
    def _consistent(self) -> "Tap":
        if self.kind == "final":
            if self.layer is not None or not self.residual or self.norm != Norm.none:
                raise ValueError("'final' takes no layer, residual or norm qualifier")
        else:
            if self.layer is None:
                raise ValueError("a stream tap needs its layer count K")
            if not self.residual and self.norm != Norm.none:
                raise ValueError("a layer update without residual cannot also be normed")
            if self.layer == 0 and not self.residual:
                raise ValueError("h0 (the embedding) has no layer update")
        return self

    # -- names ------------------------------------------------------------------------

    @classmethod
    def parse(cls, name: str) -> "Tap":
        """Parse a short name (`h0`, `h31`, `h31.delta`, `h31.normed`, `h31.ln`, `final`)."""
        m = _NAME.match(name.strip())
        if not m:
            raise ValueError(
                f"not a hidden-state name: {name.strip()!r} (expected h<K>, h<K>.delta with K >= 1, "
                "h<K>.normed, h<K>.ln or final)"
            )
        if m["final"]:
            return cls(kind="final")
        if m["k"] == "0" and m["q"] == "delta":  # matches the pattern, but names nothing
            raise ValueError(
                f"not a hidden-state name: {name.strip()!r}: h0 (the embedding) has no layer update, "
                "so no .delta (expected h<K>, h<K>.delta with K >= 1, h<K>.normed, h<K>.ln or final)"
            )
        residual, norm = _QUALIFIER.get(m["q"] or "", (True, Norm.none))
        return cls(kind="stream", layer=int(m["k"]), residual=residual, norm=norm)

    @classmethod
    def stream(cls, k: int) -> "Tap":
        return cls(kind="stream", layer=k)

    @classmethod
    def final(cls) -> "Tap":
        return cls(kind="final")

    @property
    def name(self) -> str:
        if self.kind == "final":
            return "final"
        suffix = {(True, Norm.none): "", (False, Norm.none): ".delta",
                  (True, Norm.final): ".normed", (True, Norm.input): ".ln"}
        return f"h{self.layer}{suffix[(self.residual, self.norm)]}"

    def __str__(self) -> str:
        return self.name

    def canonical(self, num_layers: int) -> "Tap":
        """`hN.normed` and `final` are the same tensor; prefer `final`."""
        if self.kind == "stream" and self.layer == num_layers and self.norm == Norm.final:
            return Tap.final()
        return self

    def is_plain_stream(self) -> bool:
        return self.kind == "stream" and self.residual and self.norm == Norm.none

    def in_range(self, num_layers: int) -> bool:
        return self.kind == "final" or (self.layer is not None and self.layer <= num_layers)


def parse_taps(text: str) -> list[Tap]:
    """Parse a comma-separated list such as 'h0,h3,h31,h59' (brackets and spaces allowed)."""
    body = text.strip().strip("[]").strip()
    if not body:
        raise ValueError("empty list of hidden states")
    return [Tap.parse(part) for part in body.split(",")]


def names(taps) -> list[str | None]:
    return [t.name if t is not None else None for t in taps]
