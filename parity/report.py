"""Human-readable rendering of contracts and check results (plain text, no colour codes)."""

from __future__ import annotations

from .contract import Contract, ServingContract, TrainingContract


def _states(taps) -> str:
    return "[" + ", ".join(t.name if t is not None else "<not captured>" for t in taps) + "]"


def describe_tap(name: str | None, num_layers: int) -> str:
    """Plain words for a canonical name, for readers who never heard of EAGLE-3."""
    if name is None:
        return "nothing (not captured)"
    if name == "final":
        return "the model's output after the final norm"
    if name == "h0":
        return "the token embeddings (before any layer)"
    base, _, qual = name.partition(".")
    k = int(base[1:])
    words = f"the output of layer {k} of {num_layers}" if k else "the token embeddings"
    return words + {"": "", "delta": " without the residual", "normed": ", final-normed",
                    "ln": ", after the next layer's input norm"}[qual]


def render_contract(c: Contract) -> str:
    lines = [f"{c.side} contract  ({c.provenance.package} {c.provenance.version})",
             f"  target       {c.target.architecture}, {c.target.num_hidden_layers} layers",
             f"  fc input     {_states(c.fc_input)}"]
    if isinstance(c, TrainingContract):
        lines += [f"  dump layout  {_states(c.dump_layout)}  (from {c.dump_layout_source.replace('_', ' ')})",
                  f"  fc slots     {list(c.fc_slots)} of the dump; loss target slot {c.target_slot} = "
                  f"{c.loss_target.name}",
                  f"  alignment    {c.alignment}"]
    if isinstance(c, ServingContract):
        ids = list(c.requested_ids) if c.requested_ids is not None else "none (engine default)"
        lines += [f"  engine ids   {ids}  (from {c.ids_source})",
                  f"  captures at  layer indices {list(c.capture_ids) if c.capture_ids else '?'}"]
    g = c.graph
    lines.append("  graph        " + ", ".join(
        f"{k}={v}" for k, v in g.model_dump().items() if v is not None) or "  graph        (not read)")
    v = c.vocab
    lines.append(f"  vocab        draft {v.draft_vocab_size}, target {v.target_vocab_size}, d2t {v.d2t}, "
                 f"t2d {v.t2d}" + (f" ({v.mapping})" if v.mapping else ""))
    lines.append(f"  embedding    {c.embedding}")
    lines.append(f"  code path    {c.provenance.code_path}")
    for f in c.findings:
        where = f" [slot {f.slot}]" if f.slot is not None else ""
        lines.append(f"  {f.severity.upper():7s}      {f.kind}{where}: {f.message}")
    return "\n".join(lines)
