"""Run the installed vLLM's real config classes, model runners' id resolution and capture; name
every captured state against transformers.

    python -m parity.extract.engines.vllm.probe  < request.json

Runs in a fresh process of the environment that has the vLLM release (own gloo port, own
global state). Two requests:

- {"mode": "dump", "target_config": {...}, "launch_ids": [2, 16, 29, 32]}: what speculators'
  data generation dumps: vLLM's `extract_hidden_states` speculative method with those ids
  (`draft_model_config.hf_config.eagle_aux_hidden_state_layer_ids`), each model runner's own
  start-up setting the capture, one prefill, the per-token stack the proposer writes;
- {"mode": "serving", "target_config": {...}, "draft_dir": "...", "candidates": [[...], ...]}:
  what the `eagle3` method feeds the draft: the draft directory read by vLLM's own config
  loader, each runner's resolution (the family's RUNNERS), the capture of each, and what each candidate id list
  would capture (the fix search; a DFlash draft's candidates written in its dflash_config and
  resolved by the GPU-default runner's own reader, `ids_written`).

The reply (last stdout line) lists, per runner, the ids it resolved, where it took them from,
and each captured slot's identification. A slot that matches no state of the transformers
reference (e.g. the uninitialised memory vLLM's CPU attention returns without parity's kernel
stand-ins: values near 1e18, or NaN) is an error, never a name.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
import shlex
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from . import cpu_limits, launch, ranks
from ...child import Answered, free_port, innermost, owner, run_steps
from .families import place
from .reply import VLLMReply
from ...config_reads import reading_dicts, recording
from ...run_until import CodePathMoved, require
from ... import layout
from ...child import HARNESS_LIMIT_KEY, LIMIT_RULES, harness_limit, imports_failing, one_line, parity_fault, with_limits
from ....contract.hf import draft_kind
from ....contract.reply import reply_header
from ....envs import reply_over_stdio
from ....errors import CannotExtract
from ...named import named_path, shown_names
from ...shrink import TINY, shrunk_draft_dir, shrunk_target_dir

LIMIT_RULES.extend(rule for rule in cpu_limits.RULES if rule not in LIMIT_RULES)  # vLLM's own limits of a CPU run

def warm() -> None:
    """The import-only first steps of `extract`, before any request (parity.forkserver forks
    each run from a process that did this): the CPU platform and the family's imports. No
    kernel is replaced, nothing set up or computed."""
    import importlib

    try:
        family = place(metadata.version("vllm")).module
    except LookupError:
        return  # the run itself reports it
    family.Adapter().platform()
    for name in family.IMPORTS:
        importlib.import_module(name)
    import transformers  # noqa: F401 - the reference model


def built_draft_dir(draft_dir: str) -> tuple[str, str | None]:
    """The draft directory vLLM builds its draft class from, and the real one whose checkpoint
    names decide the embedding when they differ. A draft made for the tiny target is used as it
    is (its weights load); a real-size one as a shrunk copy of its config (same keys, ids and
    flags, tiny widths: its class at full width would take gigabytes for nothing the contract
    reads), its checkpoint's tensor names kept."""

    config = json.loads((Path(draft_dir) / "config.json").read_text())
    width = config.get("hidden_size") or (config.get("transformer_layer_config") or {}).get("hidden_size")
    if width == TINY["hidden_size"]:
        return draft_dir, None
    tiny_dir, _ = shrunk_draft_dir(draft_dir)
    return str(tiny_dir), draft_dir


def name_slots(states: list, refs: dict) -> list[dict]:
    """Each captured [T, H] state named by numerical identity (parity.extract.identify); a
    non-finite or unmatched state gets no name and says why."""
    import torch

    from ...identify import identify

    slots = []
    for state in states:
        state = state.float()
        if not torch.isfinite(state).all():
            slots.append({"tap": None, "why": f"holds non-finite values (max |x| {state.abs().nan_to_num(0).max():.3g}, "
                          f"{int(torch.isnan(state).sum())} NaN): garbage, not a hidden state"})
            continue
        found = identify(state, refs)
        slot = {"tap": found.tap.name if found.tap else None, "rel_err": found.rel_err, "best": found.best.name,
                "runner_up": found.runner_up.name if found.runner_up else None,
                "runner_up_err": found.runner_up_err, "max_abs": float(state.abs().max())}
        if found.tap is None:
            slot["why"] = (f"ambiguous between {found.best.name} and {found.runner_up.name}" if found.ambiguous
                           else f"matches no state of the transformers reference (nearest {found.best.name} at "
                                f"relative error {found.rel_err:.3g}; max |x| {slot['max_abs']:.3g})")
        slots.append(slot)
    return slots


