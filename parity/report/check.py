"""Human-readable rendering of contracts and check results (plain text, no colour codes)."""

from __future__ import annotations

import json
import shlex

from ..contract import Contract, FindingKind, ServingContract, TrainingContract
from ..contract.diff import unread_keys
from ..extract.engines import release_flag
from ..verdict import Verdict
from .table import Column, Table


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


def _target(m) -> str:
    """The target's architecture; a wrapper's with the text model it wraps."""
    return m.architecture + (f" (text model {m.text_architecture})" if m.text_architecture else "")


def release_notes(*contracts: Contract) -> list[str]:
    """`  NOTE      sglang X is newer than any release parity has verified; ...`, one per side
    extracted under a release parity has not verified (Provenance.release_note)."""
    return [f"  NOTE      {c.provenance.release_note}" for c in contracts if c.provenance.release_note]


def cached_lines(*contracts: Contract, label: str = "  cached    ") -> list[str]:
    """One line naming the sides whose extraction was served by the reply cache, and one per side
    whose reply could not be cached, with why (none: no line): a reader of a CI log can tell a
    run from a replay of one."""
    hits = [c for c in contracts if c.provenance.reply_cache and c.provenance.reply_cache.status == "hit"]
    lines = []
    if hits:
        sides = " and ".join(f"{c.side} (key {(c.provenance.reply_cache.key or '?')[:12]})" for c in hits)
        lines.append(f"{label}{sides} from the reply cache: every file the extraction read is unchanged "
                     "(PARITY_NO_CACHE=1 runs it again)")
    lines += [f"{label}{c.side} ran now and was not cached: {c.provenance.reply_cache.why}" for c in contracts
              if c.provenance.reply_cache and c.provenance.reply_cache.status == "not stored"]
    return lines


def launch_lines(s: ServingContract) -> list[str]:
    """The serve command as the engine resolved it: each field the user gave (asked, runs, set
    by) and each override a MISMATCH; the engine-verified fix; none without --serve-args."""
    launch = s.launch
    if launch is None:
        return []
    release = f"{s.engine} {s.provenance.version}"
    changed = {o.field: o for o in launch.overrides}
    lines = ["", f"  The serve command, as {release} parses and resolves it (--serve-args"
                 + (f"; parity's own values for {', '.join(sorted(launch.replaced))}" if launch.replaced else "")
                 + "):", ""]
    table = Table([Column("field"), Column("asked"), Column("runs"), Column("set by"), Column("verdict")])
    not_eagle3 = f"MISMATCH: not {launch.kind_named}: the aux hidden states are never captured"
    for field, asked in launch.requested.items():
        o = changed.get(field)
        verdict = (f"MISMATCH: {release} changes what was asked" if o else
                   not_eagle3 if field == launch.algorithm_field and launch.serves_the_draft is False else "ok")
        table.row(field, json.dumps(asked), json.dumps(launch.effective.get(field)), o.by if o else "-", verdict)
    if launch.serves_the_draft is False and launch.algorithm_field not in launch.requested:
        table.row(launch.algorithm_field, "(not given)", json.dumps(launch.effective.get(launch.algorithm_field)),
                  "-", not_eagle3)
    lines += table.lines()
    if launch.from_names:  # what the engine took from a path's name: the deployment's names decide it too
        shown = ", ".join(f"{field} {name!r}" for field, name in launch.names.items())
        for d in launch.from_names:
            other = (f"refuses them ({d.neutral_refused})" if d.neutral_refused else
                     f"resolves {d.field} {json.dumps(d.neutral)}")
            lines += ["", f"  NOTE: {release} resolves {d.field} {json.dumps(d.named)} from the names of the paths "
                          f"({shown}); under names that say nothing it {other}"]
    for fix in launch.fixes[:1]:
        kept = ", ".join(f"{o.field} {o.requested}" for o in launch.overrides)
        gives = (f"{kept}, as asked" if kept else f"{launch.algorithm_field} "
                 f"{json.dumps(fix.effective.get(launch.algorithm_field))}, which captures the aux hidden states")
        lines += ["", f"  FIX (launch): serve with {shlex.join(fix.argv)}",
                  f"       (verified: {release} resolves these to {gives})"]
    return lines + layout_lines(s)


