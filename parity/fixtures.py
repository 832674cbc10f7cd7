"""Deterministic tiny checkpoints, built from seeds by the installed speculators.

`speculators_draft(...)` writes an EAGLE-3 draft exactly as speculators saves one
(`Eagle3DraftModel.save_pretrained`: config.json with `speculators_model_type`,
`transformer_layer_config`, ids and flags; model.safetensors with d2t/t2d), with seeded
weights. Outputs are cached under `$PARITY_HOME/cache/fixtures/draft-<hash of the recipe>-<hash
of the builder>` (parity.home). The builder is the installed code the build ran: every file
its modules (speculators, transformers, safetensors, torch) were loaded from, shared libraries
included, recorded with its stat and sha256 (`parity-builder.json`, parity.reads). A cached
copy is used only while every one of those files is as it was (its stat, else its contents:
checked without importing anything) and every file of the copy still has the sha256 recorded
at build time; else the draft is built again, so a patched site-packages file, like another
release, builds another fixture. Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import reads
from .home import cache_dir


@dataclass(frozen=True)
class DraftRecipe:
    """Everything that determines a tiny speculators draft."""

    ids: tuple[int, ...] = (2, 16, 29)
    hidden_size: int = 64
    target_vocab: int = 256
    draft_vocab: int = 32
    norm_before_fc: bool = False
    fc_norm: bool = False
    norm_output: bool = False
    norm_before_residual: bool = False
    with_d2t: bool = True
    seed: int = 0
    extra: dict = field(default_factory=dict, hash=False)
    layer: dict = field(default_factory=dict, hash=False)  # transformer_layer_config keys (e.g. rope, num_hidden_layers)

    def key(self) -> str:
        fields = asdict(self)
        if not fields["layer"]:  # recipes without layer keys keep the keys they had before the field
            del fields["layer"]
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


BUILDER_PACKAGES = ("speculators", "transformers", "safetensors", "torch")
BUILDER = "parity-builder.json"  # what the build ran: {"files": {path: state + [sha256]}, "dirs": {}}


def builder_record() -> dict:
    """The installed code a build in this process ran: every file the loaded modules of
    BUILDER_PACKAGES come from and the shared libraries mapped from their folders (libtorch
    draws the seeded weights), each with its state and sha256."""
    roots = tuple(str(Path(p)) + "/" for name in BUILDER_PACKAGES
                  for p in (getattr(sys.modules.get(name), "__path__", None) or ()))
    states = {p: reads.file_state(p) for p in sorted(reads.loaded_files()) if p.startswith(roots)}
    return {"files": {p: [*state, reads.content_digest(p)] for p, state in states.items() if state is not None},
            "dirs": {}}


def builder_unchanged(root: Path) -> bool:
    """Whether the installed code that built `root` is as it was (no import needed)."""
    try:
        record = json.loads((root / BUILDER).read_text())
        return bool(record["files"]) and reads.holds(record)[0]
    except (OSError, ValueError, KeyError, TypeError):
        return False


MANIFEST = "parity-manifest.json"


def speculators_draft(recipe: DraftRecipe = DraftRecipe()) -> Path:
    """The draft directory for `recipe` (built on first use, then cached).

    A cached copy is used only if every file still has the sha256 its manifest recorded at
    build time: a truncated or corrupted file (an interrupted copy, a full disk, a stray
    edit) is rebuilt instead of being fed to every later run."""
    cache = cache_dir() / "fixtures"
    for out in sorted(cache.glob(f"draft-{recipe.key()}-*")):
        if builder_unchanged(out) and verified(out):
            return out
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".draft-{recipe.key()}.", dir=cache))  # own name: xdist workers race
    try:
        _build(recipe, tmp)
        record = builder_record()
        (tmp / BUILDER).write_text(json.dumps(record))
        write_manifest(tmp)  # last: a directory without one is never trusted
        builder = hashlib.sha256(json.dumps({p: s[-1] for p, s in record["files"].items()},
                                            sort_keys=True).encode()).hexdigest()[:12]
        out = cache / f"draft-{recipe.key()}-{builder}"
        if out.exists() and not verified(out):
            shutil.rmtree(out, ignore_errors=True)
        try:
            tmp.rename(out)
        except OSError:  # another process put a complete copy there first
            if not verified(out):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_manifest(root: Path) -> None:
    files = {p.name: _sha256(p) for p in sorted(root.iterdir()) if p.is_file() and p.name != MANIFEST}
    (root / MANIFEST).write_text(json.dumps(files, indent=1, sort_keys=True) + "\n")


def verified(root: Path) -> bool:
    """`root` holds exactly the files its manifest lists, each with the recorded sha256."""
    try:
        files = json.loads((root / MANIFEST).read_text())
        present = {p.name for p in root.iterdir() if p.is_file() and p.name != MANIFEST}
        return present == set(files) and all(_sha256(root / n) == h for n, h in files.items())
    except (OSError, ValueError, AttributeError, TypeError):
        return False


def _build(r: DraftRecipe, out: Path) -> None:
    import torch
    from transformers import LlamaConfig
    from speculators.config import SpeculatorsConfig, VerifierConfig
    from speculators.models.eagle3 import Eagle3DraftModel, Eagle3SpeculatorConfig
    from speculators.proposals.greedy import GreedyTokenProposalConfig

    h = r.hidden_size
    layer = LlamaConfig(hidden_size=h, intermediate_size=2 * h, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=h // 4, vocab_size=r.target_vocab, rms_norm_eps=1e-5,
                        **{"max_position_embeddings": 512, "num_hidden_layers": 1, **r.layer})
    speculators = SpeculatorsConfig(
        algorithm="eagle3", proposal_methods=[GreedyTokenProposalConfig()],
        default_proposal_method="greedy",
        verifier=VerifierConfig(name_or_path=None, architectures=["LlamaForCausalLM"]))
    draft_vocab = r.draft_vocab if r.with_d2t else r.target_vocab
    config = Eagle3SpeculatorConfig(
        transformer_layer_config=layer, draft_vocab_size=draft_vocab, target_hidden_size=h,
        eagle_aux_hidden_state_layer_ids=list(r.ids), norm_before_fc=r.norm_before_fc,
        fc_norm=r.fc_norm, norm_output=r.norm_output, norm_before_residual=r.norm_before_residual,
        speculators_config=speculators, **r.extra)
    config.transformer_layer_config._attn_implementation = "sdpa"  # noqa: SLF001
    model = Eagle3DraftModel(config)
    gen = torch.Generator().manual_seed(r.seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            p.copy_(1 + 0.1 * noise if "norm" in name else 0.1 * noise)
        if model.d2t is not None:  # speculators' format: offsets, target = d + d2t[d]
            chosen = torch.sort(torch.randperm(r.target_vocab, generator=gen)[:draft_vocab]).values
            model.d2t.copy_(chosen - torch.arange(draft_vocab))
            model.t2d.zero_()
            model.t2d[chosen] = True
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a fixture build prints nothing
    model.save_pretrained(str(out))
    (out / "config.py").unlink(missing_ok=True)  # remote-code stub; parity never runs it