def capture_lacking(vllm_config) -> str | None:
    """Why a family that dumps with the target model's own capture (no `extract_hidden_states`:
    0.8.5-0.16) cannot dump this target, read off the class the release's registry resolves
    (before building it): the class has no `set_aux_hidden_state_layers` (not an EAGLE-3 target
    in that release: DeepSeek-V3 on 0.10-0.11). None when it has one."""
    from vllm.model_executor.model_loader.utils import get_model_architecture

    cls, _ = get_model_architecture(vllm_config.model_config)
    if hasattr(cls, "set_aux_hidden_state_layers"):
        return None
    return (f"its {cls.__name__} has no aux hidden-state capture (no set_aux_hidden_state_layers: not an "
            "EAGLE-3 target in this release), and the release has no extract_hidden_states, so its data "
            "generation cannot dump this target's states, on a GPU as here")


def capture(adapter, model, vllm_config, input_ids, refs) -> dict:
    """One prefill with the capture as set; the model's capture ids and each slot's name."""
    entry: dict[str, Any] = {"capture_ids": adapter.capture_ids(model)}
    try:
        _, aux = adapter.forward(model, vllm_config, input_ids)
    except Exception as exc:  # noqa: BLE001 - an engine error is a finding, reported per runner
        entry["error"] = f"the forward raised {one_line(exc)}"
        return entry
    entry["slots"] = name_slots(aux, refs)
    entry["aux"] = aux
    return entry


# The draft config's attributes vLLM's id readers look in for ids (write_ids rewrites them).
IDS_HOLDERS = ("eagle_aux_hidden_state_layer_ids", "eagle_config", "dflash_config")


@contextlib.contextmanager
def ids_written(vllm_config, ids: list[int], kind: str):
    """The draft's config as vLLM's config loader read it, with `ids` written in it as
    `write_ids` writes them in a `kind` draft's config.json (for a DFlash draft: its
    dflash_config's target_layer_ids, no top-level ids), so that the runner's own reader, run
    inside, resolves them as it would from the file; restored after. A fix found so is still
    verified by a full extraction from the written file (parity.verdict)."""
    from . import write_ids

    hf_config = vllm_config.speculative_config.draft_model_config.hf_config
    absent = object()
    before = {k: getattr(hf_config, k, absent) for k in IDS_HOLDERS}
    written = write_ids({k: v for k, v in before.items() if v is not absent}, ids, kind)
    try:
        for k in IDS_HOLDERS:
            if k in written:
                setattr(hf_config, k, written[k])
            elif before[k] is not absent:
                delattr(hf_config, k)
        yield
    finally:
        for k, v in before.items():
            if v is not absent:
                setattr(hf_config, k, v)
            elif hasattr(hf_config, k):
                delattr(hf_config, k)


def served_method(request: dict, reply: dict) -> str:
    """The speculative method the draft is served with: the one the serve arguments resolve to
    (the release's own resolution) when it is eagle3 or dflash, else the one the draft is written
    for ('dflash' for a DFlash draft, as vLLM also infers from its architecture; else 'eagle3')."""
    launched = ((reply.get("launch") or {}).get("effective") or {}).get("method")
    if launched in ("eagle3", "dflash"):
        return launched
    config = json.loads((Path(request["draft_dir"]) / "config.json").read_text())
    return "dflash" if draft_kind(config) == "dflash" else "eagle3"


def dflash_refusal(adapter, version: str) -> tuple[str, bool] | None:
    """Why this release cannot extract a DFlash draft, and whether that is the release's own
    answer (its SpeculativeConfig has no dflash method: as on a GPU) rather than parity's limit
    (its family adapter does not run DFlash); None when it can."""
    from vllm.config import SpeculativeConfig

    if not hasattr(SpeculativeConfig, "use_dflash"):
        return f"vllm {version} has no DFlash: its SpeculativeConfig has no dflash method", True
    if not getattr(adapter, "RUNS_DFLASH", False):
        return (f"parity's adapter for vllm {version} does not run DFlash capture (its family file, "
                f"{type(adapter).__module__}, says why)", False)
    return None