def layout_lines(s: ServingContract) -> list[str]:
    """The parallel layout the serve command resolves to (docs/launch.md, "The parallel layout"):
    its degrees and the engine's fields that give them, and how the capture ran under it: one
    process for one rank, else one CPU process per rank with each pipeline stage's layers (the
    engine's own partition) and the layer indices its model captures at."""
    layout = s.launch.layout if s.launch is not None else None
    if layout is None:
        return []
    release = f"{s.engine} {s.provenance.version}"
    given = ", ".join(f"{field} {json.dumps(value)}" for field, value in layout.fields.items()
                      if value is True or (type(value) is int and value > 1))
    head = f"  parallel layout, as {release} resolves it: {layout.said()}" + (f" ({given})" if given else "")
    run = layout.run
    if run is None:
        return ["", head + ": the capture ran in one process, the layout's one rank"
                + (" (a replica of it: see Not checked)" if layout.not_run else "")]
    lines = ["", head + f"; the capture ran under it on {run.ranks} CPU processes, one per rank "
             f"(tp {run.tp} x pp {run.pp}, torch.distributed over gloo)"
             + (f": {'; '.join(run.stands_for)}" if run.stands_for else "")]
    if run.stages:
        table = Table([Column("stage"), Column("layers"), Column("captures at (after the start-up set it)")])
        for stage in run.stages:
            table.row(str(stage.stage), f"{stage.layers[0]}-{stage.layers[1] - 1}",
                      ", ".join(map(str, stage.capture)) if stage.capture else "nothing")
        lines += [""] + ["  " + line for line in table.lines()]
    return lines


def _value(v) -> str:
    if isinstance(v, (list, tuple)) and len(v) > 4:
        return "[" + ", ".join(json.dumps(x) for x in v[:3]) + f", ... {len(v)} values]"
    return json.dumps(v) if v is not None else "-"


def built_lines(result) -> list[str]:
    """The draft as each side built it (docs/built-draft.md): one line when every judged field
    agrees, else a table of the fields that differ (field, trained, served, verdict); what was
    not compared, and why, always said."""
    t, s = result.training.draft, result.serving.draft
    if t is None or s is None:
        missing = " and ".join(side for side, b in (("training", t), ("serving", s)) if b is None)
        return ["", f"  built draft: not compared (the {missing} side did not build it): its sizes, rope, eps, "
                    "activation and head tie are unchecked"]
    judged = {d.field.removeprefix("draft."): d for d in result.diff.fields if d.field.startswith("draft.")}
    shown = [f for f in t.SHOWN if getattr(t, f) != getattr(s, f) and None not in (getattr(t, f), getattr(s, f))]
    judged_fields = tuple(dict.fromkeys(t.JUDGED + s.JUDGED))  # a DFlash build's own fields, on either side
    sides = ((f"{result.training.provenance.package} {result.training.provenance.version}", t),
             (f"{result.serving.provenance.package} {result.serving.provenance.version}", s))
    assumed = {side: [a.key for a in b.converter_assumed or () if getattr(b, a.key) is None] for side, b in sides}
    settled = {side: [f"{a.key} from the checkpoint's lm_head, not its converter's {a.assumed}"
                      for a in b.converter_assumed or () if getattr(b, a.key) is not None] for side, b in sides}
    unread = {side: [f for f in judged_fields if getattr(b, f) is None and f not in assumed[side]]
              for side, b in sides}
    compared = sum(getattr(t, f) is not None and getattr(s, f) is not None for f in judged_fields)
    of = "" if compared == len(judged_fields) else " compared"  # the count never hides a field a side did not read
    verdict = (f"{len(judged)} of {compared} fields{of} differ" if judged
               else f"the same in all {compared} fields{of}")
    lines = ["", f"  built draft (what its math depends on, as each side builds it): {verdict}",
             f"    trained  {t.built_by}, from {t.config_from}",
             f"    served   {s.built_by}, from {s.config_from}"]
    lines += [f"    not read on {side} (not compared): {', '.join(fields)}" for side, fields in unread.items() if fields]
    lines += [f"    assumed by {side}'s converter, not set by the draft's config (not compared): {', '.join(fields)}"
              for side, fields in assumed.items() if fields]
    lines += [f"    read on {side}: {', '.join(fields)}" for side, fields in settled.items() if fields]
    if not judged and not shown:
        return lines + key_lines(result)
    table = Table([Column("field"), Column("trained"), Column("served"), Column("verdict")])
    for name in judged_fields:
        if name in judged:
            table.row(name, _value(getattr(t, name)), _value(getattr(s, name)), "MISMATCH: the math differs")
    for name in shown:
        table.row(name, _value(getattr(t, name)), _value(getattr(s, name)), "shown, not judged")
    lines += [""] + table.lines()
    fix = result.draft_fix
    release = f"{result.serving.engine} {result.serving.provenance.version}"
    if fix is not None and (fix.still_differ or fix.left):  # built again with the edit, it mends not all: no fix
        left = [f"{release} still builds {', '.join(fix.still_differ)} otherwise"] if fix.still_differ else []
        lines += ["", f"  NO FIX (draft config): writing {json.dumps(fix.edit)} in the served config.json, "
                      + "; ".join(left + [fix.left] if fix.left else left)]
    elif fix is not None:
        how = "verified: " + release + " then builds the draft as training did" if fix.verified else "not verified (--no-verify)"
        lines += ["", f"  FIX (draft config): write {json.dumps(fix.edit)} in the served config.json",
                  f"       ({how})"]
    if "later_layer_input_norms" in judged:
        lines += ["", "  each decoder layer after the first normalises its input with the norm named, whose weight is "
                      "the checkpoint's layers.<i>.<norm>.weight: served, that layer runs with a weight other than the "
                      "one training trained (no config key changes which: it is the draft class's own wiring)"]
    return lines + key_lines(result)


