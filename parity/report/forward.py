"""The forward-parity table (plain text, like `parity check`'s report)."""

from __future__ import annotations

from ..extract.engines import DEFAULT as DEFAULT_ENGINE
from ..forward.compare import STAGE_WORDS, ForwardResult
from ..forward.positions import spans
from .table import Column, Table


def _g(x: float | None, spec: str = ".2e") -> str:
    return "-" if x is None else format(x, spec)


def render_forward(result: ForwardResult, target: str = "", per_position: bool = True) -> str:
    head = {"parity": "PARITY: training and serving compute the same draft logits.",
            "drift": "DRIFT: the served draft computes something else than the trained one.",
            "unservable": "UNSERVABLE: the engine cannot serve the draft in this form.",
            "error": "ERROR: the comparison could not run."}
    lines = [f"parity forward [{result.name}]: {head[result.verdict]}"]
    t, s = result.training, result.serving
    if target:
        lines.append(f"  target    {target}")
    if t.get("dump_layout"):
        flags = ", ".join(f"{k}={v}" for k, v in (t.get("flags") or {}).items())
        lines.append(f"  training  speculators: dump [{', '.join(t['dump_layout'])}] -> ArrowDataset -> "
                     f"shift_batch -> Eagle3DraftModel (sdpa; {flags}); embedding: "
                     f"{'the verifier' if t.get('embedding') == 'target' else 'the checkpoint'}'s")
    if s.get("capture_ids") is not None or s.get("requested_ids") is not None:
        g = s.get("graph") or {}
        runner = f" ({s['runner']} runner)" if s.get("runner") else ""
        lines.append(f"  serving   {s.get('engine', DEFAULT_ENGINE)}{runner}: draft config ids {s.get('requested_ids')} -> "
                     f"captures at layer indices {s.get('capture_ids')}; {s.get('draft_class', 'LlamaForCausalLMEagle3')} ("
                     + ", ".join(f"{k}={v}" for k, v in g.items()) + f"); embedding: "
                     f"{s.get('embedding')}'s; vocab: {s.get('vocab_mapping')}")
        att = s.get("attention") or {}
        lines.append(f"            on {s.get('device')}: target attention {att.get('target')}, draft "
                     f"attention {att.get('draft')}")
    if result.error:
        lines += ["", f"  {result.error}"]
        return "\n".join(lines)
    tol = result.tolerances
    lines += ["", f"  tolerances ({result.dtype}): states |diff| <= {tol['state_atol']:g} + "
                  f"{tol['state_rtol']:g}*max|ref|; logits |diff| <= {tol['logits_atol']:g}; "
                  f"KL <= {tol['kl_max']:.1e}; top-1 >= {tol['top1_min']:.0%} "
                  "(reasons: parity/forward/tolerances.py)", ""]
    table = Table([Column(t) for t in ("step", "stage", "pos", "max|diff|", "bound", "top-1", "KL max",
                                       "KL mean", "verdict")])
    for d in result.stages:
        table.row(str(d.step), d.stage, str(d.rows), _g(d.max_abs), _g(d.tol),
                  "-" if d.top1 is None else f"{d.top1:.0%}" + (f" ({d.near_ties} tie)" if d.near_ties else ""),
                  _g(d.kl_max), _g(d.kl_mean),
                  "ok" if d.ok else "DIVERGED")
    lines += table.lines()
    grouped = [d for d in result.stages if d.groups]
    if grouped:
        lines += ["", "  by position group (rows placed as deep in a context as each position the draft declares; "
                      "parity/forward/positions.py): max|diff|, and relative to max|training| of those rows"]
        groups = Table([Column(t) for t in ("step", "stage", "group", "positions", "max|diff|", "rel",
                                            "verdict")])
        for d in grouped:
            for g in d.groups:
                groups.row(str(d.step), d.stage, g.group, spans(g.positions), _g(g.max_abs), _g(g.max_rel),
                           "ok" if g.ok else "DIVERGED")
        lines += groups.lines()
    if per_position:
        lines += ["", "  per position (draft logits): max|diff| and KL(training||serving), row t = "
                      "prediction after input_ids[t+1]"]
        for d in result.stages:
            if d.stage == "logits" and d.per_row_max_abs:
                lines.append(f"  step {d.step} max|diff| " + " ".join(f"{x:.0e}" for x in d.per_row_max_abs))
                lines.append(f"  step {d.step} KL        " + " ".join(f"{x:.0e}" for x in d.per_row_kl))
    if result.first_divergence:
        fd = result.first_divergence
        lines += ["", f"  FIRST DIVERGENCE: step {fd.step}, {fd.stage} ({STAGE_WORDS[fd.stage]})",
                  f"    {fd.message}"]
    if result.notes:
        lines += ["", "  Notes:"] + [f"  - {n}" for n in result.notes]
    return "\n".join(lines)


def render_summary(results: list[ForwardResult]) -> str:
    table = Table([Column(t) for t in ("case", "verdict", "first divergence", "logits max|diff| (steps)",
                                       "top-1 (steps)")])
    for r in results:
        logits = [d for d in r.stages if d.stage == "logits"]
        fd = r.first_divergence
        table.row(r.name, r.verdict, f"step {fd.step} {fd.stage}" if fd else "-",
                  " ".join(_g(d.max_abs, ".1e") for d in logits) or "-",
                  " ".join("-" if d.top1 is None else f"{d.top1:.0%}" for d in logits) or "-")
    return "\n".join(table.lines())