def dflash_draft(adapter, vllm_config, aux, version: str) -> tuple[dict, str | None]:
    """What vLLM's DFlash draft class (built as the proposer builds it) makes of the captured
    states: its class, and its own `combine_hidden_states` on their concatenation, whose refusal
    is the engine's own, quoted (returned second)."""
    import torch

    draft = adapter.build_draft(vllm_config)
    adapter.load_draft_weights(draft, vllm_config, [])  # process_weights_after_loading: its CPU linear
    facts = {"model_class": f"{type(draft).__module__}.{type(draft).__name__}"}
    if not aux:
        return facts, None
    try:
        with torch.no_grad():
            out = draft.combine_hidden_states(torch.cat(list(aux), dim=-1))
        facts["projected_width"] = int(out.shape[-1])
        return facts, None
    except Exception as exc:  # noqa: BLE001 - the engine's own refusal of this pair
        return facts, (f"vllm {version}'s DFlash draft ({type(draft).__name__}) refuses what the target captured: "
                       f"combine_hidden_states raised {one_line(exc)}")


def extract(request: dict) -> dict[str, Any]:
    """The reply to one request; whatever the engine raises on the way is its one-line error,
    with the release it came from."""
    version = metadata.version("vllm")
    reply: dict[str, Any] = reply_header(version)
    try:
        return _extract(request, version, reply)
    except Exception as exc:  # noqa: BLE001 - reported by the caller, never a bare traceback
        import traceback

        reply.update(error=one_line(exc), traceback=traceback.format_exc().strip().splitlines()[-8:])
        return reply


@dataclass
class _Run:
    """What the steps of one extraction share: the request, the reply being written, and what
    each step found for the next."""

    request: dict
    reply: dict
    version: str
    placement: Any = None
    family: Any = None
    adapter: Any = None
    work: Path | None = None
    target_dir: Path | None = None
    hf: Any = None  # the transformers reference model, seeded; its checkpoint is what vLLM loads
    speculative: dict | None = None  # the speculative config handed to vLLM (None: a dump set on the model)
    checkpoint: Any = None  # the served draft's checkpoint (serving)
    input_ids: Any = None
    plan: Any = None  # the serve command's parallel layout (ranks.py), when it has several ranks
    ranked: list | None = None
    reads: set | None = None  # the draft config's attributes vLLM's config classes read
    skip: list = field(default_factory=list)
    dict_reads: dict = field(default_factory=dict)  # a config vLLM reads as a dict first (the speculators format)
    vllm_config: Any = None
    model: Any = None
    refs: dict | None = None
    default_aux: Any = None  # what the GPU-default runner captured (a DFlash draft's fc is handed it)

    @property
    def serving(self) -> bool:
        return self.request["mode"] == "serving"


def _extract(request: dict, version: str, reply: dict[str, Any]) -> dict[str, Any]:
    """The reply, step by step: the release's family, the target's checkpoint, the speculative
    config as the serve command gives it, the layout, vLLM's config classes, the target built by
    its own model code, each runner's capture named, the fix search's candidates, the draft as its
    classes build it. A step that completes the reply early raises Answered."""
    run = _Run(request=request, reply=reply, version=version)
    return run_steps(run, _place, _set_up, _target, _speculative, _layout, _configure, _build, _runners,
                     _candidates, _draft)


def _place(run: _Run) -> None:
    """The release family that runs this release, its imports checked here."""
    try:
        placement = place(run.version)
    except LookupError as exc:
        run.reply.update(CannotExtract.entry("vllm", run.version, str(exc)))
        raise Answered
    run.family, run.adapter = placement.module, placement.module.Adapter()
    unimportable = imports_failing(lambda: (run.adapter.platform(), require(*run.family.IMPORTS)), "vllm")
    if unimportable is not None:  # this interpreter cannot run it: parity.extract.installed runs it elsewhere
        run.reply.update(CannotExtract.entry("vllm", run.version, unimportable, unimportable=True))
        raise Answered
    run.placement = placement


def _set_up(run: _Run) -> None:
    """The platform, the serve command's launch contract (before anything is built), the kernels
    parity stands in for."""
    request, reply, adapter = run.request, run.reply, run.adapter
    reply["family"] = run.placement.family
    if run.placement.note:
        reply["release_note"] = run.placement.note
    reply["code_paths"] = run.family.CODE_PATHS
    adapter.platform()
    if request.get("serve_args") is not None:  # the launch contract, before anything is built
        if not resolve_launch(adapter, request, run.version, reply):
            raise Answered
        if request.get("launch_only"):  # the serve command alone, refused before any model is built
            reply["launch_only"] = True
            raise Answered
    reply["kernel_standins"] = replace_kernels(adapter)


def _target(run: _Run) -> None:
    """The shrunk target's config and the seeded reference's checkpoint, which vLLM loads."""
    from ...reference import seeded_hf_model

    run.work, run.target_dir = shrunk_target_dir(run.request["target_config"], "parity-vllm-")
    run.hf = seeded_hf_model(str(run.target_dir), run.request.get("seed", 0))
    run.hf.save_pretrained(str(run.target_dir), safe_serialization=True)  # the checkpoint vLLM loads