TRAINING_ONLY = "read by training only: the draft served computes the same without it"


def key_lines(result) -> list[str]:
    """The served config's keys the engine never reads while building the draft (key, trained,
    served, verdict): a MISMATCH where training built the draft with the key, a note where
    neither side reads it, where it is at a default, or where training read it for training
    only (BuiltDraft.config_keys_training_only); one line when the engine reads every key;
    nothing where a side did not record its reads."""
    t, s = result.training.draft, result.serving.draft
    if t is None or s is None or t.config_keys_read is None or s.config_keys_read is None:
        return []
    unread, unused = unread_keys(t, s)
    release = f"{result.serving.engine} {result.serving.provenance.version}"
    if not unread and not unused:
        total = len(s.config_keys_read) + len(s.config_keys_unread or ())
        rest = "" if not s.config_keys_unread else "; the rest are at their defaults and read by neither side"
        return ["", f"  config keys: {release} reads {len(s.config_keys_read)} of the {total} keys the served config "
                    f"sets while building the draft{rest}"]
    table = Table([Column("config key"), Column("trained"), Column("served"), Column("verdict")])
    for key in unread:
        table.row(key, "read", "never read", "MISMATCH: training built the draft with it")
    for key in unused:
        trained = "read" if key in (t.config_keys_read or ()) else "never read"
        default = set(s.config_keys_default or ()) | set(t.config_keys_default or ())
        table.row(key, trained, "never read",  # read by training: at a default, or for training only
                  "note: neither side reads it" if trained != "read" else "note: at its default" if key in default
                  else f"note: {TRAINING_ONLY}")
    return ["", f"  config keys the served config sets and {release} never reads while building the draft:", ""
            ] + table.lines()


def ran(p) -> str:
    """Where a side's release came from and ran, as reports say it (its provenance's `source`):
    'installed, run here' (in the interpreter parity runs in), or '' when the contract does not say."""
    if p.source is None:
        return ""
    where = f"in parity's environment {p.environment}" if p.environment else "here"
    said = {"installed": "installed", "environment": "installed", "flag": "the release named"}[p.source]
    return f"{said}, run {where}"


def _release(p) -> str:
    """'sglang 0.5.23 (installed, run here)': the release and where it ran."""
    where = ran(p)
    return f"{p.version}" + (f" ({where})" if where else "")


