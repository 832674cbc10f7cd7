"""Plain-text reports (no colour codes): contracts and check results (check.py), the version
matrix (matrix.py), and the one table helper every report's table is printed with (table.py).
The forward and replay tables (parity/report/forward.py, parity/report/replay.py) print
through the same helper."""

from .check import describe_tap, render_check, render_contract

__all__ = ["describe_tap", "render_check", "render_contract"]