def _speculative(run: _Run) -> None:
    """The speculative config vLLM is handed: a dump's (data generation), or the served draft's
    under the method the serve command resolves and the name it gives the draft."""
    request, reply, version = run.request, run.reply, run.version
    if request["mode"] == "dump":
        run.speculative = run.adapter.dump_config(request["launch_ids"])  # None: the family sets them on the model
        reply["dump_method"] = run.family.DUMP_METHOD
        return
    served, run.checkpoint = built_draft_dir(request["draft_dir"])
    method = served_method(request, reply)
    if method == "dflash":
        refused = dflash_refusal(run.adapter, version)
        if refused is not None:  # the release has no DFlash (its answer), or parity's adapter cannot run it
            reply.update(CannotExtract.entry("vllm", version, refused[0], engine_lacks=refused[1]))
            raise Answered
        reply["code_paths"] = getattr(run.family, "DFLASH_CODE_PATHS", run.family.CODE_PATHS)
    reply["method"] = method
    reply["draft_kind"] = "dflash" if method == "dflash" else "eagle3"
    # the draft shown under the name the serve command gives it, else --draft's (named.py)
    launched = ((reply.get("launch") or {}).get("names") or {})
    name = next((v for k, v in launched.items() if k != "model" and v), (request.get("names") or {}).get("draft"))
    run.speculative = {"method": method, "model": named_path(served, name, "draft"), "num_speculative_tokens": 1}


def _layout(run: _Run) -> None:
    """The seeded tokens, and the capture under the serve command's parallel layout, one process
    per rank, forked before this process starts its own group (ranks.py); the one-process run
    below reads the rest."""
    import torch

    request, reply = run.request, run.reply
    seed = request.get("seed", 0)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    run.input_ids = torch.randint(0, run.hf.config.vocab_size, (request.get("seq_len", 8),), generator=gen)
    if reply.get("launch") is not None and run.serving:
        run.plan = layout_plan(run.adapter, reply, run.version)
        if run.plan is False:
            raise Answered
    if run.plan is not None and run.plan.ranks > 1:
        runner = getattr(run.family, "GPU_DEFAULT_RUNNER", "v2")
        run.ranked = ranks.run(run.adapter, run.plan, free_port(), str(run.target_dir), run.speculative,
                               run.input_ids, list(request.get("candidates", [])), runner)


def _configure(run: _Run) -> None:
    """vLLM's config classes on the target and the speculative config, recording what they read
    of the draft's config (BuiltDraft's config keys); a refusal of the draft alone is unservable."""
    request, reply, adapter = run.request, run.reply, run.adapter
    run.reads = set() if run.serving and getattr(adapter, "BUILDS_DRAFT", False) else None
    try:
        with recording(run.reads, run.skip) if run.reads is not None else contextlib.nullcontext(), \
                reading_dicts(run.speculative["model"], run.dict_reads) if run.reads is not None \
                else contextlib.nullcontext():
            run.vllm_config = adapter.config(str(run.target_dir), run.speculative, free_port())
            run.skip.extend(adapter.target_configs(run.vllm_config))
    except Exception as exc:  # noqa: BLE001
        if (run.serving and not (harness_limit(exc) or parity_fault(exc))
                and _target_alone_configures(adapter, str(run.target_dir))):  # the draft is what it refuses: unservable
            reply["draft_refused"] = (f"vllm {run.version}'s config classes refuse the draft as written (the target "
                                      f"alone configures): {_words(exc)}")
            raise Answered
        reply["error"] = f"vllm {run.version}'s config classes refused the {request['mode']} set-up: {one_line(exc)}"
        reply["config_refused"] = True
        raise Answered


def _build(run: _Run) -> None:
    """The target built by vLLM's own model code, and the reference's states to name against."""
    from ...reference import candidate_states

    reply, adapter = run.reply, run.adapter
    reply["gpu_default_runner"] = adapter.gpu_default_runner(run.vllm_config)
    n = adapter.num_layers(run.vllm_config)
    if run.request["mode"] == "dump" and run.speculative is None:
        lacks = capture_lacking(run.vllm_config)
        if lacks is not None:  # the release's own answer, on a GPU as here
            reply.update(CannotExtract.entry("vllm", run.version, lacks, engine_lacks=True))
            raise Answered
    run.model = model = adapter.build_target(run.vllm_config)
    reply["model_class"] = f"{type(model).__module__}.{type(model).__name__}"
    reply["num_hidden_layers"] = n
    reply["default_ids"] = adapter.default_ids(model)
    run.refs = candidate_states(run.hf, run.input_ids)


