"""The one plain-text table every report prints: the slot table, the matrix, the forward and
replay tables.

Each column is as wide as its widest cell (and at least its `width`); cells are padded to
it, left- or right-aligned. The last cell of a row is never padded on the right and never
widens its column, so a row with fewer cells ends in one cell that runs on past the
columns after it (an error instead of the cells). A note is a line of its own under the row
above, not aligned. No line ends in spaces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class Column:
    title: str
    align: Literal["left", "right"] = "left"
    width: int = 0  # the least width; the widest cell widens it
    gap: int = 2  # spaces before this column (before the first: the table's indent)


@dataclass
class Table:
    columns: list[Column]
    indent: str = "  "
    _rows: list[tuple[str, ...] | str] = field(default_factory=list)

    def row(self, *cells: str) -> None:
        if not 1 <= len(cells) <= len(self.columns):
            raise ValueError(f"a row of {len(cells)} cells in a table of {len(self.columns)} columns")
        self._rows.append(tuple(cells))

    def note(self, line: str) -> None:
        """A line printed as is under the row above."""
        self._rows.append(line)

    def lines(self, header: bool = True) -> list[str]:
        rows = [tuple(c.title for c in self.columns)] if header else []
        rows += self._rows
        cells = [r for r in rows if not isinstance(r, str)]
        widths = [max([c.width] + [len(r[i]) for r in cells if i < len(r) - 1]) for i, c in enumerate(self.columns)]
        return [r if isinstance(r, str) else self._line(r, widths) for r in rows]

    def _line(self, cells: tuple[str, ...], widths: list[int]) -> str:
        out = self.indent
        for i, (cell, column, width) in enumerate(zip(cells, self.columns, widths)):
            if i:
                out += " " * column.gap
            if column.align == "right":
                out += cell.rjust(width)
            else:
                out += cell if i == len(cells) - 1 else cell.ljust(width)
        return out.rstrip()