def render_contract(c: Contract) -> str:
    where = ran(c.provenance)
    lines = [f"{c.side} contract  ({c.provenance.package} {c.provenance.version}{'; ' + where if where else ''})",
             *(f"  NOTE         {note}" for note in [c.provenance.release_note] if note),
             f"  target       {_target(c.target_model)}, {c.target_model.num_hidden_layers} layers",
             f"  fc input     {_states(c.fc_input)}"]
    if c.draft_kind != "eagle3":
        lines.append(f"  draft kind   {c.draft_kind}")
    if isinstance(c, TrainingContract):
        lines += [f"  dump layout  {_states(c.dump_layout)}  (from {c.dump_layout_source.replace('_', ' ')})",
                  f"  fc slots     {list(c.fc_slots)} of the dump; loss target slot {c.target_slot} = "
                  f"{c.target.name}",
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
    lines += cached_lines(c, label="  reply        ")
    if isinstance(c, ServingContract):
        lines += launch_lines(c)
    for f in c.findings:
        where = f" [slot {f.slot}]" if f.slot is not None else ""
        lines.append(f"  {f.severity.upper():7s}      {f.kind}{where}: {f.message}")
    return "\n".join(lines)


def _unservable(result, target_path: str, draft_path: str) -> list[str]:
    """The reason first, what training expects, then advice that export itself has checked."""
    t, s = result.training, result.serving
    lines = [f"  reason    {result.unservable}", *([f"  lock      {result.releases}"] if result.releases else []), "",
             f"  training  {t.provenance.package} {t.provenance.version}: fc input "
             f"[{', '.join(x.name for x in t.fc_input)}], loss target {t.target.name}", *release_notes(t, s)]
    if result.notes:
        lines += ["", "  Notes:"] + [f"  - {note}" for note in result.notes]
    lines.append("")
    ex = result.export
    draft = draft_path or "DRAFT"
    if result.suggestion or result.unfixable:  # the draft loads; the engine raised on its ids
        return lines + _fix_lines(result, draft_path)
    if ex is None and s.checkpoint_renames:  # an engine-format config, tensors under other names
        lines += _rename_lines(s)
    elif ex is None:
        lines.append(f"  The draft must be given in a form {s.engine} {s.provenance.version} loads; then run "
                     "parity check again. For a speculators-format draft, `parity "
                     "export` writes one: without --no-verify, check runs export's own gate and says what "
                     "it would write.")
    elif ex.exportable:
        flag = release_flag(s.engine, "export")  # a release flag export takes for this engine
        release = f" {flag} {s.provenance.version}" if flag else ""
        lines.append(f"  ADVICE: `parity export --engine {s.engine}{release} {draft} OUT --target-config "
                     f"{target_path or 'T'} --dump-layout {','.join(x.name for x in t.dump_layout)}` writes "
                     f"it in the form {s.engine} {s.provenance.version} loads, with eagle_aux_hidden_state_layer_ids "
                     f"{ex.eagle_aux_hidden_state_layer_ids}")
        lines.append(f"          (checked by export's own gate: {s.engine} {s.provenance.version} then feeds "
                     f"[{', '.join(x or '-' for x in ex.serving_fc_input)}], the training contract)")
    else:
        lines.append(f"  `parity export` cannot help either: {ex.reason}")
    return lines


def render_check(result, target_path: str = "", draft_path: str = "") -> str:
    """The gate's report: verdict, slot table, other differences, provenance, the fix."""
    t, s = result.training, result.serving
    n = t.target_model.num_hidden_layers
    only_launch = result.differences and all(d.kind == "launch" for d in result.differences)
    # every slot fed as trained, and the draft itself (its build, graph flags, vocabulary) differs
    only_built = result.differences and all(d.kind in ("field", FindingKind.config_key_unread)
                                            for d in result.differences)
    head = {Verdict.parity: "PARITY: the draft will be fed exactly what it was trained on.",
            Verdict.drift: (f"DRIFT: {s.engine} {s.provenance.version} will not serve the draft as the serve command asks."
                      if only_launch else
                      f"DRIFT: {s.engine} {s.provenance.version} builds the draft otherwise than training did."
                      if only_built else "DRIFT: the draft will be fed different hidden states than it was trained on."),
            Verdict.unservable: f"UNSERVABLE: {s.engine} {s.provenance.version} cannot serve this draft as written."}
    lines = [f"parity check: {head[result.verdict]}", ""]
    if result.verdict is Verdict.unservable:
        return "\n".join(lines + _unservable(result, target_path, draft_path))
    lines.append(f"  target    {_target(t.target_model)}, {n} decoder layers"
                 + (f"  ({target_path})" if target_path else ""))
    lines.append(f"  training  {t.provenance.package} {_release(t.provenance)}: {t.provenance.code_path}")
    ids = list(s.requested_ids) if s.requested_ids is not None else "none (engine default)"
    model_class = s.provenance.details.get("model_class")
    lines.append(f"  serving   {s.engine} {_release(s.provenance)}: ids {ids} from {s.ids_source}"
                 + (f"; {model_class}" if model_class else ""))
    if result.releases:
        lines.append(f"  lock      {result.releases}"
                     + (": what changed is below" if result.verdict is not Verdict.parity else ": the same contract"))
    lines += release_notes(t, s)
    lines += cached_lines(t, s)
    lines += ["", f"  The draft's fc layer reads {len(result.diff.slots)} hidden states of the target, "
                  "concatenated in this order:", ""]
    table = Table([Column("slot"), Column("trained on"), Column(f"served by {s.engine}"), Column("verdict")])
    for sd in result.diff.slots:
        exp = sd.expected.name if sd.expected else None
        act = sd.actual.name if sd.actual else None
        served = "?      a state matching none of the model's" if sd.unidentified else f"{act or '-':6s} {describe_tap(act, n)}"
        table.row(str(sd.slot), f"{exp or '-':6s} {describe_tap(exp, n)}", served,
                  "ok" if sd.verdict == "match" else f"MISMATCH: {sd.why}")
    lines += table.lines()
    lines.append(f"\n  loss target during training: {t.target.name} ({describe_tap(t.target.name, n)})")
    lines += launch_lines(s)
    lines += built_lines(result)
    other = [d for d in result.differences  # the built draft's own fields are in its table above
             if d.kind not in ("slot", "launch", FindingKind.config_key_unread)
             and not (d.kind == "field" and d.where.startswith("draft."))]
    if other:
        lines += ["", "  Other differences:"] + [f"  - {d.message}" for d in other]
    if result.notes:
        lines += ["", "  Notes:"] + [f"  - {note}" for note in result.notes]
    lines += unchecked_lines(result)
    lines.append("")
    lines += _fix_lines(result, draft_path)
    return "\n".join(lines)


def unchecked_lines(result) -> list[str]:
    """What this verdict did not cover, said plainly (a PARITY is about what was checked): the
    serve command when none was given, a DFlash draft's served block (set by the launch), the
    target's quantisation (the tiny target is run unquantised; either side's contract says it,
    a lock written before the field says nothing)."""
    s = result.serving
    release = f"{s.engine} {s.provenance.version}"
    items = []
    if s.launch is None:
        items.append(f"the launch: no --serve-args, so {release}'s steps, draft tokens and parallel layout are "
                     "unchecked")
    elif s.launch.layout is not None:
        items += [f"the parallel layout: {item}" for item in s.launch.layout.not_run]
    if s.draft_kind == "dflash":
        items.append(f"the DFlash block {release} serves: its launch's draft tokens set it (SGLang's "
                     "--speculative-num-draft-tokens, vLLM's num_speculative_tokens + 1), not the draft's block_size, "
                     "which alone was compared")
    quant = result.training.target_model.quantization or result.serving.target_model.quantization
    if quant is not None:
        items.append(f"the target's {quant} quantisation: run unquantised (it does not move the layers fed)")
    return ["", "  Not checked:"] + [f"  - {item}" for item in items] if items else []


def _fix_lines(result, draft_path: str) -> list[str]:
    """The engine-verified id fix, or why there is none."""
    if result.suggestion:
        sg = result.suggestion
        written: object = sg.eagle_aux_hidden_state_layer_ids
        for key in reversed(sg.config_key.split(".")):  # "eagle_config.x" -> {"eagle_config": {"x": ids}}
            written = {key: written}
        snippet = json.dumps(written)
        where = f" in {draft_path}/config.json" if draft_path else ""
        how = ("verified: a full extraction with this config" if sg.verified
               else "found on the engine's model; not re-verified (--no-verify), and")
        return [f"  FIX: write {snippet}{where}",
                f"       ({how} makes {sg.engine} {sg.engine_version} feed "
                f"[{', '.join(x or '-' for x in sg.serving_fc_input)}], the training contract)"]
    if result.unfixable:
        return [f"  NO FIX with the installed engine: {result.unfixable}"]
    return _rename_lines(result.serving)


def _rename_lines(s) -> list[str]:
    """The verified tensor renames, for a checkpoint whose names the engine does not load."""
    if not s.checkpoint_renames:
        return []
    pairs = ", ".join(f"{o}* -> {n}*" for o, n in s.checkpoint_renames.items())
    return [f"  ADVICE: rename the checkpoint's tensors {pairs} (verified: {s.engine} {s.provenance.version}'s "
            "load_weights then loads them); `parity export` of the speculators-format draft writes "
            "them so."]
