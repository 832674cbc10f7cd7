"""What a forward-parity run compares: cases (a trained draft + its served form), fixtures, drifts.

A `Case` names the two artifacts of one deployment: the speculators-format draft as
trained (with the dump layout its training data had) and the SGLang-format directory as
served. Fixtures build both from seeds (`parity.fixtures.speculators_draft`, the served
form by the engine's `served_config` with ids solved on the engine); drifts are injected
by changing only what the named drift changes, the way the public bug did it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..contract.tap import Tap
from ..extract.engines import BoundEngine, engine
from ..fixtures import DraftRecipe, speculators_draft
from ..home import shipped
from ..inputs import InputError, text_part
from .positions import PositionPlan
from ..conventions import to_taps
from ..extract.shrink import TINY

TARGETS = shipped("fixtures", "targets")

# architecture -> the bundled real config whose structure the tiny target keeps
ARCHS = {"llama": "llama-3.1-8b", "qwen3": "qwen3-8b", "deepseek-v3": "deepseek-v3-61l"}

FLAG_DRIFTS = ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")
ROPE_DRIFTS = ("rope-theta", "rope-scaling")
DRIFTS = ("born-from",) + FLAG_DRIFTS + ("no-d2t", "draft-embedding") + ROPE_DRIFTS
# Llama-3.1's rope as its published EAGLE-3 draft declares it (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B:
# 2048 positions, llama3 scaling from 8192): both bounds lie inside the target's 131072-token context
LLAMA3_ROPE = {"max_position_embeddings": 2048,
               "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                   "original_max_position_embeddings": 8192}}
EXPECTED_STAGE = {  # where each injected drift must first show (step, stage)
    "born-from": (0, "fc_input"),
    "norm_before_residual": (0, "layer_output"),
    "norm_before_fc": (0, "fc_output"),
    "fc_norm": (0, "fc_output"),
    "norm_output": (1, "fc_output"),
    "no-d2t": (0, "vocab_mapping"),
    "draft-embedding": (0, "embeddings"),
    "rope-theta": (0, "layer_output"),
    "rope-scaling": (0, "layer_output"),
}


@dataclass
class Case:
    name: str
    draft_dir: Path  # speculators format, as trained
    dump_layout: list[str]  # what the training data's hidden_states slots hold
    served_dir: Path  # SGLang format, as served (a private copy: solving may write ids into it)
    solve_taps: list[str] | None = None  # let the engine find ids that capture these
    embedding: str = "target"  # training side: 'target' (as training loads it) or 'checkpoint'
    expect: tuple[int, str] | None = None  # injected drift: where it must first show
    notes: list[str] = field(default_factory=list)
    positions: list[int] | None = None  # the draft rows' serving positions (parity.forward.positions)
    plan: "PositionPlan | None" = None  # where they come from and how they are grouped

    def training_request(self) -> dict:
        return {"name": self.name, "draft_dir": str(self.draft_dir), "dump_layout": self.dump_layout,
                "embedding": self.embedding, "positions": self.positions}

    def serving_request(self) -> dict:
        return {"name": self.name, "served_dir": str(self.served_dir), "solve_taps": self.solve_taps,
                "positions": self.positions}


# -- targets ----------------------------------------------------------------------------------


def fixture_target(name: str) -> dict:
    """A bundled target config by fixture name: 'llama-3.1-8b', or '<arch>-<N>l' for depth N."""
    if (TARGETS / name / "config.json").exists():
        return json.loads((TARGETS / name / "config.json").read_text())
    arch, _, depth = name.rpartition("-")
    if arch in ARCHS and depth.endswith("l") and depth[:-1].isdigit():
        config = json.loads((TARGETS / ARCHS[arch] / "config.json").read_text())
        config["num_hidden_layers"] = int(depth[:-1])
        return config
    known = sorted(p.name for p in TARGETS.iterdir() if (p / "config.json").exists())
    raise InputError(f"no target fixture {name!r}: use one of {known} or <arch>-<N>l with arch in "
                     f"{sorted(ARCHS)} (e.g. llama-8l)")


def default_layout(n: int) -> list[str]:
    """speculators' data-generation default: vLLM ids [2, N//2, N-3] plus the last layer."""
    return [f"h{k}" for k in (2, n // 2, n - 3, n)]


def born_from_layout(n: int) -> list[str]:
    """The born-from dump on an N-layer target: [h0, h3, h(N//2+1), h(N-2)] ([h0,h3,h31,h59] at 61)."""
    return [f"h{k}" for k in (0, 3, n // 2 + 1, n - 2)]


# -- served forms -----------------------------------------------------------------------------


def served_copy(draft_dir: Path, out: Path, *, ids: list[int] | None = None, drop: tuple[str, ...] = (),
                config_overrides: dict | None = None, layer_overrides: dict | None = None,
                serving: BoundEngine | None = None) -> Path:
    """The form of a speculators draft the engine `serving` (default: the default engine) loads: parity.export's config, tensors as
    trained (a case with solve_taps gets export's tensor renames and zero biases on the
    engine's side, where its release is installed: parity/checkpoint.py). `layer_overrides`
    change the decoder layer's keys where the served form keeps them: its
    transformer_layer_config (vLLM serves the speculators format) or its top level (SGLang's)."""
    spec = json.loads((Path(draft_dir) / "config.json").read_text())
    config = (serving or engine()).served_config(
        spec, ids if ids is not None else list(spec.get("eagle_aux_hidden_state_layer_ids") or []))
    config.update(config_overrides or {})
    layer = config.get("transformer_layer_config")
    (layer if isinstance(layer, dict) else config).update(layer_overrides or {})
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for f in Path(draft_dir).glob("*.safetensors"):
        if drop:
            from safetensors.torch import load_file, save_file

            tensors = {k: v for k, v in load_file(str(f)).items() if k.split(".")[-1] not in drop}
            save_file(tensors, str(out / f.name))
        else:
            shutil.copy2(f, out / f.name)
    return out


def copy_served(served: Path, out: Path) -> Path:
    """A private copy of a served directory as given (ids exactly as written)."""
    shutil.copytree(served, out)
    return out


# -- fixture cases ----------------------------------------------------------------------------


def fixture_cases(target: dict, drifts: tuple[str, ...] = (), *, matched: bool = True,
                  flags_on: bool = False, rope: bool = False, work: Path | None = None,
                  serving: BoundEngine | None = None) -> list[Case]:
    """Cases on a tiny seeded draft for `target`: the matched pair, then each named drift
    (`rope`: also the matched pair of a draft with Llama-3.1's rope, LLAMA3_ROPE)."""

    n = int(text_part(target)["num_hidden_layers"])
    work = Path(work or tempfile.mkdtemp(prefix="parity-forward-cases-"))
    layout = default_layout(n)
    fc_taps = layout[:-1]
    # a draft vocabulary that is a multiple of 64, as real ones are (32000): SGLang pads its
    # lm_head to one, and releases before 0.5.7 return the padding rows as logits too
    base = DraftRecipe(ids=(2, n // 2, n - 3), hidden_size=64, target_vocab=256, draft_vocab=64)
    cases: list[Case] = []

    def case(name: str, recipe: DraftRecipe, *, layout=layout, solve=fc_taps, **kw) -> Case:
        draft = speculators_draft(recipe)
        served_kw = {k: kw.pop(k) for k in ("drop", "config_overrides", "layer_overrides") if k in kw}
        served = served_copy(draft, work / name, serving=serving, **served_kw)
        return Case(name=name, draft_dir=draft, dump_layout=list(layout), served_dir=served,
                    solve_taps=list(solve), **kw)

    if matched:
        cases.append(case("matched", base))
    if flags_on:  # every flag SGLang honours, on in both worlds (norm_before_fc and fc_norm
        # are mutually exclusive in speculators, so two drafts)
        cases.append(case("matched-fc_norm-norm_output", replace(base, fc_norm=True, norm_output=True)))
        cases.append(case("matched-norm_before_fc", replace(base, norm_before_fc=True)))
    if rope:  # trained and served with Llama-3.1's rope: every position group within tolerance
        cases.append(case("matched-llama3-rope", replace(base, layer=LLAMA3_ROPE)))
    for drift in drifts:
        if drift == "born-from":
            bl = born_from_layout(n)
            cases.append(case(drift, base, layout=bl, solve=bl[1:], expect=EXPECTED_STAGE[drift],
                              notes=[f"training fc = {bl[:-1]} of the dump {bl}; the served ids "
                                     f"capture {bl[1:]}"]))
        elif drift in FLAG_DRIFTS:
            # trained with the flag; the served config drops it (SGLang never reads
            # norm_before_residual at all, so nothing can carry that one)
            overrides = {} if drift == "norm_before_residual" else {drift: False}
            cases.append(case(drift, replace(base, **{drift: True}), config_overrides=overrides,
                              expect=EXPECTED_STAGE[drift],
                              notes=[f"trained with {drift}=True; served config without it"]))
        elif drift == "no-d2t":
            cases.append(case(drift, base, drop=("d2t", "t2d"), expect=EXPECTED_STAGE[drift],
                              notes=["trained with a 64-token draft vocabulary and d2t; the served "
                                     "checkpoint has no d2t/t2d"]))
        elif drift == "draft-embedding":
            # seed 1: the seed-0 draft's embedding happens to equal the seed-0 target's
            cases.append(case(drift, replace(base, seed=1), embedding="checkpoint",
                              expect=EXPECTED_STAGE[drift],
                              notes=["training keeps the checkpoint's own embed_tokens; SGLang binds "
                                     "the target's"]))
        elif drift == "rope-theta":
            # trained with rope base 10000; the served config says 500000 (both keys it may be read from)
            served_rope = {"rope_type": "default", "rope_theta": 500000.0}
            cases.append(case(drift, base, layer_overrides={"rope_theta": 500000.0, "rope_parameters": served_rope},
                              expect=EXPECTED_STAGE[drift],
                              notes=["trained with rope_theta 10000; served config with rope_theta 500000"]))
        elif drift == "rope-scaling":
            # trained with llama3 scaling; the served config keeps the base and drops the scaling.
            # Only wavelengths above 8192/4 change: they barely turn within 16 positions
            served_rope = {"rope_type": "default", "rope_theta": 500000.0}
            cases.append(case(drift, replace(base, layer=LLAMA3_ROPE), expect=EXPECTED_STAGE[drift],
                              layer_overrides={"rope_parameters": served_rope, "rope_theta": 500000.0},
                              notes=["trained with Llama-3.1's llama3 rope scaling (factor 8 from 8192); "
                                     "served config without the scaling, same base"]))
        else:
            raise InputError(f"unknown drift {drift!r}; known: {', '.join(DRIFTS)}")
    return cases


def given_case(draft_dir: Path, dump_layout: list[str] | None, served_dir: Path | None, n: int,
               work: Path, serving: BoundEngine | None = None) -> Case:
    """A user's draft: its served directory as written, or (none given) its exported form."""
    draft_dir = Path(draft_dir)
    if not (draft_dir / "config.json").exists():
        raise InputError(f"draft {draft_dir}: no config.json")
    spec = json.loads((draft_dir / "config.json").read_text())
    if "transformer_layer_config" not in spec:
        raise InputError(f"draft {draft_dir}: not a speculators-format draft (forward parity runs the "
                         "trained draft through speculators; pass the served form with --served)")
    if not list(draft_dir.glob("*.safetensors")):
        raise InputError(f"draft {draft_dir}: no *.safetensors weights (forward parity runs the model)")
    layer = spec["transformer_layer_config"]
    widths = (layer.get("hidden_size"), layer.get("vocab_size"))
    if widths != (TINY["hidden_size"], TINY["vocab_size"]):
        raise InputError(f"draft {draft_dir}: hidden_size/vocab_size {widths}, but forward parity runs on "
                         f"the CPU against the target shrunk to ({TINY['hidden_size']}, "
                         f"{TINY['vocab_size']}) with seeded weights; a full-size draft needs its real "
                         "target's weights (not supported here; `parity check` covers its wiring)")
    if dump_layout is None:
        ids = spec.get("eagle_aux_hidden_state_layer_ids")
        dump_layout = [t.name for t in to_taps("speculators-datagen", ids, n)]
    for t in dump_layout:
        if not Tap.parse(t).in_range(n):
            raise InputError(f"dump layout names {t}, beyond the target's {n} layers")
    if served_dir is not None:
        if not (Path(served_dir) / "config.json").exists():
            raise InputError(f"served draft {served_dir}: no config.json")
        served = copy_served(Path(served_dir), work / "served")
        return Case(name=draft_dir.name, draft_dir=draft_dir, dump_layout=dump_layout,
                    served_dir=served, notes=[f"served form: {served_dir} (ids as written)"])
    serving = serving or engine()
    served = served_copy(draft_dir, work / "served", serving=serving)
    return Case(name=draft_dir.name, draft_dir=draft_dir, dump_layout=dump_layout, served_dir=served,
                solve_taps=dump_layout[:-1],
                notes=[f"served form: parity's {serving.name} export of the draft, ids found on the engine"])


def seeded_tokens(vocab: int, length: int, seed: int) -> list[int]:
    import torch

    gen = torch.Generator().manual_seed(seed + 1)
    return torch.randint(0, vocab, (length,), generator=gen).tolist()
