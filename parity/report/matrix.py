"""The version matrix, as a text table (the terminal) and as Markdown (a CI summary)."""

from __future__ import annotations

import shlex

from ..matrix.rows import Matrix, ServingRow, fc_text, fix_text
from .table import Column, Table


def _against(m: Matrix) -> list[tuple[str, str]]:
    """(the training contract a serving cell is judged against, its column title)."""
    if m.contract:
        return [("lock", "vs lock")]
    return [(f"{m.trainer} {r.version}", f"vs {r.version}") for r in m.training]


def _source(m: Matrix, dump: str) -> str:
    """Where the training states come from: the dump layout, or a trainer's own capture."""
    return dump.format(", ".join(m.dump_layout)) if m.dump_layout else f"{m.trainer}'s own capture"


def _verdict_cell(row: ServingRow, against: str) -> str:
    if row.error:
        return "CANNOT EXTRACT"
    v = next((v for v in row.verdicts if v.against == against), None)
    return "?" if v is None else v.verdict.upper()


def _changed_note(changed: list[str]) -> str:
    return f"      changed since the previous release: {'; '.join(changed)}"


def render_text(m: Matrix) -> str:
    lines = [f"parity matrix: {m.target} ({m.num_layers} layers), draft {m.draft}, "
             + _source(m, "dump [{}]") + (f", lock {m.contract}" if m.contract else ""), ""]
    if m.serve_args is not None:
        lines[-1:-1] = [f"serve command: {shlex.join(m.serve_args)} (resolved by each {m.engine} release; "
                        "parity's files stand for the model and draft paths)"]
    lines += _training_table(m).lines()
    lines.append("")
    lines += _serving_table(m).lines()
    lines += ["", "* = changed since the release above it.  " +
              ("ALL PARITY" if m.ok else "NOT DEPLOYABLE everywhere: see the cells above.")]
    return "\n".join(lines)


def _training_table(m: Matrix) -> Table:
    table = Table([Column("", width=1), Column(f"training ({m.trainer})", width=24, gap=1),
                   Column("fc input", width=22, gap=1), Column("loss target", gap=1)], indent="")
    for r in m.training:
        mark = "*" if r.changed else " "
        if r.error:
            table.row(mark, r.version, r.error)
        else:
            lock = ("  (= lock)" if m.contract and not r.lock_drift else
                    f"  DIFFERS FROM LOCK: {'; '.join(r.lock_drift)}" if r.lock_drift else "")
            table.row(mark, r.version, fc_text(r.fc_input), f"{r.target}{lock}")
        if r.release_note:
            table.note(f"      NOTE: {r.release_note}")
        if r.changed:
            table.note(_changed_note(r.changed))
    return table


def _serving_table(m: Matrix) -> Table:
    against = _against(m)
    table = Table([Column("", width=1), Column(f"serving ({m.engine})", width=16, gap=1),
                   Column("draft ids", width=14, gap=1), Column("fc input", width=22, gap=1),
                   *(Column(title, width=14, gap=1 if i == 0 else 2) for i, (_, title) in enumerate(against)),
                   Column("fix (ids to write)")], indent="")
    for r in m.serving:
        mark = "*" if r.changed else " "
        if r.error:
            table.row(mark, r.version, r.error)
        elif r.launch is not None and r.launch.resolved is None:  # no verdict: the launch line says why
            table.row(mark, r.version, f"launch {r.launch.text()}")
        else:
            ids = str(r.requested_ids) if r.requested_ids is not None else "default"
            table.row(mark, r.version, ids, fc_text(r.fc_input), *(_verdict_cell(r, name) for name, _ in against),
                      fix_text(r))
            if r.launch is not None:
                table.note(f"      launch: {r.launch.text()}")
                if r.launch.fix():
                    table.note(f"          fix: {r.launch.fix()}")
            for e in r.engine_errors:
                table.note(f"      engine: {e}")
            for why in dict.fromkeys(v.unfixable for v in r.verdicts if v.unfixable):
                table.note(f"      no fix: {why}")
            if r.release_note:
                table.note(f"      NOTE: {r.release_note}")
        if r.changed:
            table.note(_changed_note(r.changed))
    return table


def _md(s: str) -> str:
    return s.replace("|", "\\|")


def _bold(s: str, on: bool) -> str:
    return f"**{s}**" if on else s


def _changed_kinds(row: ServingRow) -> set[str]:
    """Which cells of a serving row changed since the release above: 'fc', 'verdict', 'fix', ..."""
    return {"fc" if c.startswith("slot") or c.startswith("fc") else c.split()[0] for c in row.changed}


def render_markdown(m: Matrix) -> str:
    names = [name for name, _ in _against(m)]
    out = [f"### parity matrix: `{m.draft}` on {m.target} ({m.num_layers} layers)", "",
           _source(m, "Dump layout `[{}]`") + (f", lock `{m.contract}`" if m.contract else "")
           + ". Changed cells (vs the release above) are **bold**.", "",
           f"| {m.trainer} | fc input | loss target | changed |", "|---|---|---|---|"]
    for r in m.training:
        if r.error:
            out.append(f"| {r.version} | {_bold(_md(r.error), bool(r.changed))} | | {_md('; '.join(r.changed))} |")
        else:
            extra = f" (differs from lock: {'; '.join(r.lock_drift)})" if r.lock_drift else ""
            note = f" ({r.release_note})" if r.release_note else ""
            out.append(f"| {r.version}{_md(note)} | {_bold(_md(fc_text(r.fc_input)), bool(r.changed))} | "
                       f"{r.target}{_md(extra)} | {_md('; '.join(r.changed))} |")
    launch = m.serve_args is not None
    out += ["", f"| {m.engine} | draft ids | fc input | " + " | ".join(names) + " | fix |"
            + (" launch |" if launch else "") + " changed |", "|---" * (len(names) + 5 + launch) + "|"]
    for r in m.serving:
        changed = _changed_kinds(r)
        if r.error:
            out.append(f"| {r.version} | | {_bold('❌ ' + _md(r.error), bool(r.changed))} |" + " |" * len(names)
                       + " |" * launch + f" | {_md('; '.join(r.changed))} |")
            continue
        cell = _md(r.launch.text()) if r.launch is not None else "-"
        if r.launch is not None and r.launch.resolved is None:
            out.append(f"| {r.version} | | |" + " |" * len(names) + f" | ❌ {cell} | {_md('; '.join(r.changed))} |")
            continue
        ids = str(r.requested_ids) if r.requested_ids is not None else "default"
        verdicts = " | ".join(_bold(("✅ " if _verdict_cell(r, n) == "PARITY" else "❌ ") + _verdict_cell(r, n),
                                    "verdict" in changed) for n in names)
        note = f" ({r.release_note})" if r.release_note else ""
        out.append(f"| {r.version}{_md(note)} | {ids} | {_bold(_md(fc_text(r.fc_input)), 'fc' in changed)} | {verdicts} | "
                   f"{_bold(_md(fix_text(r, long=True)), 'fix' in changed)} |"
                   + (f" {_bold(cell, 'launch' in changed)} |" if launch else "") + f" {_md('; '.join(r.changed))} |")
    out += ["", "**All cells pass.**" if m.ok else "**Not every release pair is at parity.**"]
    return "\n".join(out)