def _runners(run: _Run) -> None:
    """Each model runner's capture, set by its own start-up code, run and named (under the serve
    command's layout: as its last stage hands it)."""
    request, reply, adapter, model = run.request, run.reply, run.adapter, run.model
    runners = {}
    for runner in run.family.RUNNERS:
        dump_on_model = request["mode"] == "dump" and run.speculative is None
        # the runner's own reading of the draft config's ids counts among vLLM's reads of it
        with recording(run.reads, run.skip) if run.reads is not None else contextlib.nullcontext():
            entry: dict[str, Any] = {"config_ids": (list(request["launch_ids"]) if dump_on_model
                                                    else adapter.config_ids(run.vllm_config, runner))}
        try:
            if dump_on_model:
                adapter.set_dump(model, request["launch_ids"])
            else:
                adapter.set_capture(model, run.vllm_config, runner)
        except Exception as exc:  # noqa: BLE001
            entry["error"] = f"setting the capture raised {one_line(exc)}"
            runners[runner] = entry
            continue
        entry.update(capture(adapter, model, run.vllm_config, run.input_ids, run.refs))
        if (not dump_on_model and entry["config_ids"] is None and entry.get("capture_ids") is not None
                and list(entry["capture_ids"]) != list(reply["default_ids"])):
            # A family that knows no config key (0.11), run on a release whose runner statement
            # reads one: the runner set other layers than the model's default, from the config.
            entry["config_ids"] = list(entry["capture_ids"])
        aux = entry.pop("aux", None)
        if runner == reply.get("gpu_default_runner"):
            run.default_aux = aux
        if request["mode"] == "dump" and aux is not None:
            entry["dump_shape"] = list(adapter.dump_stack(aux).shape)
        runners[runner] = entry
    if run.ranked is not None:  # what the draft is fed is what the layout's last stage hands it
        served = under_layout(run.ranked, run.plan, run.refs, runners.get(reply["gpu_default_runner"], {}), reply,
                              run.version)
        if served is None:  # parity's limit or its own fault under the layout: said in the reply
            raise Answered
        runners[reply["gpu_default_runner"]] = served
    reply["runners"] = runners


def _candidates(run: _Run) -> None:
    """What the GPU-default runner captures with each candidate id list (the fix search)."""
    reply, adapter, model = run.reply, run.adapter, run.model
    candidates = []
    for ids in run.request.get("candidates", []):
        try:
            if reply.get("draft_kind") == "dflash":  # its own key, read by the GPU-default runner's start-up
                with ids_written(run.vllm_config, ids, "dflash"):
                    adapter.set_capture(model, run.vllm_config, reply["gpu_default_runner"])
            else:
                adapter.set_ids(model, ids)
        except Exception as exc:  # noqa: BLE001
            candidates.append({"ids": ids, "fc_input": None, "error": one_line(exc)})
            continue
        got = capture(adapter, model, run.vllm_config, run.input_ids, run.refs)
        got.pop("aux", None)
        candidates.append({"ids": ids, "capture_ids": got["capture_ids"], "error": got.get("error"),
                           "fc_input": [s["tap"] for s in got.get("slots", [])] or None})
    if run.ranked is not None:
        candidates = candidates_under_layout(run.ranked, candidates, run.refs)
    reply["candidates"] = candidates


def _draft(run: _Run) -> None:
    """Serving: the draft as vLLM's draft class builds it (a DFlash draft: what it does with the
    captured states), its sizes from the real draft config, its built draft."""
    if not run.serving:
        return
    request, reply, adapter, version = run.request, run.reply, run.adapter, run.version
    if reply.get("draft_kind") == "dflash":
        try:
            reply["dflash_draft"], refusal = dflash_draft(adapter, run.vllm_config, run.default_aux, version)
            if refusal:
                reply["dflash_refusal"] = refusal
        except Exception as exc:  # noqa: BLE001 - the contract says what could not be read
            reply["draft_error"] = f"vllm {version}'s DFlash draft class could not be built: {one_line(exc)}"
        return
    parts: dict[str, Any] = {}  # what its modules compute and the config keys it read: the built draft's
    try:
        facts = adapter.draft_facts(run.vllm_config, run.model, run.checkpoint, run.reads, run.dict_reads)
        parts = {key: facts.pop(key) for key in ("module", "config_keys") if key in facts}
        reply["draft"] = facts
    except Exception as exc:  # noqa: BLE001 - the contract says what could not be read
        refusal = loader_refusal(exc)
        if refusal:  # the engine's own refusal of the checkpoint: as written, the draft cannot be served
            reply["draft_unloadable"] = f"vllm {version} cannot load the draft's checkpoint: {refusal}"
        else:
            reply["draft_error"] = f"vllm {version}'s draft class could not be built: {one_line(exc)}"
    try:  # the sizes: read from the draft's real config files, never the shrunk copy's
        reply["draft_sizes"] = adapter.real_draft_sizes(request["draft_dir"])
    except Exception as exc:  # noqa: BLE001
        reply["draft_sizes_error"] = f"vllm {version}'s config reader refused the draft config: {one_line(exc)}"
    try:
        if not reply.get("draft_unloadable"):  # unservable: that finding says why nothing is compared
            reply["built"] = built_draft(adapter, version, request, reply, parts)
    except Exception as exc:  # noqa: BLE001 - a finding: this side's built draft is not compared
        reply["built_error"] = f"vllm {version} did not build the draft: {one_line(exc)}"


