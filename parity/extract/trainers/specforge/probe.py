"""Run the installed SpecForge's own data path on a tiny seeded target; print what it trains on.

    python -m parity.extract.trainers.specforge.probe  < request.json

Runs in the environment of the SpecForge release (which pins its SGLang release). The
request is {"target_config": {...}, "draft_config": "PATH/config.json" | null,
"run_ids": [..] | null, "seq_len": 8, "seed": 0}. The steps, each SpecForge's own code
(families/): resolve the ids and capture method; build the target with the installed
SGLang (parity's SGLang harness: the same adapter, weights and forward the serving
extraction uses); let SpecForge set the capture layers and wrap the logits processor; one
EXTEND forward; SpecForge's normaliser turns the stored features into the training sample;
every H-wide slice of its fc input and its loss target is named by numerical identity
against transformers; SpecForge's TargetHead on the target is compared with the reference
model's logits (does training apply a norm of its own?), and its `preprocess` is run on
position markers to read the alignment.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from .families import family_for
from ...families import family_name
from .reply import SpecForgeReply
from ... import standins
from ...child import Answered, finding, imports_failing, one_line, run_steps, with_limits
from ...config_reads import read_fields, recording, replaced
from ...identify import identify_slots, named_target
from ...engines.sglang.runtime import adapter_for, setup_on_a_free_port
from ...reference import WRAPPER_TEXT_PREFIX, candidate_states, checkpoint_tensors, seeded_hf_model, seeded_tokens
from ...shrink import shrink_draft_config, shrunk_target_dir
from ....contract.models import FindingKind
from ....contract.reply import reply_header
from ....envs import reply_over_stdio
from ....errors import CannotExtract
from ....inputs import is_wrapper

DEFAULT_DRAFT = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama"}  # no ids: SpecForge decides


def warm() -> None:
    """The import-only first steps of `extract`, before any request (parity.forkserver): the
    family, SGLang's placement with its stand-ins and code paths, then SpecForge's modules
    (after the stand-ins, as in a run). Nothing is set up or computed."""
    import importlib

    try:
        family = family_for(metadata.version("specforge"))
        adapter_for(metadata.version("sglang"))[0].check_code_paths()
    except LookupError:
        return  # the run itself reports it
    for name in family.IMPORTS:
        importlib.import_module(name)


@dataclass
class _Run:
    """What the steps of one extraction share: the request, the reply being written, and what
    each step found for the next."""

    request: dict
    reply: dict
    version: str
    sglang_version: str
    family: Any = None
    adapter: Any = None
    placement: Any = None
    sglang_paths: dict = field(default_factory=dict)
    work: Path | None = None
    target_dir: Path | None = None
    draft_config: Any = None  # the served draft's config (a dict), or the path of SpecForge's default
    method: Any = None
    ids: Any = None
    features: dict = field(default_factory=dict)
    hf: Any = None  # the transformers reference model, seeded
    input_ids: Any = None
    target: Any = None  # the training sample's loss target

    @property
    def findings(self) -> list:
        return self.reply["findings"]


def extract(request: dict) -> dict[str, Any]:
    """The training contract's material, step by step: the release's family and the SGLang it
    pins, the inputs, the ids by SpecForge's own resolution (and the trained depth), the capture
    by the pinned SGLang set by SpecForge, its normaliser's sample named, the loss target's head
    and alignment. A step that completes the reply early raises Answered."""
    version = metadata.version("specforge")
    try:
        sglang_version = metadata.version("sglang")
    except metadata.PackageNotFoundError:  # SpecForge runs its own SGLang: not here
        return {**reply_header(version), **CannotExtract.entry(
            "specforge", version, "its code cannot be imported here: the SGLang it runs is not installed",
            unimportable=True)}
    run = _Run(request=request, reply={**reply_header(version, engine_release=sglang_version), "findings": []},
               version=version, sglang_version=sglang_version)
    return run_steps(run, _place, _inputs, _ids, _depth, _capture, _target_head)


def _place(run: _Run) -> None:
    """The release's family and the placement of the SGLang it pins, their imports checked here."""
    import importlib

    version, reply = run.version, run.reply

    def imports() -> None:
        adapter_for(run.sglang_version)[0].check_code_paths()
        for name in family_for(version).IMPORTS:
            importlib.import_module(name)

    unimportable = imports_failing(imports, "specforge", "sglang")
    if unimportable is not None:  # this interpreter cannot run it (parity.extract.installed)
        reply.update(CannotExtract.entry("specforge", version, unimportable, unimportable=True))
        raise Answered
    try:
        run.family = family_for(version)
        run.adapter, run.sglang_paths, run.placement = adapter_for(run.sglang_version)
        run.adapter.check_code_paths()  # a moved code path of the capture is never run
    except LookupError as exc:
        reply.update(CannotExtract.entry("specforge", version, f"(sglang {run.sglang_version}) {exc}"))
        raise Answered


