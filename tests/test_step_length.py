"""The extractors read as named steps: no function in parity/extract is longer than a screen.

A child procedure that grows past it (the SGLang probe's extract was 241 lines, with 12 early
returns) is split into steps a reader can name, each stopping the reply where it must: docs/
development.md, 'Layout'. This reads the code, nothing runs."""

from __future__ import annotations

import ast
from pathlib import Path

from .helpers import ROOT

MOST = 60  # lines, its signature and docstring included


def long_functions(folder: Path) -> list[str]:
    long = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MOST:
                    long.append(f"{path.relative_to(folder)}:{node.lineno} {node.name} ({lines} lines)")
    return long


def test_no_function_in_extract_is_longer_than_a_screen():
    long = long_functions(ROOT / "parity" / "extract")
    assert not long, f"longer than {MOST} lines, split into named steps: " + "; ".join(long)


def test_a_function_one_line_too_long_is_named(tmp_path):
    def body(indent: str) -> str:
        return "".join(f"{indent}x{i} = {i}\n" for i in range(MOST - 1))

    fits = f"def fits():\n{body('    ')}"  # MOST lines
    grown = f"class A:\n    def grown(self):\n{body('        ')}        pass\n"  # MOST + 1
    (tmp_path / "probe.py").write_text(fits + "\n\n" + grown)
    assert long_functions(tmp_path) == [f"probe.py:{MOST + 4} grown ({MOST + 1} lines)"]