def layout_plan(adapter, reply: dict, version: str):
    """The ranks to run the capture on for the serve command's parallel layout (layout.plan), None
    for one rank; False (the reply then carries the limit: exit 2, naming what is not run) where
    parity does not run it. The layout's record says what stood for what, and what was not run."""
    said = reply["launch"]["layout"]
    words = ", ".join(f"{f.rsplit('.', 1)[-1]} {v}" for f, v in said["fields"].items()
                      if v is True or (type(v) is int and v > 1))
    try:
        plan = layout.plan(said, launch.LAYOUT_WORDS, launch.unrun_degrees(said["fields"]))
    except layout.NotRunnable as exc:
        reply["error"] = reply[HARNESS_LIMIT_KEY] = f"under the serve command's parallel layout ({words}), {exc}"
        return False
    if plan is not None and plan.ranks > 1 and not adapter.RUNS_RANKS:
        reply["error"] = reply[HARNESS_LIMIT_KEY] = (
            f"under the serve command's parallel layout ({words}), parity's adapter for vllm {version} "
            f"({reply.get('family')} family) runs the capture in one process only, so the states the draft is fed "
            "under it are not known")
        return False
    not_run = list(plan.not_run) if plan is not None else []
    if said.get("draft_tp") not in (None, 1):
        not_run.append(f"draft_tensor_parallel_size {said['draft_tp']}: the draft's own tensor parallelism is not "
                       "run (its class was built in one process)")
    said["not_run"] = not_run
    if plan is not None and plan.ranks > 1:
        said["run"] = {"ranks": plan.ranks, "tp": plan.tp, "pp": plan.pp, "stands_for": list(plan.stands_for)}
    return plan


def under_layout(ranked: list[dict], plan, refs, one_process: dict, reply: dict, version: str) -> dict | None:
    """The GPU-default runner's entry under the layout: its ids (the one-process run's reading of
    the config), the capture the last stage holds, each slot it hands the draft named numerically;
    or the engine's own error (its start-up refusing the layout, a stage's forward raising). None
    when the capture under the layout could not be run (the reply says why)."""
    records = layout.records(ranked)
    stop = layout.parity_stop(records, ranked, "vllm", version)
    if stop is not None:  # parity's limit or its own fault, met on a rank, or a rank lost
        reply.update(stop)
        return None
    entry: dict[str, Any] = {"config_ids": one_process.get("config_ids")}
    fatal = next((r["fatal"] for r in records if r.get("fatal")), None)
    if fatal is not None:  # vLLM's own code refused this rank's part (its config or build)
        entry["error"] = f"under the parallel layout, vllm {version} stopped building a rank: {fatal['line']}"
        return entry
    stages = {}
    for record in records:
        if record.get("runs"):
            stages.setdefault(record["runs"][0]["stage"]["pp_rank"], record["runs"][0]["stage"])
    reply["launch"]["layout"]["run"]["stages"] = [
        {"stage": s, "layers": stages[s]["layers"], "capture": stages[s]["capture"]} for s in sorted(stages)]
    served = [r["runs"][0] for r in records if r.get("runs")]
    refused = next((run for run in served if run.get("configure_error")), None)
    if refused is not None:  # V2's start-up refuses (e.g. no aux states over pipeline stages): no server starts
        entry["error"] = (f"setting the capture under the parallel layout raised {refused['configure_error']['line']} "
                          f"(on rank {served.index(refused)}: the V2 runner's start-up, so no server starts)")
        return entry
    raised = next((run for run in served if run.get("forward_error")), None)
    if raised is not None or len(served) < len(records):
        stage = (raised or served[0])["stage"]
        why = raised["forward_error"]["line"] if raised else "a peer stopped"
        entry["error"] = (f"under the parallel layout, pipeline stage {stage['pp_rank']} of {plan.pp} (layers "
                          f"{stage['layers'][0]}-{stage['layers'][1] - 1}): the forward raised {why}")
        return entry
    last = next(run for run in served if run["stage"]["is_last"] and run["stage"]["tp_rank"] == 0)
    entry["capture_ids"] = last["stage"]["capture"]
    entry["slots"] = name_slots(last.get("aux") or [], refs)
    return entry


