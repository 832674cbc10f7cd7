"""Run the installed SGLang's real config reading and capture path; print what it fed the fc.

    python -m parity.extract.engines.sglang.probe  < request.json

Runs in a fresh process per extraction (own gloo port, own global state), so it is
safe under pytest-xdist and can run under another release's environment. The request
is {"target_config": {...}, "draft_dir": "...", "seq_len": 8, "seed": 0}; the reply (last
stdout line) is a JSON object that parity.extract.engines.sglang turns into a ServingContract.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from ...families import UnsupportedRelease
from . import cpu_path, launch, ranks, rope_base
from .draft_facts import dflash_facts, draft_facts
from .runtime import adapter_for, setup_on_a_free_port  # probe.adapter_for: what drift tests rebind
from .reply import SGLangReply
from ...child import (HARNESS_LIMIT_KEY, LIMIT_RULES, Answered, finding, free_port, harness_limit, imports_failing, note, one_line, parity_fault, run_steps, with_limits,
                      words)
from ... import layout
from ...identify import identify_slots
from ...named import named_path, shown_names
from ...reference import WRAPPER_TEXT_PREFIX, candidate_states, checkpoint_tensors, seeded_hf_model, seeded_tokens
from ...shrink import shrunk_target_dir
from ....contract.models import FindingKind
from ....contract.reply import reply_header
from ....envs import reply_over_stdio
from ....errors import CannotExtract
from ....inputs import is_wrapper, text_part
from ....contract.hf import draft_kind


# SGLang's own limits of a CPU run, named where met (parity.extract.child.harness_limit)
LIMIT_RULES.extend(rule for rule in (cpu_path.gpu_memory_unknown,) if rule not in LIMIT_RULES)


def warm() -> None:
    """The import-only first steps of `extract`, before any request (parity.forkserver forks
    each run from a process that did this): the stand-ins, the family placement and the
    imports of its code paths, then the model modules (warm_model_modules, which `extract` runs
    at the same point, so a fresh run imports in the same order). Nothing is patched, set up
    or computed."""
    try:
        adapter_for(metadata.version("sglang"))[0].check_code_paths()
    except (LookupError, ImportError):
        return  # the run itself reports it
    warm_model_modules()


def warm_model_modules() -> None:
    """Import, one by one, the modules SGLang's model registry imports when a run first asks it
    for an architecture (`sglang.srt.models.registry.import_model_classes`: every non-package
    module of `sglang.srt.models`), without importing the registry itself. That import is most
    of a warmed run otherwise (7 of 11 s on the 32-layer Llama under 0.5.23: 250 Triton kernels'
    decorators reading their own source, docs/children.md). The registry, imported in the run
    after the runtime's set-up, as SGLang imports it, finds these modules imported and builds
    its table from them (where a model module imports the registry, both are forgotten again:
    _unimport_the_registry). A module whose import needs that set-up (0.4.8's torch_native_llama
    reads the tensor-parallel group) fails here, is left unimported (Python removes a module
    whose import raised) and is imported again by the registry after the set-up, as in SGLang:
    the registry holds the same classes. `extract` runs this at the same point, so a fresh run
    and a forked one import in one order (the stand-ins installed at set-up see the same
    classes: rope_standin patches Grok's own rotary subclass in both)."""
    import importlib
    import os
    import pkgutil

    if os.environ.get("SGLANG_DISABLED_MODEL_ARCHS") or os.environ.get("SGLANG_EXTERNAL_MODEL_PACKAGE"):
        return  # the registry's own choice of modules: left to the run
    try:
        models = importlib.import_module("sglang.srt.models")
    except Exception:  # noqa: BLE001 - the run reports it
        return
    for _, name, ispkg in pkgutil.iter_modules(models.__path__, "sglang.srt.models."):
        if not ispkg:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - imported again by the registry in the run
                continue
    _unimport_the_registry(models)


REGISTRY = "sglang.srt.models.registry"


def _unimport_the_registry(models) -> None:
    """From 0.5.7 on, a model module imports the registry (`mindspore`, `llava`), whose module
    body builds its table at once: before the set-up, and while that module is half imported
    (its class missing). Forget the registry and every model module holding a reference to
    it, so the run imports them after the set-up, in SGLang's order, and the table is built
    then from the modules already imported."""
    registry = sys.modules.get(REGISTRY)
    if registry is None:
        return
    held = {id(registry), *(id(v) for v in vars(registry).values() if getattr(v, "__module__", None) == REGISTRY)}
    for name in [n for n in sys.modules if n.startswith("sglang.srt.models.") and n != REGISTRY]:
        module = sys.modules[name]
        if any(id(value) in held for value in vars(module).values()):
            del sys.modules[name]
            if getattr(models, name.rsplit(".", 1)[1], None) is module:
                delattr(models, name.rsplit(".", 1)[1])
    del sys.modules[REGISTRY]
    if getattr(models, "registry", None) is registry:
        delattr(models, "registry")


def native_class_importable(cls: type, arch: str) -> None:
    """SGLang's model registry skips a model module that fails to import (it logs "Ignore import
    error") and may then pick a generic class for the architecture. Running that class would
    test something else: when the class picked is not `arch` and a model module of the
    installed SGLang defines `arch`, importing that module raises the real reason."""
    import importlib
    import re

    if cls.__name__ == arch:
        return
    import sglang.srt.models as models

    for root in models.__path__:
        for f in sorted(Path(root).glob("*.py")):
            if re.search(rf"^class {re.escape(arch)}\(", f.read_text(errors="ignore"), re.M):
                name = f"sglang.srt.models.{f.stem}"
                try:
                    importlib.import_module(name)
                except Exception as exc:  # noqa: BLE001 - the reason, named
                    raise ImportError(f"sglang's model module {name}, which defines {arch}, cannot be imported "
                                      f"here ({one_line(exc)}), so SGLang would run {cls.__name__} instead") from exc


def engine_frame(exc: BaseException) -> str:
    """Where it was raised (`path:line function`), and from which model-code frame."""
    import traceback

    def name(f) -> str:
        path = f.filename.replace("\\", "/")
        for root in ("/sglang/", "/parity/"):
            if root in path:
                path = root.strip("/") + "/" + path.split(root, 1)[1]
                break
        return f"{path}:{f.lineno} {f.name}"

    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    where = name(frames[-1])
    model = [f for f in frames if "/sglang/srt/models/" in f.filename.replace("\\", "/")]
    return where + (f", in model code {name(model[-1])}" if model and model[-1] is not frames[-1] else "")


def importer(exc: BaseException) -> str:
    """The installed file whose import statement failed, from its package root
    (`compressed_tensors/modeling/attention.py:15`)."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "site-packages/" in f.filename.replace("\\", "/")]
    if not frames:
        return "?"
    return f"{frames[-1].filename.replace(chr(92), '/').split('site-packages/', 1)[1]}:{frames[-1].lineno}"


class TargetUnbuildable(Exception):
    """The engine's own model class could not be built from the target config (one line)."""


class RefusedAtStartUp(Exception):
    """The engine's EAGLE-3 start-up refuses the target's model class (start_up_refusal), and
    parity's CPU run could not build or run that model: on a GPU, which builds it, the start-up
    refuses before any forward, so the refusal is the answer (one line, the engine's words)."""


def build_target(adapter, target_cfg, real: dict, version: str, refusal: str | None = None):
    """The engine's model of the target, built by its own class from its own config object; a
    failure is TargetUnbuildable naming what the engine read, where, and what the file lacks.
    A CUDA-only build (a limit of parity's CPU run) of a class the engine's start-up refuses
    (`refusal`) is RefusedAtStartUp: a GPU builds it, and its start-up then refuses it."""
    try:
        return adapter.build_target(target_cfg)
    except (MemoryError, OSError):
        raise  # a resource failure, not the config: reported (and never cached) as such
    except Exception as exc:  # noqa: BLE001 - named below, from the exception itself
        if refusal is not None and harness_limit(exc):  # judged here, never noted as this run's limit
            raise RefusedAtStartUp(refusal) from None
        raise TargetUnbuildable(unbuildable(exc, getattr(target_cfg, "hf_config", None), real, version)) from None


def unbuildable(exc: BaseException, hf_config, real: dict, version: str) -> str:
    """One line on why sglang `version` could not build the target's model: the engine class
    whose code raised and, when it read an attribute its config object lacks, the key path
    (`vision_config.vt_hidden_size`, found by where that config object sits in the engine's
    config) and what the user's file (`real`) has of it."""
    arch = (real.get("architectures") or ["?"])[0]
    reader = engine_reader(exc)
    head = f"sglang {version} cannot build {arch} from it"
    key = missing_config_key(exc, hf_config)
    if key is None:
        return f"{head}: {reader} raised {one_line(exc)}"
    *parents, name = key.split(".")
    have, node = [], real
    for part in parents:
        if not isinstance(node, dict) or part not in node:
            break
        have.append(part)
        node = node[part]
    if len(have) < len(parents):
        absent = ".".join(parents[:len(have) + 1])
        why = (f"which the file lacks: it has no {absent}, so the engine used "
               f"{type(exc.obj).__name__}'s defaults, which have no {name}; restore {key}")
    elif isinstance(node, dict) and name not in node:
        why = f"which the file lacks; restore {key}"
    else:  # in the file, yet not on the engine's config object
        why = f"which the engine's {type(exc.obj).__name__} does not have"
    return f"{head}: {reader} reads {key}, {why} ({one_line(exc)})"


def missing_config_key(exc: BaseException, hf_config) -> str | None:
    """The dotted key path of the attribute an AttributeError says a config object lacks (its
    `obj`, found among `hf_config` and its nested configs), or None when it is no such error."""
    obj, name = getattr(exc, "obj", None), getattr(exc, "name", None)
    if not isinstance(exc, AttributeError) or obj is None or not name or not _is_config(obj):
        return None
    seen, todo = set(), [((), hf_config)]
    while todo:
        path, node = todo.pop(0)
        if node is obj:
            return ".".join((*path, name))
        if not _is_config(node) or id(node) in seen:
            continue
        seen.add(id(node))
        todo += [((*path, k), v) for k, v in vars(node).items() if _is_config(v)]
    return f"{type(obj).__name__}.{name}"  # a config object the engine made elsewhere


def _is_config(obj) -> bool:
    """A transformers config object (`PretrainedConfig`; `PreTrainedConfig` from transformers 5)."""
    return any(c.__name__.lower() == "pretrainedconfig" for c in type(obj).__mro__)


def engine_reader(exc: BaseException) -> str:
    """The engine class whose code raised `exc` (the innermost engine frame with a `self`):
    `sglang.srt.models.kimi_k25.K2VLMultiModalProjector`; else that frame's function."""
    tb, found = exc.__traceback__, None
    while tb is not None:
        if str(tb.tb_frame.f_globals.get("__name__", "")).startswith("sglang."):
            found = tb
        tb = tb.tb_next
    if found is None:
        return f"the engine (at {engine_frame(exc)})"
    self = found.tb_frame.f_locals.get("self")
    if self is not None:
        cls = type(self)
        return f"{cls.__module__}.{cls.__qualname__}"
    return f"{found.tb_frame.f_globals['__name__']}.{found.tb_frame.f_code.co_name}"


CAPTURE_HOOK = "set_eagle3_layers_to_capture"  # what an EAGLE-3 start-up calls on the target model


def no_capture_hook(exc: BaseException, model, arch: str, version: str) -> str | None:
    """The engine's own verdict when its EAGLE-3 start-up asked the target's model object for
    `set_eagle3_layers_to_capture` and the release's model class has none (DeepSeek-V3 up to
    SGLang 0.5.4.post1, Qwen3 up to 0.4.8.post1): every EAGLE-3 launch of that target fails
    there, on any hardware, so no draft can be served for it. None for any other failure."""
    if not (isinstance(exc, AttributeError) and getattr(exc, "name", None) == CAPTURE_HOOK
            and getattr(exc, "obj", None) is model and not hasattr(type(model), CAPTURE_HOOK)):
        return None
    return (f"sglang {version} cannot serve an EAGLE-3 draft for {arch}: its model class "
            f"{type(model).__module__}.{type(model).__name__} has no {CAPTURE_HOOK}, which its EAGLE-3 start-up "
            f"calls on the target model, so every EAGLE-3 launch of this target fails there ({words(exc)})")


def start_up_refusal(adapter, target_cfg, use_aux: bool, ids, arch: str, version: str) -> str | None:
    """no_capture_hook's verdict, found before the model is built: the release's capture statement
    (adapter.configure_capture) run on an unbuilt instance of the target's model class (made by
    `__new__`, its `__init__` not run: the statement only asks it for the hook). The engine's
    start-up calls the hook right after building the model, before any forward, so this is its
    answer whatever parity's CPU run can build or run. None when the class, or any engine class
    it derives from, names the hook anywhere in its source (its `__init__` could then set it),
    or when the statement asks the model for anything else."""
    cls = adapter.model_class(target_cfg)
    if hasattr(cls, CAPTURE_HOOK):
        return None
    for base in cls.__mro__:
        if not base.__module__.startswith("sglang."):
            continue
        try:
            if CAPTURE_HOOK in inspect.getsource(base):
                return None
        except (OSError, TypeError):
            return None  # its source cannot be read: nothing is assumed
    bare = cls.__new__(cls)
    try:
        adapter.configure_capture(bare, use_aux, ids)
    except AttributeError as exc:
        return no_capture_hook(exc, bare, arch, version)
    except Exception:  # noqa: BLE001 - the statement needs a built model: the run below answers
        return None
    return None


def why_fallback(draft_config: dict) -> str:
    """Name why the engine found no ids, from the draft config the user wrote."""
    eagle = draft_config.get("eagle_config")
    key = "eagle_aux_hidden_state_layer_ids"
    if eagle is None:
        if key in draft_config:
            return (f"the ids are at the top level of config.json ({draft_config[key]}), but the "
                    f"engine only reads eagle_config['{key}']")
        return f"config.json has no eagle_config, so there is no eagle_config['{key}'] to read"
    if not isinstance(eagle, dict):
        return f"eagle_config is a {type(eagle).__name__}, not an object"
    if key not in eagle:
        near = [k for k in eagle if "layer" in k.lower()]
        return (f"eagle_config has no '{key}'" + (f" (it has {near}: a misspelling?)" if near else ""))
    return f"eagle_config['{key}'] is {eagle[key]!r}, which the engine could not use"


def no_eagle3(version: str) -> str | None:
    """Why the installed sglang has no EAGLE-3 at all (its SpeculativeAlgorithm has no EAGLE3:
    0.4.4 and 0.4.4.post1), or None; asked only of a release no family can run, so that its
    refusal says the one thing that matters. A package that cannot be imported here is left to
    the family placement's reason."""
    try:
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    except Exception:  # noqa: BLE001 - said by the placement below
        return None
    if hasattr(SpeculativeAlgorithm, "EAGLE3"):  # an Enum up to 0.5.x, a plain class later
        return None
    has = ", ".join(getattr(SpeculativeAlgorithm, "__members__", None) or
                    sorted(n for n in vars(SpeculativeAlgorithm) if n.isupper()))
    return f"sglang {version} has no EAGLE-3: its SpeculativeAlgorithm has no EAGLE3 (it has {has})"


def resolve_launch(adapter, argv: list[str], target_config: dict, draft_dir: str | None, work: Path,
                   reply: dict, names: dict[str, str]) -> bool:
    """reply["launch"]: the serve arguments as the release parses and resolves them, with the
    verified fixes of what it overrode; False (reply["launch_refused"]: the engine's words)
    when its parser or resolution refuses them; False with reply["error"] when what stopped it
    is parity's (a limit of its CPU run, a failure of its own code, noted for the reply:
    parity.extract.child), never the engine's refusal."""
    model_dir = named_path(launch.write_model_dir(work, target_config), names.get("target"), "target")
    try:
        reply["launch"] = launch.resolve(adapter.LAUNCH, argv, model_dir, draft_dir)
    except launch.Refused as exc:
        reply["launch_refused"] = f"argument parser refused them: {exc}"
        return False
    except Exception as exc:  # noqa: BLE001 - the engine's resolution refused the arguments, or parity failed
        if harness_limit(exc) or parity_fault(exc):  # parity's (with_limits replies with it), never the engine's refusal
            reply["error"] = f"resolving the serve arguments stopped: {one_line(exc)}"
            return False
        reply["launch_refused"] = f"argument resolution refused them: {one_line(exc)}"
        return False
    reply["launch"]["fixes"] = launch.fixes(adapter.LAUNCH, argv, reply["launch"], model_dir, draft_dir)
    shown_names(reply["launch"], lambda: launch.resolve(adapter.LAUNCH, argv, model_dir, draft_dir, neutral=True))
    algorithm = reply["launch"]["effective"].get("speculative_algorithm")
    reply["launch"]["algorithm_is_eagle3"] = _is_eagle3(algorithm)
    if draft_dir and draft_kind(json.loads((Path(draft_dir) / "config.json").read_text())) == "dflash":
        reply["launch"]["draft_kind"] = "dflash"  # the algorithm must serve a DFlash draft
        reply["launch"]["algorithm_is_dflash"], answer = _is_dflash(adapter, algorithm)
        if answer:
            reply["launch"]["algorithm_answer"] = answer
    return True


def _is_dflash(adapter, name: str | None) -> tuple[bool | None, str | None]:
    """The engine's own answer: does this algorithm serve a DFlash draft? False on a release
    without DFlash; None when the release cannot name it. With it, the release's own method that
    gave it ("its is_dflash()" on 0.5.12-0.5.15, "its is_dflash_family()" from 0.5.16), read
    from the installed class, for the launch verdict to name."""
    try:
        question = adapter.dflash_question()
        return adapter.serves_dflash(name), (f"its {question}()" if question else None)
    except Exception:  # noqa: BLE001
        return None, None


def _is_eagle3(name: str | None) -> bool | None:
    """The engine's own answer: does this algorithm capture the target's aux hidden states?"""
    try:
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    except ImportError:
        return None
    try:
        algorithm = SpeculativeAlgorithm.from_string(name) if name else None
    except Exception:  # noqa: BLE001
        return None
    return bool(algorithm is not None and algorithm.is_eagle3())


# SGLang's DFlash-family algorithm names (run by the families that run DFlash only).
DFLASH_FAMILY = ("DFLASH", "DSPARK")


def served_algorithm(draft_config: dict, launch: dict | None) -> str | None:
    """The speculative algorithm the draft is served under: with serve arguments, the one they
    resolve to (the release's own resolution), whatever it is: `EAGLE`, `STANDALONE` or none at
    all (None, as SGLang's `SpeculativeAlgorithm.from_string` reads it) are run too, so the capture reported is the one the engine
    does under the arguments (none, where the release's start-up captures no aux states), never
    one under parity's default. Without serve arguments, the one the draft is written for
    (DFLASH for a DFlash draft, EAGLE3 otherwise)."""
    if launch is not None:
        launched = (launch.get("effective") or {}).get("speculative_algorithm")
        return launched.upper() if isinstance(launched, str) else None
    return "DFLASH" if draft_kind(draft_config) == "dflash" else "EAGLE3"


def why_dflash_default(adapter, draft_dir: str, n: int, ids) -> str:
    """Name the DFlash default SGLang fell back to (the draft has no target_layer_ids)."""
    layers = json.loads((Path(draft_dir) / "config.json").read_text()).get("num_hidden_layers")
    return (f"the DFlash draft config has no target_layer_ids (in dflash_config or at the top level), so SGLang "
            f"took its DFlash default, build_target_layer_ids({n}, {layers}) = {ids} (captured after each of those "
            "layers); other engines' defaults differ (vLLM's is its EAGLE-3 default): write the ids the draft "
            "was trained on")


@dataclass
class _Run:
    """What the steps of one extraction share: the request, the reply being written, and what
    each step found for the next (the release's adapter, the inputs as the engine sees them, the
    target as the engine builds it, the ids it read, the capture)."""

    request: dict
    reply: dict
    version: str
    adapter: Any = None
    code_paths: Any = None
    placement: Any = None
    real: dict = field(default_factory=dict)  # the target's config as given
    names: dict = field(default_factory=dict)  # the paths as the user wrote them: the engine is shown these
    draft_dir: str | None = None
    draft_config: dict = field(default_factory=dict)
    work: Path | None = None
    algorithm: str | None = None
    dflash: bool = False
    target_dir: Path | None = None
    prefix: str = ""  # a wrapper's checkpoint keeps the text model under a prefix its load_weights strips
    plan: Any = None  # the serve command's parallel layout (ranks.py), when it has several ranks
    ranked: list | None = None
    hf: Any = None  # the transformers reference model, seeded
    target_cfg: Any = None
    arch: str = "?"
    n: int = 0
    use_aux: Any = None
    ids: Any = None
    never: str | None = None
    model: Any = None
    input_ids: Any = None
    refs: dict | None = None
    aux: list = field(default_factory=list)  # what the capture held (a DFlash draft's facts read its first state)

    @property
    def findings(self) -> list:
        return self.reply["findings"]


def extract(request: dict) -> dict[str, Any]:
    """The serving contract's material, step by step: the release's family, the inputs as the
    engine is shown them, the target's config as the engine reads it, the ids its start-up reads,
    the target built and run by its own model code, the capture named, then the fix search's
    candidates and the draft as its classes build it. A step that completes the reply early (a
    refusal, a limit) raises Answered."""
    version = metadata.version("sglang")
    run = _Run(request=request, reply={**reply_header(version), "findings": []}, version=version)
    return run_steps(run, _place, _inputs, _layout, _target_config, _ids, _build_and_run, _capture,
                     _candidates_and_draft)


def _place(run: _Run) -> None:
    """The release family that runs this release, its code paths imported (a release no family
    can run, one with no EAGLE-3, or code this environment cannot import, answers here)."""
    version, reply = run.version, run.reply
    unimportable = imports_failing(lambda: adapter_for(version)[0].check_code_paths(), "sglang")
    if unimportable is not None and no_eagle3(version) is None:  # parity.extract.installed runs it elsewhere
        reply.update(CannotExtract.entry("sglang", version, unimportable, unimportable=True))
        raise Answered
    try:
        run.adapter, run.code_paths, run.placement = adapter_for(version)
        run.adapter.check_code_paths()  # its own family's too: a moved code path is never run
    except LookupError as exc:  # no family can run it, or its own family's code path moved
        lacks = no_eagle3(version)  # or the release has no EAGLE-3 at all: its own answer
        reply.update(CannotExtract.entry("sglang", version, lacks or (
            str(exc) if isinstance(exc, UnsupportedRelease) else one_line(exc)), engine_lacks=bool(lacks)))
        raise Answered
    except ImportError as exc:  # its code needs a dependency this environment lacks (or has too new)
        lacks = no_eagle3(version)
        reply.update(CannotExtract.entry("sglang", version, lacks or (
            f"its code cannot be imported here: {one_line(exc)} (imported by {importer(exc)})"),
            engine_lacks=bool(lacks), unimportable=not lacks))
        raise Answered


def _inputs(run: _Run) -> None:
    """The inputs as the engine is shown them (the user's names), the serve command's launch
    contract, the speculative algorithm it serves, and the shrunk target's config on disk."""
    request, reply, adapter = run.request, run.reply, run.adapter
    warm_model_modules()  # fresh and forked runs alike (forked: only the modules the warm-up forgot again)
    reply["code_paths"] = run.code_paths
    reply["family"] = run.placement.family
    if run.placement.note:
        reply["release_note"] = run.placement.note
    torch.manual_seed(request.get("seed", 0))
    run.real = real = request["target_config"]
    run.names = request.get("names") or {}
    if request.get("draft_dir"):
        run.draft_dir = named_path(request["draft_dir"], run.names.get("draft"), "draft")
        run.draft_config = json.loads((Path(run.draft_dir) / "config.json").read_text())
    run.work, run.target_dir = shrunk_target_dir(real, "parity-serving-")
    if request.get("serve_args") is not None:  # the launch contract, before the runtime is set up
        if not resolve_launch(adapter, request["serve_args"], real, run.draft_dir, run.work, reply, run.names):
            raise Answered
        if request.get("launch_only"):  # the serve command alone, refused before any model is built
            reply["launch_only"] = True
            raise Answered
    run.algorithm = algorithm = served_algorithm(run.draft_config, reply.get("launch")) if run.draft_dir else "EAGLE3"
    if algorithm in DFLASH_FAMILY:
        refused = adapter.dflash_refusal(run.version)
        if refused is not None:  # the release has no DFlash (its answer), or parity's adapter cannot run it
            reply.update(CannotExtract.entry("sglang", run.version, refused[0], engine_lacks=refused[1]))
            raise Answered
        run.code_paths = getattr(run.placement.module, "DFLASH_CODE_PATHS", run.code_paths)
    adapter.use_algorithm(algorithm)  # every family publishes it in the runtime's server args
    reply["code_paths"] = run.code_paths
    reply["algorithm"] = algorithm
    run.dflash = adapter.is_dflash()
    reply["draft_kind"] = "dflash" if run.dflash else "eagle3"
    run.prefix = WRAPPER_TEXT_PREFIX if is_wrapper(real) else ""


def _layout(run: _Run) -> None:
    """The capture under the serve command's parallel layout, one process per rank, forked before
    this process starts its own groups (ranks.py); the one-process run below reads the rest."""
    request, reply = run.request, run.reply
    if reply.get("launch") is not None:
        run.plan = layout_plan(run.adapter, reply, run.version)
        if run.plan is False:
            raise Answered
    if run.plan is not None and run.plan.ranks > 1:
        run.hf = seeded_hf_model(str(run.target_dir), request.get("seed", 0))
        tensors = checkpoint_tensors(run.hf, str(run.work / "weights"), run.prefix)
        captures = run.algorithm == "EAGLE3" or run.algorithm in DFLASH_FAMILY
        run.ranked = ranks.run(run.adapter, run.plan, free_port(), str(run.target_dir), run.draft_dir, tensors,
                               seeded_tokens(request, run.hf), list(request.get("candidates", [])) if captures else [])


def _target_config(run: _Run) -> None:
    """The runtime set up on a free port, and the target's config as the engine's own model
    config reads it (an architecture it, or the reference, cannot read answers here)."""
    reply, real, adapter = run.reply, run.real, run.adapter
    setup_on_a_free_port(adapter, run.draft_dir)
    run.arch = arch = (real.get("architectures") or ["?"])[0]
    try:
        run.target_cfg = adapter.model_config(str(run.target_dir))
        native_class_importable(adapter.model_class(run.target_cfg), arch)
        from transformers import AutoConfig
        AutoConfig.from_pretrained(str(run.target_dir))  # the reference must exist too
    except Exception as exc:
        reply["error"] = (f"architecture {arch} (model_type {real.get('model_type')!r}) is not supported: "
                          f"{one_line(exc)}")
        reply["unsupported"] = True
        lacking = cpu_path.requirement_not_installed(exc.__cause__ or exc, run.version,
                                                     metadata.requires("sglang") or [])
        if lacking:  # a requirement of the release parity's environment leaves out: parity's limit
            reply[HARNESS_LIMIT_KEY] = lacking
        raise Answered
    run.n = adapter.text_layers(run.target_cfg)


def _ids(run: _Run) -> None:
    """1. The ids, read by the engine's own start-up code, and where it took them from."""
    reply, adapter, n = run.reply, run.adapter, run.n
    try:
        run.use_aux, run.ids = adapter.resolve_aux_ids(run.target_cfg)
    except Exception as exc:  # the engine refuses this draft directory at start-up
        _unloadable(run, exc)
    use_aux, ids = run.use_aux, run.ids
    reply["use_aux"] = bool(use_aux)
    reply["requested_ids"] = list(ids) if isinstance(ids, (list, tuple)) else ids
    run.never = never = adapter.ids_never_read(run.version)
    written = adapter.dflash_written_ids(run.draft_dir) if run.dflash else None
    if run.dflash and written is None:
        reply["ids_source"] = f"engine default: DFlash's build_target_layer_ids({n}, draft layers)"
        reply["requested_ids"] = None  # the engine's own default, as for EAGLE-3 (the capture shows it)
        run.findings.append(finding(FindingKind.default_layers_fallback,
                                    why_dflash_default(adapter, run.draft_dir, n, ids)))
    elif not use_aux and run.algorithm != "EAGLE3":  # the engine's own start-up answer under the algorithm served
        reply["ids_source"] = (f"none: sglang {run.version}'s start-up under speculative_algorithm {run.algorithm} "
                               "reads no aux ids and captures no aux hidden states")
    elif run.dflash:
        reply["ids_source"] = "the draft's target_layer_ids (dflash_config's, else top-level; parse_dflash_draft_config)"
    elif ids is None and never:
        reply["ids_source"] = "engine default (this release never reads the draft's ids)"
        run.findings.append(finding(
            FindingKind.default_layers_fallback,
            f"SGLang never reads aux layer ids from the draft config: {never}"))
    elif ids is None:
        reply["ids_source"] = "engine default"
        run.findings.append(finding(
            FindingKind.default_layers_fallback,
            f"SGLang found no usable aux layer ids in the draft config and silently fell back to "
            f"its default layers: {why_fallback(run.draft_config)}"))
    else:
        reply["ids_source"] = "eagle_config['eagle_aux_hidden_state_layer_ids']"


def _unloadable(run: _Run, exc: Exception) -> None:
    """The start-up refused the draft directory: said, and (asked for candidates) which ids would
    work once it loads. Always completes the reply."""
    reply, request, adapter = run.reply, run.request, run.adapter
    reply["error"] = (f"sglang {run.version} cannot load the draft config "
                      f"{run.draft_dir}/config.json: {one_line(exc)}")
    reply["draft_unloadable"] = True
    written = run.draft_config.get("eagle_aux_hidden_state_layer_ids")
    reply["expected_slots"] = len(written) if isinstance(written, list) else 3
    if request.get("candidates"):  # still answer which ids would work once it loads
        try:
            model = build_target(adapter, run.target_cfg, run.real, run.version)
        except TargetUnbuildable as unbuildable:
            reply.update(error=str(unbuildable), unsupported=True)
            raise Answered
        hf = seeded_hf_model(str(run.target_dir), request.get("seed", 0))
        adapter.load_weights(model, checkpoint_tensors(hf, str(run.work / "weights"), run.prefix))
        input_ids = seeded_tokens(request, hf)
        refs = candidate_states(hf, input_ids)
        reply["candidates"] = [try_candidate(adapter, model, input_ids, refs, run.n, c)
                               for c in request["candidates"]]
    raise Answered


def _build_and_run(run: _Run) -> None:
    """2. The target built by the engine's own model code on a tiny same-depth model, loaded with
    the reference's weights, and run once without a capture. The engine's model is built first:
    its classes read the config, and a key they need that the file lacks is named in seconds,
    before the reference model is built (with transformers' defaults for every width the file
    leaves out, that can take minutes). The start-up's own refusal of the model class, if any,
    is its answer whenever parity's CPU run cannot build or run the model (a GPU builds it, then
    the start-up refuses before any forward)."""
    reply, adapter, real, arch, ids = run.reply, run.adapter, run.real, run.arch, run.ids
    refusal = (None if run.dflash or not run.use_aux
               else start_up_refusal(adapter, run.target_cfg, run.use_aux, ids, arch, run.version))
    try:
        run.model = model = build_target(adapter, run.target_cfg, real, run.version, refusal)
    except TargetUnbuildable as exc:
        reply.update(error=str(exc), unsupported=True)
        raise Answered
    except RefusedAtStartUp as exc:
        reply.update(error=str(exc), expected_slots=expected_slots(ids))
        raise Answered
    run.hf = run.hf or seeded_hf_model(str(run.target_dir), run.request.get("seed", 0))
    reply["model_class"] = f"{type(model).__module__}.{type(model).__name__}"
    adapter.load_weights(model, checkpoint_tensors(run.hf, str(run.work / "weights"), run.prefix))
    run.input_ids = seeded_tokens(run.request, run.hf)
    try:  # can the engine's own model code run this architecture here at all?
        adapter.forward(model, run.input_ids)
    except Exception as exc:
        if refusal is not None:  # the start-up refuses before any forward, on a GPU as here
            reply.update(error=refusal, expected_slots=expected_slots(ids))
            raise Answered
        # Off CUDA is where parity runs the engine, not where it serves: a model its non-CUDA path
        # cannot run is a limit of the CPU run (exit 2, "parity cannot run"), never its refusal.
        own = cpu_path.method_lacks_argument(exc)
        where = (f"its own non-CUDA code path, which parity runs, cannot run architecture {arch} (model_type "
                 f"{real.get('model_type')!r}): {own}; a GPU runs its CUDA method" if own else
                 f"its model code, run off CUDA by parity, cannot run architecture {arch} (model_type "
                 f"{real.get('model_type')!r})")
        limit = f"{where}: a plain prefill, before any capture is set, raised {one_line(exc)} (at {engine_frame(exc)})"
        # a CUDA-only path or a stand-in relied on is named as such (child.harness_limit)
        reply.update(error=f"sglang {run.version}: {limit}", **{HARNESS_LIMIT_KEY: harness_limit(exc) or limit})
        raise Answered


def _capture(run: _Run) -> None:
    """The capture configured by the engine's own hook with the ids it read, run, and each slot
    named by numerical identity (under the serve command's layout: as its last stage hands it)."""
    reply, adapter, model, findings, ids = run.reply, run.adapter, run.model, run.findings, run.ids
    try:
        adapter.configure_capture(model, run.use_aux, ids)
    except Exception as exc:
        handed = "" if run.never else ids  # a release that never reads the ids hands none
        hook = "set_dflash_layers_to_capture" if run.dflash else CAPTURE_HOOK
        findings.append(finding(FindingKind.engine_error, no_capture_hook(exc, model, run.arch, run.version) or
                                f"{hook}({handed}) raised {one_line(exc)}", "error"))
    capture = adapter.capture_indices(model)
    reply["capture_ids"] = capture
    expected = len(ids) if isinstance(ids, (list, tuple)) else len(capture or [])
    reply["expected_slots"] = expected
    run.refs = refs = candidate_states(run.hf, run.input_ids)
    slots = capture_and_identify(adapter, model, run.input_ids, refs, run.n, capture, expected, findings, run.aux)
    if run.ranked is not None:  # what the draft is fed is what the layout's last stage hands it
        under = under_layout(run.ranked, run.plan, refs, run.n, capture, expected, slots, model, run.version, reply)
        if under is None:  # parity's limit or its own fault under the layout: said in the reply
            raise Answered
        slots, findings[:] = under["slots"], [f for f in findings if f["kind"] not in LAYOUT_REPLACES] + \
            under["findings"]
        reply["capture_ids"] = under["capture"]
    _unnamed_states(run)
    reply["slots"] = slots


def _candidates_and_draft(run: _Run) -> None:
    """3. Other id lists on the same model (the gate's search for a fix), and the draft as the
    engine's draft class builds it."""
    reply, adapter, real, findings, draft_dir = run.reply, run.adapter, run.real, run.findings, run.draft_dir
    reply["target"] = {"architecture": (real.get("architectures") or ["?"])[0],
                       "model_type": real.get("model_type"), "num_hidden_layers": run.n,
                       "hidden_size": text_part(real).get("hidden_size"),
                       "vocab_size": text_part(real).get("vocab_size")}
    captures = run.use_aux or run.algorithm == "EAGLE3"  # under another algorithm no ids written change the capture
    reply["candidates"] = [try_candidate(adapter, run.model, run.input_ids, run.refs, run.n, ids)
                           for ids in run.request.get("candidates", []) if captures]
    if run.ranked is not None:  # each candidate as the layout's last stage hands it
        reply["candidates"] = candidates_under_layout(run.ranked, reply["candidates"], run.refs, run.n)
    if draft_dir and run.dflash:
        try:
            reply["dflash_draft"] = dflash_facts(adapter, draft_dir, run.aux[0] if run.aux else None, findings,
                                                 run.version)
            reply["draft"] = {"built": reply["dflash_draft"].pop("built")}  # its DFlash fields (BuiltDraft)
        except Exception as exc:
            findings.append(finding(FindingKind.draft_unloadable, f"SGLang's DFlash draft class could not be built "
                                    f"from {draft_dir}: {one_line(exc)}", "error"))
    elif draft_dir:
        try:
            reply["draft"] = draft_facts(adapter, draft_dir, run.model, findings, run.version,
                                         getattr(run.target_cfg, "context_len", None),
                                         eagle3=_is_eagle3(run.algorithm) is not False)
        except Exception as exc:
            findings.append(finding(FindingKind.draft_unloadable, f"SGLang's draft class could not be built "
                                    f"from {draft_dir}: {one_line(exc)}", "error"))


def _unnamed_states(run: _Run) -> None:
    """Captured states no reference state matches: the engine's model is another than the
    checkpoint's (its config misread: said first), or its non-CUDA forward is not the model
    (parity's limit)."""
    findings, reply, model = run.findings, run.reply, run.model
    if not any(f["kind"] == FindingKind.unidentified_state for f in findings):
        return
    misread = rope_base.misread(model, run.hf.config, run.arch, run.version)
    if misread:  # the engine's own model is another than the checkpoint's: said first, its states stay unnamed
        first = next(i for i, f in enumerate(findings) if f["kind"] == FindingKind.unidentified_state)
        findings.insert(first, finding(FindingKind.target_config_misread, misread, "error"))
        return
    unread = cpu_path.unread_parameters(lambda: run.adapter.forward(model, run.input_ids), model)
    if unread:  # its non-CUDA forward is not the model a GPU serves: parity's CPU run cannot check it
        reply[HARNESS_LIMIT_KEY] = (
            f"its own non-CUDA forward of {run.arch}, which parity runs, is not the model: it never reads the loaded "
            f"{', '.join(unread)} (zeroing them changes none of its outputs), so the states it computes off "
            "CUDA match no state of the model; a GPU runs its CUDA kernels")


# The findings of the one-process capture that the capture under a layout replaces.
LAYOUT_REPLACES = (FindingKind.engine_error, FindingKind.not_captured, FindingKind.unidentified_state)


def layout_plan(adapter, reply: dict, version: str):
    """The ranks to run the capture on for the serve command's parallel layout (layout.plan), None
    for one rank; False (the reply then carries the limit: exit 2, naming what is not run) where
    parity does not run it: a degree its multi-process capture does not run, or a family whose
    adapter runs one process only. The layout's record says what stood for what, and what was
    not run."""
    said = reply["launch"]["layout"]
    words = ", ".join(f"{f} {v}" for f, v in said["fields"].items()
                      if isinstance(v, (int, bool)) and (v is True or (v is not False and v > 1)))
    try:
        names = {**launch.LAYOUT_WORDS, **({} if "attn_dp_size" in said["fields"] else
                                          {"attention_dp": "dp_size with enable_dp_attention"})}
        plan = layout.plan(said, names, launch.unrun_degrees(said["fields"]))
    except layout.NotRunnable as exc:
        reply["error"] = reply[HARNESS_LIMIT_KEY] = f"under the serve command's parallel layout ({words}), {exc}"
        return False
    if plan is not None and plan.ranks > 1 and not adapter.runs_ranks():
        reply["error"] = reply[HARNESS_LIMIT_KEY] = (
            f"under the serve command's parallel layout ({words}), parity's sglang {adapter.family}-family adapter "
            f"runs the capture in one process only (its multi-process capture runs with the "
            f"{', '.join(adapter.RANK_FAMILIES)} family), so the states the draft is fed under it are not known")
        return False
    if plan is not None:
        said["not_run"] = list(plan.not_run)
        if plan.ranks > 1:
            said["run"] = {"ranks": plan.ranks, "tp": plan.tp, "pp": plan.pp, "stands_for": list(plan.stands_for)}
    return plan


def under_layout(ranked: list[dict], plan, refs, n: int, capture, expected: int, one_process: list[dict], model,
                 version: str, reply: dict) -> dict | None:
    """The served run under the layout: the slots the last stage hands the draft, named
    numerically; each stage's layers and capture; and, for each slot the draft asks for whose
    layer sits on an earlier stage and does not reach it, a finding naming that stage and the
    slot it loses. None when the capture under the layout could not be run (a rank lost, parity's
    limit or its own fault: the reply says why)."""
    # each rank's record: its result, or, for a rank stopped because a peer stopped, what it kept
    records = layout.records(ranked)
    stop = layout.parity_stop(records, ranked, "sglang", version)
    if stop is not None:  # parity's limit or its own fault, met on a rank, or a rank lost
        reply.update(stop)
        return None
    findings: list[dict] = []
    fatal = next((r["fatal"] for r in records if r.get("fatal")), None)
    if fatal is not None:  # the engine's own code refused this rank's part (its set-up or build)
        findings.append(finding(FindingKind.engine_error, f"under the parallel layout, sglang {version} stopped building a rank: "
                                f"{fatal['line']}", "error"))
        return {"slots": [{"tap": None}] * expected, "findings": findings, "capture": None}
    stopped = next((r for r in records if r.get("stopped")), None)  # a stage's forward raised: the rest waited
    stages = {}
    for record in records:  # one entry per stage, from its first tensor rank, as served
        if record.get("runs"):
            stages.setdefault(record["runs"][0]["stage"]["pp_rank"], record["runs"][0]["stage"])
    reply["launch"]["layout"]["run"]["stages"] = [
        {"stage": s, "layers": stages[s]["layers"], "capture": stages[s]["capture"]} for s in sorted(stages)]
    if stopped is not None and len(stopped["runs"]) == 1:  # the served run itself: no later stage ran it
        stage = stopped["runs"][0]["stage"]
        findings.append(finding(FindingKind.engine_error, f"under the parallel layout, pipeline stage {stage['pp_rank']} of "
                                f"{plan.pp} (layers {stage['layers'][0]}-{stage['layers'][1] - 1}, tensor rank "
                                f"{stage['tp_rank']}): sglang {version}'s forward raised "
                                f"{stopped['runs'][0]['forward_error']['line']}, so no later stage runs", "error"))
        return {"slots": [{"tap": None}] * expected, "findings": findings, "capture": None}
    if any(not r.get("runs") for r in records):  # a rank never ran the served capture: nothing to read
        rank = next(i for i, r in enumerate(records) if not r.get("runs"))
        reply["error"] = reply[HARNESS_LIMIT_KEY] = (f"parity's multi-process capture lost rank {rank} of {plan.ranks}: "
                                                     f"{ranked[rank].get('lost') or ranked[rank].get('error')}")
        return None
    served = [r["runs"][0] for r in records]
    hook = f"{type(model).__module__}.{type(model).__qualname__}.{CAPTURE_HOOK}"
    for rank, run in enumerate(served):
        if run.get("configure_error"):
            findings.append(finding(FindingKind.engine_error, f"under the parallel layout, on rank {rank}, {hook} "
                                    f"raised {run['configure_error']['line']}", "error"))
    last = next(run for run in served if run["stage"]["is_last"] and run["stage"]["tp_rank"] == 0)
    raised = next((run for run in served if run.get("forward_error")), None)  # on the last stage
    if raised is not None:
        stage = raised["stage"]
        findings.append(finding(FindingKind.engine_error, f"under the parallel layout, pipeline stage {stage['pp_rank']} of "
                                f"{plan.pp} (layers {stage['layers'][0]}-{stage['layers'][1] - 1}, tensor rank "
                                f"{stage['tp_rank']}): sglang {version}'s forward raised "
                                f"{raised['forward_error']['line']}", "error"))
        return {"slots": [{"tap": None}] * expected, "findings": findings, "capture": last["stage"]["capture"]}
    slots = identify_slots(last.get("aux"), refs, n, last["stage"]["capture"], expected, findings)
    findings += stage_losses(stages, plan, capture, one_process, slots, hook, version)
    return {"slots": slots, "findings": findings, "capture": last["stage"]["capture"]}


def stage_losses(stages: dict, plan, capture, one_process: list[dict], slots: list[dict], hook: str,
                 version: str) -> list[dict]:
    """For each slot the draft asks for (the one-process capture's index and the state it names)
    that the layout's last stage does not hand the draft: the stage holding that layer (the
    engine's partition), and whether that stage's model captures it at all."""
    out = []
    handed = {s.get("tap") for s in slots if s.get("tap")}
    last = max(stages)
    for slot, index in enumerate(capture or []):
        state = one_process[slot].get("tap") if slot < len(one_process) else None
        if state is None or state in handed:
            continue
        holder = next((s for s, st in stages.items() if st["layers"][0] <= index < st["layers"][1]), None)
        if holder is None or holder == last:
            continue
        st = stages[holder]
        captured = index in (st["capture"] or [])
        how = ("its model captures it, but only the last stage's states are handed to the draft (none is carried "
               "over from an earlier stage)" if captured else
               f"its model captures nothing there (its capture list is {st['capture'] or []} after {hook} ran on "
               "that rank)")
        out.append(finding(FindingKind.stage_not_captured, f"slot {slot} ({state}, captured at layer index {index}) is on "
                           f"pipeline stage {holder} of {plan.pp} (layers {st['layers'][0]}-{st['layers'][1] - 1}) under "
                           f"sglang {version}'s partition: {how}; slot {slot} is lost, and the draft is handed "
                           f"{len(handed)} states where its fc reads {len(capture)}", "error", slot=slot))
    return out


def candidates_under_layout(ranked: list[dict], one_process: list[dict], refs, n: int) -> list[dict]:
    """Each candidate id list as the layout's last stage hands it (the fix search's, under the
    serve command's layout)."""
    out = []
    for before, (last, errors) in zip(one_process, layout.candidate_runs(ranked, len(one_process))):
        if last is None or errors:
            out.append({"ids": before["ids"], "fc_input": None, "error": "; ".join(errors) or
                        "not run: a stage's forward raised on an earlier id list, and the stages after it stopped"})
            continue
        found: list[dict] = []
        slots = identify_slots(last.get("aux"), refs, n, last["stage"]["capture"], len(before["ids"]), found)
        out.append({"ids": before["ids"], "fc_input": [s.get("tap") for s in slots],
                    "capture_ids": last["stage"]["capture"],
                    "error": "; ".join(f["message"] for f in found if f["severity"] == "error") or None})
    return out


def expected_slots(ids) -> int | None:
    """The slots the draft asks for: its ids' count, None when the engine reads none."""
    return len(ids) if isinstance(ids, (list, tuple)) else None


def capture_and_identify(adapter, model, input_ids, refs, n, capture, expected, findings,
                         keep: list | None = None) -> list[dict]:
    """One real forward; name each H-wide slice of the captured concatenation (appended to
    `keep` when given: what the draft's fc is handed)."""
    aux = None
    try:
        aux = adapter.forward(model, input_ids).hidden_states
        if keep is not None and aux is not None:
            keep.append(aux)
    except Exception as exc:
        note(exc)
        findings.append(finding(FindingKind.engine_error, f"the engine's forward raised {type(exc).__name__}: "
                                f"{exc}", "error"))
    return identify_slots(aux, refs, n, capture, expected, findings)


def try_candidate(adapter, model, input_ids, refs, n, ids: list[int]) -> dict:
    """What the engine would feed with `ids` written in the draft config."""
    found: list[dict] = []
    try:
        adapter.configure_capture(model, True, ids)
    except Exception as exc:
        return {"ids": ids, "fc_input": None, "error": f"{one_line(exc)}"}
    capture = adapter.capture_indices(model)
    slots = capture_and_identify(adapter, model, input_ids, refs, n, capture, len(ids), found)
    errors = [f["message"] for f in found if f["severity"] == "error"]
    return {"ids": ids, "fc_input": [s.get("tap") for s in slots], "capture_ids": capture,
            "error": "; ".join(errors) or None}


def main() -> None:
    reply_over_stdio(SGLangReply.checked(with_limits(extract, "sglang")))


if __name__ == "__main__":
    raise SystemExit(main())