def _inputs(run: _Run) -> None:
    """The shrunk target's config, the draft's (SpecForge's default when none is given), SGLang's
    process set-up, and the draft as this release builds it."""
    request, reply, family = run.request, run.reply, run.family
    reply["family"] = family_name(family)
    reply["code_paths"] = {**family.CODE_PATHS, "sglang_capture": run.sglang_paths["capture"]}
    if run.placement.note:  # the pinned SGLang is not one parity verified: say so
        reply["findings"].append({"kind": FindingKind.release_note.value, "severity": "info",
                                  "message": run.placement.note})
    torch.manual_seed(request.get("seed", 0))
    real = request["target_config"]
    run.work, run.target_dir = shrunk_target_dir(real, "parity-specforge-")
    run.draft_config = request.get("draft_config")
    if run.draft_config is None:
        run.draft_config = str(run.work / "draft.json")
        Path(run.draft_config).write_text(json.dumps(DEFAULT_DRAFT))
    # SGLang's process set-up first: its stand-ins must be in place before SpecForge's config
    # reading imports transformers (which decides once whether torchvision exists).
    standins.install()
    setup_on_a_free_port(run.adapter, None)
    if request.get("built") and request.get("draft_config"):  # the draft as this release builds it
        try:
            reply["built"] = built_draft(family, request["draft_config"], real, run.work, run.version,
                                         request["built"].get("from", "the served config.json"))
        except Exception as exc:  # noqa: BLE001 - a finding: this side's built draft is not compared
            reply["built_error"] = one_line(exc)


def _ids(run: _Run) -> None:
    """1. The ids, by SpecForge's own resolution."""
    try:
        run.method, run.ids, run.features = run.family.resolve_ids(run.request.get("run_ids"), run.draft_config,
                                                                   str(run.target_dir))
    except ValueError as exc:
        run.reply["error"] = f"specforge {run.version} refuses this run: {one_line(exc)}"
        run.reply["refused"] = True
        raise Answered
    run.reply.update(capture_method=run.method, ids=run.ids, features=run.features)


def _depth(run: _Run) -> None:
    """The depth the run recorded (--trained), else the one training unrolls the draft to
    (parity.contract.TrainedDepth); never a default standing for it."""
    request, reply, family, version = run.request, run.reply, run.family, run.version
    if request.get("trained_run"):
        try:
            depth = recorded_depth(family, request["trained_run"], version)
        except Exception as exc:  # noqa: BLE001 - its own reader refuses the path: bad input, in its words
            reply["error"] = (f"--trained {request['trained_run']['given']}: its {family.READER} "
                              f"reads no training checkpoint there: {one_line(exc)}")
            reply["refused"] = True
            raise Answered
        if isinstance(depth, dict):
            reply["trained_depth"] = depth
        else:  # no reader, or no depth recorded: said, never a default standing for it
            run.findings.append(finding(FindingKind.depth_unread, depth))
    elif request.get("draft_config"):
        try:
            reply["trained_depth"] = family.ttt_length(run.draft_config, str(run.target_dir))
        except Exception as exc:  # noqa: BLE001 - a finding: the served steps are not compared with it
            run.findings.append(finding(FindingKind.depth_unread, f"specforge {version} did not read the draft's "
                                        f"trained depth: {one_line(exc)}; the served steps are not compared with it"))