def candidates_under_layout(ranked: list[dict], one_process: list[dict], refs) -> list[dict]:
    """Each candidate id list as the layout's last stage hands it (the fix search's, under the
    serve command's layout)."""
    refused = any(r.get("refused") for r in layout.records(ranked))
    out = []
    for before, (last, errors) in zip(one_process, layout.candidate_runs(ranked, len(one_process))):
        if last is None or errors:
            out.append({"ids": before["ids"], "fc_input": None, "error": "; ".join(errors) or (
                "the start-up refuses this layout" if refused else
                "not run under the layout (a stage stopped on an earlier run)")})
            continue
        slots = name_slots(last.get("aux") or [], refs)
        out.append({"ids": before["ids"], "capture_ids": last["stage"]["capture"], "error": None,
                    "fc_input": [s["tap"] for s in slots] or None})
    return out


def loader_refusal(exc: BaseException) -> str | None:
    """The engine's own error when `exc` is vLLM's weight loading refusing the draft's checkpoint
    (vLLM 0.11's `load_weights` raising KeyError on a tensor its one-layer class has no parameter
    for), else None. Decided from the traceback, never from the message: it passed through a
    `load_weights` of vLLM's own code, its innermost frame of parity's and the run packages' is
    vLLM's, and it is neither a limit of parity's CPU harness nor a fault of parity's own code
    (those stay exit 2 and exit 3). Named with where vLLM raised it."""
    if harness_limit(exc) is not None or parity_fault(exc) is not None:
        return None
    tb, who = innermost(exc)
    loading, walk = False, exc.__traceback__
    while walk is not None:
        code = walk.tb_frame.f_code
        loading = loading or (code.co_name == "load_weights" and owner(code.co_filename) == "vllm")
        walk = walk.tb_next
    if who != "vllm" or not loading:
        return None
    path = tb.tb_frame.f_code.co_filename.replace("\\", "/")
    where = "vllm/" + path.rsplit("/vllm/", 1)[-1]
    return f"{one_line(exc)} (raised by {where}:{tb.tb_lineno} {tb.tb_frame.f_code.co_name})"


def built_draft(adapter, version: str, request: dict, reply: dict, parts: dict[str, Any]) -> dict[str, Any]:
    """The draft as this release builds it (parity.contract.BuiltDraft): sizes, rope settings
    and dtype as its config reader reads the real draft (and target) config; rotary frequencies,
    eps, activation and the head's tie off the draft class it built at tiny widths (read before
    any weight is loaded or shared with the target); the largest target id by the d2t mapping
    its `compute_logits` was run with. Where a release has two runners (0.17-0.33), both build the
    draft with the same class (V1's `EagleProposer` and V2's `load_eagle_model` each `get_model` the
    draft model config's architecture from the registry), so one build is read for both. `parts`: what
    the draft facts read off its modules ("module") and the config keys its class read ("config_keys"),
    folded in here."""
    from ...built import checkpoint_d2t, max_token_id

    if not getattr(adapter, "BUILDS_DRAFT", False):
        raise LookupError(f"parity reads vLLM's built draft from the 0.11 family on, not yet with the "
                          f"{reply.get('family')} family")
    facts = reply.get("draft") or {}
    if parts.get("module") is None:
        raise LookupError(reply.get("draft_error") or "its draft class was not built")
    built = adapter.real_draft_built(request["draft_dir"], request["target_config"])
    built.update(parts["module"])
    built.update(parts.get("config_keys") or {})  # the config keys it read building the draft
    has_weights, d2t = checkpoint_d2t(request["draft_dir"])
    if has_weights:
        built["max_token_id"] = max_token_id(d2t, (facts.get("vocab") or {}).get("d2t"), built["draft_vocab_size"])
    built["built_by"] = f"vllm {version} {facts.get('class', '?').rsplit('.', 1)[-1]}"
    built["config_from"] = "the served config.json (its get_config, as the draft's ModelConfig reads it)"
    return built


