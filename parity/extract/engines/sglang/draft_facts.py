"""What the engine's draft class does with a draft directory, found by building and running it.

The draft is built by the engine's own config reader and model class from a shrunk copy
of its config (same flags and layer layout, tiny widths), so any draft size costs the
same. Checkpoint facts come from the real tensor names: each is fed through the
engine's `load_weights` with a recorder in place of the copy, so we see which names the
engine loads, which it turns into something else (d2t) and which it drops (t2d, unknown
norms). Graph flags are read off the built modules and, for the residual wiring, off a
real forward with hooks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from ...built import dtype_name, hf_sizes, later_layer_input_norms, max_token_id, module_facts, seeded
from ...child import finding
from ...config_reads import read_fields, recording
from ...shrink import shrunk_draft_dir
from ....checkpoint import bias_weight, rename_tensor
from ....contract.models import FindingKind
from ...child import one_line

FLAG_KEYS = ("norm_before_fc", "fc_norm", "norm_output", "norm_before_residual")


def _finding(kind: FindingKind, message: str, severity: str = "warning") -> dict:
    return finding(kind, message, severity)


def draft_tensors(draft_dir: str) -> dict[str, torch.Tensor | None]:
    """Every tensor name in the draft's safetensors; values only for the small vocab maps."""
    from safetensors import safe_open

    names: dict[str, torch.Tensor | None] = {}
    for f in sorted(Path(draft_dir).glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as fh:
            for name in fh.keys():
                names[name] = fh.get_tensor(name) if name.split(".")[-1] in ("d2t", "t2d") else None
    return names


def loaded_names(draft, tensors: dict[str, torch.Tensor | None]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Feed each checkpoint name through the engine's load_weights: (name -> params it reached,
    name -> the error it raised on it)."""
    reached: dict[str, list[str]] = {}
    refused: dict[str, str] = {}
    current = {"name": None}
    for pname, param in draft.named_parameters():
        param.weight_loader = (lambda p, w, *shard, pname=pname:
                               reached.setdefault(current["name"], []).append(pname))
    for name, value in tensors.items():
        current["name"] = name
        try:
            draft.load_weights([(name, value if value is not None else torch.zeros(1))])
        except Exception as exc:  # e.g. KeyError: a name the loader maps to no parameter
            refused[name] = f"{one_line(exc)}"
    return reached, refused


def layer_renames(adapter, draft, lost: list[str]) -> dict[str, str]:
    """The checkpoint-name prefixes the engine's draft class may need instead of speculators'
    `layers.{i}.`: its decoder layer i's module path under `draft.model` (e.g. `midlayer.`),
    for each layer whose checkpoint tensors are `lost` (refused or dropped by load_weights)."""
    paths = {id(m): p for p, m in draft.model.named_modules()}
    renames = {}
    for i, layer in enumerate(adapter.draft_layers(draft)):
        ours, theirs = f"layers.{i}.", f"{paths.get(id(layer), f'layers.{i}')}."
        if ours != theirs and any(n.startswith(ours) for n in lost):
            renames[ours] = theirs
    return renames


def _zero_bias_name(draft, param: str, names: set[str]) -> str | None:
    """For an unfilled bias `param`: the checkpoint name load_weights routes to it (the
    parameter's own name, or without its first component), if the checkpoint has that
    layer's weight under the matching name; else None."""
    for name in (param.partition(".")[2], param):
        if (name and bias_weight(name) in names
                and param in loaded_names(draft, {name: None})[0].get(name, [])):
            return name
    return None


def served_form(adapter, draft, tensors: dict[str, torch.Tensor | None], bound: frozenset[str] = frozenset()
                ) -> dict[str, Any]:
    """How the engine's load_weights takes this checkpoint, found on `draft` (whose weight
    loaders are replaced by recorders): each name's reach as written ("reached"), the names it
    raises on ("refused") or ignores ("dropped", vocab maps aside), the verified layer renames,
    the draft parameters no tensor fills ("unfilled", `bound` ones aside: bound from the
    target), and the checkpoint names of those that are biases a zero tensor fills
    ("zero_biases"). A rename is kept only if, fed renamed, every tensor it renames reaches a
    parameter and none raises."""
    reached, refused = loaded_names(draft, tensors)
    maps = {n for n in tensors if n.split(".")[-1] in ("d2t", "t2d")}
    dropped = sorted(n for n in tensors if n not in reached and n not in refused and n not in maps)
    lost = sorted(refused) + dropped
    renames = layer_renames(adapter, draft, lost)
    final = reached
    if renames:
        again, raised = loaded_names(draft, {rename_tensor(n, renames): v for n, v in tensors.items()})
        moved = [n for n in lost if rename_tensor(n, renames) != n]
        if raised or any(rename_tensor(n, renames) not in again for n in moved):
            renames = {}
        else:
            final = again
    filled = {p for ps in final.values() for p in ps}
    unfilled = [n for n, _ in draft.named_parameters() if n not in filled and n not in bound]
    names = {rename_tensor(n, renames) for n in tensors}
    zero = [z for z in (_zero_bias_name(draft, p, names) for p in unfilled if p.endswith(".bias")) if z]
    return {"reached": reached, "refused": refused, "dropped": dropped, "renames": renames,
            "unfilled": unfilled, "zero_biases": zero}


def _advice(form: dict[str, Any]) -> str:
    if not form["renames"]:
        return ""
    pairs = ", ".join(f"{o}* -> {n}*" for o, n in form["renames"].items())
    return (f"; its draft class names the layer otherwise: renamed {pairs}, the layer's tensors load (verified "
            "on its load_weights; `parity export` writes the checkpoint so)")


@torch.no_grad()
def residual_wiring(adapter, draft, n_aux: int, target_h: int) -> bool | None:
    """Run the draft once; True if layer 0's residual is the normed fc output, False if raw."""
    layer0 = adapter.draft_layers(draft)[0]
    seen: dict[str, torch.Tensor] = {}
    hooks = [
        layer0.hidden_norm.register_forward_hook(
            lambda m, a, out: seen.update(raw=a[0], normed=out if torch.is_tensor(out) else out[0])),
        layer0.post_attention_layernorm.register_forward_pre_hook(
            lambda m, a: seen.update(residual=a[1] if len(a) > 1 else None)),
    ]
    try:
        gen = torch.Generator().manual_seed(3)
        for p in draft.parameters():
            p.copy_(0.1 * torch.randn(p.shape, generator=gen))
        t = 6
        ids = torch.randint(0, draft.config.vocab_size, (t,), generator=gen)
        aux = torch.randn(t, n_aux * target_h, generator=gen)
        adapter.forward(draft, ids, spec_hidden=aux)
    finally:
        for h in hooks:
            h.remove()
    res = seen.get("residual")
    if res is None:
        return None
    if torch.allclose(res, seen["normed"]):
        return True
    if torch.allclose(res, seen["raw"]):
        return False
    return None


def later_layer_wiring(adapter, draft, n_aux: int, target_h: int) -> tuple[str, ...]:
    """Which norm each decoder layer after the first applies to its input, found on one forward
    of SGLang's draft (parity.extract.built.later_layer_input_norms); () for a one-layer draft."""
    def forward():
        gen = seeded(draft)
        t = 6
        ids = torch.randint(0, draft.config.vocab_size, (t,), generator=gen)
        adapter.forward(draft, ids, spec_hidden=torch.randn(t, n_aux * target_h, generator=gen))

    return later_layer_input_norms(adapter.draft_layers(draft), forward)


def built_flags(draft) -> dict[str, bool]:
    """The graph flags read off the built draft's modules (a release whose draft class lacks a
    module never applies that flag)."""
    inner = draft.model
    return {"norm_before_fc": getattr(inner, "input_norm", None) is not None,
            "fc_norm": getattr(inner, "fc_norm", None) is not None,
            "norm_output": bool(getattr(inner, "norm_output", False))}


def built_draft(adapter, draft_dir: str, tiny, version: str, reads: set[str] | None = None) -> dict[str, Any]:
    """The draft as SGLang builds it (parity.contract.BuiltDraft): sizes as its ModelConfig reads
    the real config.json (as a draft model), module facts off `tiny`, the same class built at
    tiny widths. SGLang's draft sets draft_vocab_size to vocab_size when absent; head_dim is
    what its attention uses (the config's, else hidden_size / heads). `reads`: the config
    attributes its ModelConfig and draft class read while building `tiny` (parity.extract.config_reads)."""
    model_config = adapter.model_config(draft_dir, is_draft=True)
    built = hf_sizes(model_config.hf_config)
    if reads is not None:
        built.update(read_fields(tiny.config, json.loads((Path(draft_dir) / "config.json").read_text()), reads))
    built["dtype"] = dtype_name(getattr(model_config, "dtype", None))
    built.update(module_facts(tiny, tiny.model.embed_tokens, getattr(tiny, "lm_head", None)))
    built["built_by"] = f"sglang {version} {type(tiny).__name__}"
    built["config_from"] = "the served config.json (its ModelConfig)"
    return built


OVERWRITE = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"


def positions(adapter, draft_dir: str, context: int | None, version: str) -> dict | None:
    """A finding when SGLang's draft ModelConfig, built with the target's context length as the
    EAGLE worker builds it, refuses the draft's positions: what it raises, and what it does with
    the override variable set (it then sets the draft's max_position_embeddings to the
    context). None when it accepts them, or where this release's adapter cannot build it."""
    build = getattr(adapter, "draft_model_config", None)
    if build is None or context is None:
        return None
    try:
        build(draft_dir, context)
        return None
    except ValueError as exc:
        refused = one_line(exc).split(". ")[0]
    except Exception:  # noqa: BLE001 - a release whose draft ModelConfig is built otherwise: not checked
        return None
    saved = os.environ.get(OVERWRITE)
    os.environ[OVERWRITE] = "1"
    try:
        overridden = getattr(build(draft_dir, context).hf_text_config, "max_position_embeddings", None)
    except Exception as exc:  # noqa: BLE001 - reported as it is
        overridden = f"? ({one_line(exc)})"
    finally:
        if saved is None:
            os.environ.pop(OVERWRITE, None)
        else:
            os.environ[OVERWRITE] = saved
    return _finding(FindingKind.positions_short, f"sglang {version} will not start this draft at the target's context "
                    f"length {context}: its draft ModelConfig raises ({refused}). With {OVERWRITE}=1 it starts and "
                    f"sets the draft's max_position_embeddings to {overridden} (run here); the draft's rope then "
                    "runs past the positions its config declares, computed as for any position", "warning")


def no_hot_token_id(draft, version: str) -> dict | None:
    """An error finding when the EAGLE worker cannot start with this draft class whatever its
    checkpoint holds: its start-up (`init_lm_head`, the EAGLE-3 branch) reads the draft model's
    `hot_token_id` (0.5.3 on; 0.4.x calls `get_hot_token_id()`), which every EAGLE-3 draft class
    has and a class built from another architecture (a plain `LlamaForCausalLM`) has not: the
    server stops with an AttributeError. None when the class has it."""
    if hasattr(draft, "hot_token_id") or hasattr(draft, "get_hot_token_id"):
        return None
    return _finding(FindingKind.draft_unloadable, f"sglang {version}'s EAGLE-3 worker reads the draft's hot_token_id when it "
                    f"starts (init_lm_head): the draft is built as {type(draft).__name__}, which has none "
                    f"(AttributeError), so the server does not start; it is not an EAGLE-3 draft class", "error")


def draft_facts(adapter, draft_dir: str, target_model, findings: list[dict], version: str = "?",
                context: int | None = None, eagle3: bool = True) -> dict[str, Any]:
    """The draft as SGLang's draft class builds it: its built draft and graph flags, the
    embedding it runs with, and what its load_weights does with the checkpoint. `eagle3`: the
    draft is served under an EAGLE-3 algorithm (the worker's EAGLE-3 start-up)."""
    tiny_dir, config = shrunk_draft_dir(draft_dir)
    with recording(set()) as reads:  # every config key its reader and draft class read (BuiltDraft)
        draft = adapter.build_draft(str(tiny_dir))
    facts: dict[str, Any] = {"model_class": f"{type(draft).__module__}.{type(draft).__name__}"}
    no_start = no_hot_token_id(draft, version) if eagle3 else None
    if no_start is not None:
        findings.append(no_start)
    _built_and_graph(adapter, draft_dir, draft, config, reads, context, version, facts, findings)
    embed = _embedding(adapter, draft, target_model, facts)
    tensors = draft_tensors(draft_dir)
    facts["has_weights"] = bool(tensors)
    # The sizes come from the real config file (parity.contract.sources), never the shrunk copy's.
    facts["sizes"] = {"draft_vocab_size": config.get("draft_vocab_size"), "target_vocab_size": config.get("vocab_size")}
    facts["vocab"] = (_checkpoint(adapter, draft, config, tensors, embed, no_start is None, facts, findings)
                      if tensors else {"d2t": "unknown", "t2d": "unknown"})
    return facts


def _built_and_graph(adapter, draft_dir: str, draft, config: dict, reads, context: int | None, version: str,
                     facts: dict, findings: list[dict]) -> None:
    """The built draft (its sizes, positions, layers and how each later one is fed) and the graph
    flags it runs with, a flag the config sets and the class does not honour said."""
    inner = draft.model
    try:
        facts["built"] = built_draft(adapter, draft_dir, draft, version, reads)
        short = positions(adapter, draft_dir, context, version)
        if short is not None:
            findings.append(short)
    except Exception as exc:
        findings.append(_finding(FindingKind.draft_not_built, f"SGLang's config reader did not read the draft's sizes: "
                                 f"{one_line(exc)}; its built draft is not compared", "warning"))
    n_aux = getattr(inner, "num_aux_hidden_states", None)
    facts["num_aux_hidden_states"] = n_aux
    flags = built_flags(draft)
    try:
        flags["norm_before_residual"] = residual_wiring(adapter, draft, n_aux or 3,
                                                        getattr(inner, "hidden_size_in", 64))
    except Exception as exc:
        flags["norm_before_residual"] = None
        findings.append(_finding(FindingKind.draft_forward_failed, f"the engine's draft forward could not be run "
                                 f"to read its residual wiring: {one_line(exc)}", "info"))
    facts["graph"] = flags
    if "built" in facts:  # the layers its class built, and how each after the first is fed
        facts["built"]["layers_built"] = len(adapter.draft_layers(draft))
        try:
            facts["built"]["later_layer_input_norms"] = later_layer_wiring(
                adapter, draft, n_aux or 3, getattr(inner, "hidden_size_in", 64))
        except Exception as exc:
            findings.append(_finding(FindingKind.draft_forward_failed, f"the engine's draft forward could not be run to read "
                                     f"which norm its later layers apply: {one_line(exc)}", "info"))
    eagle = config.get("eagle_config") if isinstance(config.get("eagle_config"), dict) else {}
    for key in FLAG_KEYS:
        written = eagle.get(key, config.get(key))
        if written is not None and flags[key] is not None and bool(written) != flags[key]:
            findings.append(_finding(
                FindingKind.flag_dropped, f"the draft config sets {key}={written}, but SGLang's draft runs with "
                f"{key}={flags[key]}: the engine does not honour it", "error"))


def _embedding(adapter, draft, target_model, facts: dict):
    """Whether the engine swaps in the target's token embedding (and loads its lm_head from the
    target); returns the target's embedding weight."""
    inner = draft.model
    embed = adapter.decoder(target_model).embed_tokens.weight
    if embed.shape[-1] == inner.embed_tokens.weight.shape[-1]:
        draft.set_embed(embed)
        facts["embedding"] = "target" if inner.embed_tokens.weight is embed else "draft"
    else:
        facts["embedding"] = "draft"
    facts["lm_head_from_target"] = bool(getattr(draft, "load_lm_head_from_target", False))
    return embed


def _checkpoint(adapter, draft, config: dict, tensors: dict, embed, starts: bool, facts: dict,
                findings: list[dict]) -> dict[str, Any]:
    """What SGLang's load_weights does with the checkpoint's tensors (reached, refused, dropped,
    renamed), the vocabulary mapping it reads, and the worker's start-up call once loaded
    (`starts`: the class has it). Returns the vocabulary mapping."""
    bound = frozenset(n for n, p in draft.named_parameters() if p is embed and facts["embedding"] == "target")
    if facts["lm_head_from_target"]:
        bound |= {n for n, _ in draft.named_parameters() if n.startswith("lm_head.")}
    form = served_form(adapter, draft, tensors, bound)
    reached, refused, dropped = form["reached"], form["refused"], form["dropped"]
    d2t = next((n for n in tensors if n.endswith("d2t")), None)
    if "built" in facts:  # SGLang reads d2t as offsets: hot_token_id = d2t + arange
        facts["built"]["max_token_id"] = max_token_id(tensors[d2t] if d2t else None, "offsets",
                                                      facts["built"].get("draft_vocab_size"))
    t2d = next((n for n in tensors if n.endswith("t2d")), None)
    hot = getattr(draft, "hot_token_id", None)
    vocab = {"d2t": "offsets" if d2t and hot is not None else "absent",
             "t2d": "ignored" if t2d and t2d not in reached else "present" if t2d else "absent",
             "mapping": ("target id = d + d2t[d] (hot_token_id = d2t + arange)" if hot is not None
                         else "draft index used as target id (no d2t)")}
    facts["dropped_tensors"] = dropped
    facts["checkpoint_renames"] = form["renames"]
    facts["checkpoint_zero_biases"] = form["zero_biases"]
    if refused:
        first = refused[sorted(refused)[0]]
        findings.append(_finding(FindingKind.draft_unloadable, f"SGLang's load_weights raises {first} on checkpoint "
                                 f"tensor(s) {sorted(refused)}{_advice(form)}", "error"))
    if dropped:
        findings.append(_finding(FindingKind.tensors_dropped, f"SGLang's load_weights ignores checkpoint "
                                 f"tensor(s) {dropped}{_advice(form)}", "error"))
    if form["unfilled"]:
        fix = (f"; zero tensor(s) {form['zero_biases']} in the checkpoint make them the bias-free layer(s) "
               "training ran (`parity export` writes them)" if form["zero_biases"] else "")
        findings.append(_finding(FindingKind.params_unfilled, f"SGLang's draft class has parameter(s) "
                                 f"{form['unfilled']} that no checkpoint tensor fills: served, they keep "
                                 f"their random initial values{fix}", "error"))
    try:  # what the EAGLE worker calls once the draft is loaded (a class without it: said above)
        if starts:
            draft.get_hot_token_id()
    except Exception as exc:  # 0.4.x: hot_token_id exists only once a d2t tensor was loaded
        findings.append(_finding(FindingKind.draft_unloadable, f"the EAGLE worker's start-up call get_hot_token_id() "
                                 f"raises {one_line(exc)}", "error"))
    if t2d and t2d not in reached:
        findings.append(_finding(FindingKind.t2d_ignored, "SGLang ignores the checkpoint's t2d mask "
                                 "(it maps draft to target ids with d2t only)", "info"))
    if d2t is None and config.get("draft_vocab_size") not in (None, config.get("vocab_size")):
        findings.append(_finding(FindingKind.d2t_missing, "the draft has a reduced vocabulary "
                                 f"({config.get('draft_vocab_size')}) but no d2t tensor: SGLang will "
                                 "read draft indices as target token ids", "error"))
    return vocab


def dflash_facts(adapter, draft_dir: str, aux, findings: list[dict], version: str = "?") -> dict[str, Any]:
    """What SGLang's DFlash draft class makes of the draft (built by its config reader and model
    class at tiny widths): how many target states its fc takes (`num_context_features`), and
    whether it takes the concatenation the target captured (`aux`), fed through its own
    `project_target_hidden`: a refusal there is the engine's own, quoted (an error finding)."""
    tiny_dir, config = shrunk_draft_dir(draft_dir)
    draft = adapter.build_draft(str(tiny_dir))
    k = int(draft.num_context_features)
    facts: dict[str, Any] = {"model_class": f"{type(draft).__module__}.{type(draft).__name__}",
                             "num_context_features": k, "num_hidden_layers": len(draft.layers)}
    # its DFlash fields of parity.contract.BuiltDraft, off the model it built (the block size its
    # constructor set from the draft config, the fc's context features) and its own parser (the mask token)
    facts["built"] = {"built_by": f"sglang {version} {type(draft).__name__} (parse_dflash_draft_config + model class)",
                      "config_from": "the served config.json (its ModelConfig, draft model mode)",
                      "draft_kind": "dflash", "block_size": int(draft.block_size), "num_context_features": k,
                      "mask_token_id": adapter.dflash_draft_config(draft_dir).mask_token_id}
    if aux is None:
        return facts
    try:
        with torch.no_grad():
            out = draft.project_target_hidden(aux.reshape(-1, aux.shape[-1]))
        facts["projected_width"] = int(out.shape[-1])
    except Exception as exc:  # noqa: BLE001 - the engine's own refusal of this pair, in its words
        findings.append(_finding(FindingKind.engine_error, f"sglang {version}'s DFlash draft ({type(draft).__name__}, "
                                 f"{k} context features) refuses what the target captured: "
                                 f"project_target_hidden raised {one_line(exc)}", "error"))
    return facts
