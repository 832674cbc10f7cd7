"""The replay in plain words: the ranked table, which wiring the draft was trained on, the cost of serving."""

from __future__ import annotations

from ..replay.result import AMBIGUOUS_POINTS, ReplayResult, ReplayVerdict
from .table import Column, Table


def _pct(x: float) -> str:
    return f"{100 * x:5.1f}%"


def _wiring(taps) -> str:
    return "[" + ", ".join(t if t is not None else "-" for t in taps) + "]"


def render_table(r: ReplayResult, top: int) -> list[str]:
    """The best `top` wirings, plus every named one (training, served, asked) wherever it ranks."""
    table = Table([Column("rank", align="right", width=4), Column("fc wiring", width=22),
                   *(Column(f"step {k}", align="right", width=7, gap=1 if k == 0 else 2) for k in range(r.steps)),
                   Column("accept", align="right", width=7), Column("role", gap=3)])
    shown = 0
    for rank, s in enumerate(r.scores, 1):
        if rank <= top or any(x != "search" for x in s.roles):
            if rank > shown + 1:
                table.row("...")
            table.row(str(rank), _wiring(s.taps), *(_pct(a) for a in s.full_acc), f"{s.accept_length:.2f}",
                      ", ".join(x for x in s.roles if x != "search"))
            shown = rank
    if len(r.scores) > shown:
        table.note(f"  ({len(r.scores)} wirings scored; --all shows every one)")
    return table.lines()


def render_replay(r: ReplayResult, top: int = 8) -> str:
    trained, best = r.trained, r.best
    positions = best.positions
    out = [f"parity replay: {r.draft} on {r.data}",
           f"  {r.samples} samples, {positions} positions, {r.steps} draft steps; dump "
           f"{_wiring(r.dump_layout)}; speculators {r.speculators_version}"
           + (f", sglang {r.sglang_version}" if r.sglang_version else ""),
           f"  accuracy = speculators' full_acc_k: the drafts at steps 0..k all equal the argmax of the "
           f"loss target, lm_head(norm({r.target})), as training scored them", ""]
    out += render_table(r, top)
    out.append("")
    runner_up = next((s for s in r.scores if s.slots != best.slots), None)
    margin = 100 * (best.step0 - runner_up.step0) if runner_up else None
    said = (f"The wiring this draft was trained on is most likely {_wiring(best.taps)} ({_pct(best.step0).strip()})"
            if r.search != "none" else
            f"Best of the {len(r.scores)} wiring(s) scored (no search): {_wiring(best.taps)} ({_pct(best.step0).strip()})")
    if runner_up is not None:
        said += (f"; next {_wiring(runner_up.taps)} {_pct(runner_up.step0).strip()}, "
                 f"{margin:.1f} points behind")
        if margin < AMBIGUOUS_POINTS:
            said += (" (too close to tell apart: neighbouring residual states look alike, so one slot "
                     "off by one layer costs only a few points; `parity check` decides it)")
    out.append(said + ".")
    if best.slots == trained.slots:
        out.append(f"That is the training contract's wiring: speculators {r.speculators_version}'s data path "
                   f"feeds the fc {_wiring(r.training)} from this dump.")
    else:
        out.append(f"The training contract says {_wiring(r.training)} ({_pct(trained.step0).strip()}): "
                   f"{100 * (best.step0 - trained.step0):.1f} points below the best. The dump layout given "
                   "for these dumps, or the data path they were trained through, is not what the weights say.")
    if r.served is not None:
        where = f"{r.served_form}; sglang {r.sglang_version}"
        served = r.score_of(tuple(r.served)) if r.served_unscored is None else None
        if served is None:
            out.append(f"The served wiring {_wiring(r.served)} ({where}) cannot be scored: {r.served_unscored}.")
        elif served.slots == trained.slots:
            out.append(f"The served wiring {_wiring(r.served)} ({where}) is the trained one: it loses nothing "
                       f"(expected accept length {served.accept_length:.2f} with {r.steps} draft tokens).")
        else:
            out.append(f"The served wiring {_wiring(r.served)} ({where}) gives {_pct(served.step0).strip()}: "
                       f"{100 * (trained.step0 - served.step0):.1f} points below the trained wiring; expected "
                       f"accept length {served.accept_length:.2f} instead of {trained.accept_length:.2f} with "
                       f"{r.steps} draft tokens.")
        if r.verdict is ReplayVerdict.drift:
            out.append(f"Fix: serve ids that capture {_wiring(r.training)}; `parity check` finds them on the "
                       "installed SGLang and verifies them, `parity export` writes the config.")
    out.append("Accept length = 1 + sum over steps of full_acc_k: the target's own token plus the expected "
               "run of accepted drafts under greedy verification (teacher-forced; exact when the dumped "
               "text is the target's own greedy output).")
    for note in r.notes:
        out.append(f"note: {note}")
    out.append(f"verdict: {r.verdict}   ({r.wall_s.get('total_s', 0):.1f} s; replay itself "
               f"{r.wall_s.get('replay_s', 0):.1f} s for {len(r.scores)} wiring(s))")
    return "\n".join(out)