def resolve_launch(adapter, request: dict, version: str, reply: dict) -> bool:
    """reply["launch"]: the serve arguments as the release parses and resolves them, with the
    verified fixes; False (reply["launch_refused"]: the engine's words) when its parser or
    resolution refuses them, or its family resolves none; False with reply["error"] when what
    stopped it is parity's (a limit of its CPU environment, a failure of its own code, noted
    for the reply: parity.extract.child), never the engine's refusal."""
    resolver = getattr(adapter, "LAUNCH", None)
    if resolver is None:
        reply["launch_refused"] = (f"serve arguments are resolved from vLLM 0.11 on; this release's family "
                                   f"({reply.get('family')}) has no launch resolver yet")
        reply["launch_unresolved"] = True  # not the engine refusing them: parity cannot resolve them here
        return False
    argv, draft_dir, names = request["serve_args"], request.get("draft_dir"), request.get("names") or {}
    model_dir = launch.write_model_dir(Path(tempfile.mkdtemp(prefix="parity-vllm-launch-")), request["target_config"])
    model_dir = named_path(model_dir, names.get("target"), "target")  # the engine reads names (named.py)
    if draft_dir:
        draft_dir = named_path(draft_dir, names.get("draft"), "draft")
    try:
        resolved = launch.resolve(resolver, argv, model_dir, draft_dir)
    except launch.Refused as exc:
        reply["launch_refused"] = f"argument parser refused them: {exc}"
        return False
    except CodePathMoved as exc:  # the family's resolver looks where this release keeps nothing: parity's limit
        reply["error"] = reply[HARNESS_LIMIT_KEY] = (f"the {reply.get('family')} family's launch resolver does not "
                                                     f"fit this release ({exc})")
        return False
    except Exception as exc:  # noqa: BLE001 - the engine's resolution refused the arguments, or parity failed
        if harness_limit(exc) or parity_fault(exc):  # parity's (with_limits replies with it), never the engine's refusal
            reply["error"] = f"resolving the serve arguments stopped: {one_line(exc)}"
            return False
        why = f"resolution refused them: {_words(exc)}{launch.spec_shape_note(resolver, argv, model_dir)}"
        for fix in launch.fix_for_refused(resolver, argv, model_dir, draft_dir)[:1]:
            why += (f" (verified: with \"method\": \"eagle3\" it resolves them: serve with "
                    f"{shlex.join(fix['argv'])})")
        reply["launch_refused"] = why
        return False
    # the method must serve the draft's own kind (its config, as the verdict reads it)
    kind = draft_kind(json.loads((Path(draft_dir) / "config.json").read_text())) if draft_dir else "eagle3"
    resolved = launch.draft_kind_of(resolved, kind)
    resolved["fixes"] = launch.fixes(resolver, argv, resolved, model_dir, draft_dir, kind)
    shown_names(resolved, lambda: launch.resolve(resolver, argv, model_dir, draft_dir, neutral=True))
    reply["launch"] = {k: v for k, v in resolved.items() if not k.startswith("_")}
    return True


def _target_alone_configures(adapter, target_dir: str) -> bool:
    """Whether vLLM's config classes accept the target with no speculative config: then what they
    refused is the draft (its process group is made only after the configs are built, so the
    refused call left nothing half set up)."""
    try:
        adapter.config(target_dir, None, free_port())
        return True
    except Exception:  # noqa: BLE001 - the target's own refusal, or parity's: not the draft's
        return False


def _words(exc: BaseException) -> str:
    """vLLM's message, on one line: a config class's validation error by its own message (not
    pydantic's wrapping), after the class and the key it names when it names one (`SpeculativeConfig:
    draft_max_model_len: Unexpected keyword argument`), without the list of every supported
    architecture that follows an unsupported one."""
    errors = getattr(exc, "errors", None)
    try:
        first = errors()[0] if callable(errors) else {}
        message, where = first.get("msg"), ".".join(str(part) for part in first.get("loc") or ())
    except Exception:  # noqa: BLE001
        message = where = None
    if not message:
        return one_line(exc)
    message = " ".join(str(message).split())
    if where:  # the key at fault (an unknown one is "Unexpected keyword argument" alone), in its class
        message = f"{getattr(exc, 'title', None) or 'config'}: {where}: {message}"
    head, cut, _ = message.partition(" Supported architectures:")
    return head + (" (vLLM then lists every architecture it supports)" if cut else "")


def replace_kernels(adapter) -> list[str]:
    """The kernel bodies replaced for this run (parity.extract.engines.vllm.kernels)."""
    return adapter.replace_kernels()


def main() -> None:
    reply_over_stdio(VLLMReply.checked(with_limits(extract, "vllm")))


if __name__ == "__main__":
    raise SystemExit(main())