def _capture(run: _Run) -> None:
    """2-4. The target built and run by the pinned SGLang with the capture SpecForge sets; its
    normaliser turning the stored features into the training sample; every state of the sample
    named against transformers."""
    request, reply, family, adapter = run.request, run.reply, run.family, run.adapter
    target_cfg = adapter.model_config(str(run.target_dir))
    n = adapter.text_layers(target_cfg)
    run.hf = hf = seeded_hf_model(str(run.target_dir), request.get("seed", 0))
    model = adapter.build_target(target_cfg)
    prefix = WRAPPER_TEXT_PREFIX if is_wrapper(request["target_config"]) else ""
    adapter.load_weights(model, checkpoint_tensors(hf, str(run.work / "weights"), prefix))
    family.wrap_logits(model)
    family.set_capture(model, run.method, run.ids)
    reply["capture_ids"] = adapter.capture_indices(model)
    run.input_ids = input_ids = seeded_tokens(request, hf)
    aux, last = family.captured(adapter.forward(model, input_ids))
    if aux is None or last is None:
        reply["error"] = f"sglang {run.sglang_version} returned no aux or last hidden states to SpecForge's capture"
        raise Answered
    t = input_ids.shape[0]
    raw = {run.features["aux"]: aux[None], run.features["last"]: last[None], "input_ids": input_ids,
           "loss_mask": torch.ones(t, dtype=torch.long)}
    sample = family.normalize(raw, max_len=t)
    fc, run.target = sample["hidden_state"][0].float(), sample["target"][0].float()
    refs = candidate_states(hf, input_ids)
    reply["fc"] = identify_slots(fc, refs, n, reply["capture_ids"], len(run.ids), run.findings)
    reply["target"] = named_target(run.target, refs, run.findings)


def _target_head(run: _Run) -> None:
    """5. The loss target's head: SpecForge's TargetHead on the target vs the reference logits;
    6. the alignment: TargetHead.preprocess on position markers."""
    reply, hf, input_ids = run.reply, run.hf, run.input_ids
    with torch.no_grad():
        logits_ref = hf(input_ids[None]).logits[0].float()
        head = run.family.target_head(str(run.target_dir), hf.get_output_embeddings().weight)
        logits = head(run.target[None].to(head.fc.weight.dtype))[0].float()
    err = float((logits - logits_ref).norm() / logits_ref.norm())
    reply["target_head_rel_err"] = err
    reply["target_normed_by_trainer"] = False if err < 1e-3 else None
    reply["target_norm_evidence"] = (f"SpecForge's TargetHead on the loss target gives the target model's "
                                     f"own logits (relative error {err:.1e}): no norm is applied in training")
    t = input_ids.shape[0]
    marks = torch.arange(t, dtype=torch.float32).view(1, t, 1)
    _, shifted, _ = head.preprocess(input_ids[None], marks, torch.ones(1, t))
    reply["alignment"] = ("TargetHead.preprocess: target at position t = state at t+"
                          f"{int(shifted[0, 0, 0] - marks[0, 0, 0])} (last position zero-padded)")


def recorded_depth(family, trained_run: dict, version: str) -> dict[str, Any] | str:
    """{TrainedDepth fields} for the ttt length SpecForge's training checkpoint records, as the
    release's own reader gives it; else why not, in words (no reader in this release, or a
    checkpoint that records no depth): the served depth is then not checked."""
    given = trained_run["given"]
    unchecked = "the served depth is not checked against the trained one"
    try:
        value, where = family.recorded_ttt_length(trained_run["path"])
    except LookupError as exc:
        return f"specforge {version} cannot read the training checkpoint --trained {given}: {exc}; {unchecked}"
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return (f"the SpecForge training checkpoint --trained {given} ({where}) records no {family.TTT_KEY} "
                f"(read by specforge {version}'s {family.READER}: {value!r}); {unchecked}")
    return {"steps": value, "recorded": True,
            "source": f"{family.TTT_KEY} of the SpecForge training checkpoint {given} ({where}), read by "
                      f"specforge {version}'s {family.READER} (its exporter drops it)"}


def built_draft(family, draft_config_path: str, target: dict, work: Path, version: str, source: str) -> dict:
    """{BuiltDraft fields}: sizes from SpecForge's own resolution of the real draft config; rope,
    eps, activation and the head's tie off the draft class it builds from a shrunk copy of that
    config (the same shrink the other sides' builds use), against the target given; the config
    keys its `resolve_draft_config` and draft class read while building it (parity.extract.config_reads)."""
    from ...built import dtype_name, every_token, hf_sizes, module_facts, training_only_keys

    real_target = work / "built-target"
    real_target.mkdir()
    (real_target / "config.json").write_text(json.dumps(target))
    cfg, config = family.draft_config(draft_config_path, str(real_target))
    built = hf_sizes(config)
    built["dtype"] = dtype_name(family.train_dtype(cfg))
    tiny_path = work / "built-draft.json"
    tiny_path.write_text(json.dumps(shrink_draft_config(json.loads(Path(draft_config_path).read_text()))))
    with recording(set()) as reads:  # every config key its resolution and draft class read (BuiltDraft)
        tiny_cfg, tiny_config = family.draft_config(str(tiny_path), str(real_target))
        model = family.build_draft(tiny_cfg, tiny_config)
    # a key its resolution sets itself (tie_word_embeddings) never reached the draft as written
    built.update(read_fields(tiny_config, json.loads(Path(draft_config_path).read_text()), reads,
                             overridden=replaced(tiny_config, json.loads(tiny_path.read_text()))))
    # of the keys it read off their default, those the draft it builds computes the same without
    written = json.loads(Path(draft_config_path).read_text())
    tiny = json.loads(tiny_path.read_text())
    keys_path = work / "built-draft-keys.json"

    def build(config: dict):
        keys_path.write_text(json.dumps(config))
        return family.build_draft(*family.draft_config(str(keys_path), str(real_target)), family.FORWARD_BACKEND)

    def run(draft, gen, positions: int):
        ids = every_token(draft.embed_tokens.num_embeddings, positions, gen)
        return family.draft_forward(draft, torch.randn(1, positions, draft.fc.in_features, generator=gen), ids)

    off_default = [k for k in built["config_keys_read"] if k not in (built["config_keys_default"] or ())]
    vocab = getattr(getattr(model, "embed_tokens", None), "num_embeddings", None)
    if vocab:  # an EAGLE-3 draft: its own token embedding and fc (else nothing is decided)
        built["config_keys_training_only"] = training_only_keys(build, run, written, tiny, off_default, vocab)
    built.update(module_facts(model, getattr(model, "embed_tokens", None), getattr(model, "lm_head", None)))
    # its decoder layers, counted on the built class (0.2.0's Llama EAGLE-3 draft builds one, `midlayer`,
    # whatever num_hidden_layers says); how later ones are fed is read only where there are none
    layers = getattr(model, "layers", None)
    built["layers_built"] = len(layers) if layers is not None else int(getattr(model, "midlayer", None) is not None)
    if built["layers_built"] == 1:
        built["later_layer_input_norms"] = ()
    built["built_by"] = f"specforge {version} {type(model).__name__}"
    built["config_from"] = f"{source} (its resolve_draft_config)"
    return built


def main() -> None:
    reply_over_stdio(SpecForgeReply.checked(with_limits(extract, "specforge")))


if __name__ == "__main__":
    raise SystemExit(main())
