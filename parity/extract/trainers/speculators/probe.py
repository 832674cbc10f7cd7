"""Run the installed speculators' own training data path(s) on a marked sample; print what lands where.

    python -m parity.extract.trainers.speculators.probe  < {"num_slots": 4, "hidden_size": 8, "seq_len": 6}

Runs inside any speculators environment, so it imports only the standard library, torch,
safetensors, packaging and speculators, plus what speculators itself uses to write and read
its inputs (`datasets` for the arrow directory, the hs-connectors package it reads hidden
states through, transformers for a tiny draft config). Of parity's models only what needs
nothing but pydantic, a speculators dependency: the parent packages' __init__ (`python -m`
imports them) and the reply's envelope (parity.contract.reply).

Where each thing lives differs by release: the installed release's family module
(`families/v0_7.py`, `families/v0_9.py`, picked by its declared version range) names the
shift, the draft classes and the hidden-states transfer package, and picks from variants.py
its data paths, batching, train-split augmentation and default path. A release no family
covers is refused in the reply, naming the ranges looked in.

The sample: a dump of L slots, each [T, H]. Every [H] chunk carries a marker that names
its (slot, position): feature 0 is the anchor 7, features 1.. are the base-7 digits of
slot*T + position. Small integers with a per-token max of exactly 7 survive bf16 and the
FP8 transfer (scale = 7/448 = 2^-6) bit for bit; anything noisier is identified by the
nearest marker. The sample goes through each data path of the installed release's family
(0.7: the v1 list-of-tensors sample through `standardize_data_v1`; both: the arrow
directory through `ArrowDataset._get_raw_data` with each file-based hidden-states
transfer), then through `CollateFn` with eagle3's `shift_batch`, exactly as training wires
them. The reply says which slots form the fc input (chunk order), which slot is the loss
target, how positions line up, and whether the path alters values (FP8, noise). No slice
is assumed: everything comes from reading the markers back.

It also builds a tiny `Eagle3DraftModel` and runs its forward with hooks, to see whether
the loss target passes through the verifier's final norm before the LM head.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import torch
from ...child import imports_failing, note, with_limits
from ..config_class import config_schema
from ....contract.reply import reply_header
from ....envs import reply_over_stdio
from ....errors import CannotExtract
from ...families import UnsupportedRelease
from .built import built_draft
from .depth import trained_depth
from .dflash import built as dflash_built, draft_settings, fc_chunk_order, lacks_dflash
from .families import place
from .reply import SpeculatorsReply

ANCHOR = 7.0  # every chunk's feature 0; also each token's amax, so FP8 scale = 2^-6
BASE = 7  # digits 0..6 of the marker code
TOKEN0 = 100  # input_ids[t] = TOKEN0 + t, so shifted ids name their position


class ProbeError(RuntimeError):
    """A data path ran but its output could not be read back as markers."""


# -- markers --------------------------------------------------------------------------


def marker_dump(num_slots: int, seq_len: int, hidden: int) -> torch.Tensor:
    """The marked dump: [T, L, H] float32; chunk (t, s) = [7, base-7 digits of s*T + t]."""
    out = torch.zeros(seq_len, num_slots, hidden)
    for s in range(num_slots):
        for t in range(seq_len):
            code = s * seq_len + t
            out[t, s, 0] = ANCHOR
            for j in range(1, hidden):
                out[t, s, j] = code % BASE
                code //= BASE
    return out


def identify_chunks(rows: torch.Tensor,
                    table: torch.Tensor) -> tuple[list[tuple[int, int] | None], float]:
    """Name each [H] row by its nearest marker; rows: [R, H], table: [T, L, H].

    Distance is the largest per-feature deviation (markers differ by >= 1 in some
    feature). Returns (slot, position) per row (None: nothing within 0.5) and the
    largest distance to a matched marker (0.0 when every value survived exactly)."""
    seq_len, num_slots, hidden = table.shape
    flat = table.reshape(-1, hidden)  # [T*L, H]
    dist = torch.cdist(rows.float(), flat, p=float("inf"))  # [R, T*L]
    best, idx = dist.min(dim=1)
    names: list[tuple[int, int] | None] = []
    for d, i in zip(best.tolist(), idx.tolist()):
        names.append(None if d > 0.5 else (i % num_slots, i // num_slots))
    return names, max(best.tolist(), default=0.0)


def marker_capacity_ok(num_slots: int, seq_len: int, hidden: int) -> bool:
    return hidden >= 2 and BASE ** (hidden - 1) >= num_slots * seq_len


# -- speculators look-ups ---------------------------------------------------------------


def resolve(qualname: str) -> Any:
    """Import `a.b.C.d` by the longest importable module prefix; AttributeError/ImportError if absent."""
    parts = qualname.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"cannot import {qualname}")


def speculators_version() -> tuple[str, str | None]:
    """(distribution version, the package's own version.py when it says something else)."""
    dist = metadata.version("speculators")
    try:
        own = resolve("speculators.version.version")
    except (ImportError, AttributeError):
        own = None
    return dist, (own if own != dist else None)


def data_args_default(name: str) -> Any:
    """The training CLI default of a DataArgs field (None when the schema has no such field)."""
    try:
        fields = resolve("speculators.train.config.schema.DataArgs").model_fields
    except (ImportError, AttributeError):
        return None
    return fields[name].default if name in fields else None


# -- one probe run: the sample, the family, what was looked for ---------------------------------


@dataclass
class ProbeRun:
    """The marked sample's sizes, the installed release's family, and the steps every family shares.

    A family's variants get this object (variants.Run): `look_up` records each name they look for,
    `collate` is training's collate + shift, `arrow_runners` the arrow directory through each file
    backend of the family's hs-connectors package."""

    family: ModuleType
    tmp: Path
    num_slots: int
    hidden: int
    seq_len: int
    looked_for: list[str]
    shift: Callable | None = None
    backend_default: str = "file"
    data_mod: Any = field(default=None, repr=False)

    def look_up(self, qualname: str) -> Any:
        """The named object (None when absent), recorded in `looked_for` (once)."""
        if qualname not in self.looked_for:
            self.looked_for.append(qualname)
        try:
            return resolve(qualname)
        except (ImportError, AttributeError):
            return None

    def data_args_default(self, name: str) -> Any:
        return data_args_default(name)

    def token_ids(self) -> torch.Tensor:
        return torch.arange(self.seq_len) + TOKEN0

    def collate(self, sample: dict) -> dict[str, torch.Tensor]:
        """What the trainer receives: the family's collate + shift over one sample, real rows only."""
        return self.family.collate(self, sample)

    def arrow_runners(self) -> list[tuple[str, Callable[[], tuple[Callable, dict]]]]:
        """One runner factory per hidden-states backend of the family's hs-connectors package."""
        path = self.family.ARROW_PATH
        self.looked_for.append(path)
        try:
            resolve(path)
        except (ImportError, AttributeError):
            return [(path, lambda: _absent(self, path))]
        self.data_mod = resolve("speculators.train.data")
        if self.family.HS_CONNECTORS is None:  # the dataset reads hidden_states/hs_{i}.safetensors itself
            return [(path, lambda: direct_arrow_runner(self))]
        registry = resolve(f"{self.family.HS_CONNECTORS}.transfer.HiddenStatesBackend").registry
        return [(path, lambda b=name, c=backend: arrow_runner(self, b, c)) for name, backend in registry.items()]


def _absent(run: ProbeRun, qualname: str):
    raise ProbeError(f"{qualname} is not in speculators {metadata.version('speculators')}, though "
                     f"its family {run.family.__name__.rsplit('.', 1)[-1]} runs it")


# -- running one path -----------------------------------------------------------------


def read_back(out: dict[str, torch.Tensor], table: torch.Tensor) -> dict[str, Any]:
    """Turn the trainer's tensors back into slots and positions."""
    seq_len, num_slots, hidden = table.shape
    fc = out["hidden_states"].float()  # [R, k*H]
    ver = out["verifier_last_hidden_states"].float()  # [R, H]
    rows = fc.shape[0]
    if fc.shape[-1] % hidden:
        raise ProbeError(f"fc input width {fc.shape[-1]} is not a multiple of hidden_size {hidden}")
    width = fc.shape[-1] // hidden
    if width == 0:
        raise ProbeError(f"the fc input came out empty: a {num_slots}-slot dump leaves no slot for it")
    fc_names, fc_err = identify_chunks(fc.reshape(rows * width, hidden), table)
    ver_names, ver_err = identify_chunks(ver, table)
    if None in fc_names or None in ver_names:
        raise ProbeError("the data path changed the marker values beyond recognition")
    grid = [fc_names[r * width:(r + 1) * width] for r in range(rows)]  # [R][k] -> (slot, pos)
    fc_slots = [[g[c][0] for g in grid] for c in range(width)]
    ver_slots = [v[0] for v in ver_names]
    if any(len(set(col)) != 1 for col in fc_slots) or len(set(ver_slots)) != 1:
        raise ProbeError(f"slot choice varies by position: fc {fc_slots}, target {ver_slots}")
    hs_pos = [{g[c][1] for c in range(width)} for g in grid]
    if any(len(p) != 1 for p in hs_pos):
        raise ProbeError("fc chunks of one row come from different positions")
    ids_pos = [int(i) - TOKEN0 for i in out["input_ids"].tolist()]
    return {
        "fc_slots": [col[0] for col in fc_slots], "target_slot": ver_slots[0], "rows": rows,
        "positions": {"input_ids": ids_pos, "hidden_states": [p.pop() for p in hs_pos],
                      "verifier_last_hidden_states": [v[1] for v in ver_names]},
        "max_marker_error": max(fc_err, ver_err),
    }


def alignment(positions: dict[str, list[int]], seq_len: int) -> tuple[str, dict[str, int] | None]:
    """One sentence for how positions line up, plus the per-tensor offsets when they are constant."""
    offsets = {}
    for key, pos in positions.items():
        deltas = {p - r for r, p in enumerate(pos)}
        if len(deltas) != 1:
            return f"not a constant shift: {positions}", None
        offsets[key] = deltas.pop()
    rows = len(positions["input_ids"])
    a, b, c = (_at(offsets[k]) for k in ("input_ids", "hidden_states", "verifier_last_hidden_states"))
    return (f"row t pairs input_ids[{a}] with hidden_states[{b}] and "
            f"verifier_last_hidden_states[{c}] ({rows} of {seq_len} positions kept)"), offsets


def _at(offset: int) -> str:
    return f"t{offset:+d}" if offset else "t"


def changes_values(run: Callable[[torch.Tensor], dict], result: dict, num_slots: int,
                   seq_len: int, hidden: int) -> bool:
    """Whether the path alters ordinary (non-marker) values: run it on random bf16 data and compare."""
    torch.manual_seed(0)
    payload = torch.randn(seq_len, num_slots, hidden).to(torch.bfloat16)  # [T, L, H]
    out = run(payload)
    pos = result["positions"]
    want_fc = torch.stack([payload[t, result["fc_slots"]].flatten() for t in pos["hidden_states"]])
    want_ver = payload[pos["verifier_last_hidden_states"], result["target_slot"]]
    return not (torch.equal(out["hidden_states"].to(torch.bfloat16), want_fc)
                and torch.equal(out["verifier_last_hidden_states"].to(torch.bfloat16), want_ver))


def probe_path(code_path: str, run: Callable[[torch.Tensor, Any], dict], transform: Any,
               num_slots: int, seq_len: int, hidden: int, **extra: Any) -> dict[str, Any]:
    """Run one path on the marked dump (with training's default augmentation), read it back, describe it."""
    table = marker_dump(num_slots, seq_len, hidden)
    result = read_back(run(table.to(torch.bfloat16), transform), table)
    sentence, offsets = alignment(result["positions"], seq_len)
    lossy_reason = None
    if changes_values(lambda d: run(d, None), result, num_slots, seq_len, hidden):
        lossy_reason = f"the hidden-states transfer/storage ({extra.get('writer', 'file')})"
    elif transform is not None and changes_values(lambda d: run(d, transform), result, num_slots,
                                                  seq_len, hidden):
        lossy_reason = f"train-split augmentation {type(transform).__name__}(std={transform.std})"
    return {"code_path": code_path, **extra, "fc_slots": result["fc_slots"],
            "target_slot": result["target_slot"], "alignment": sentence, "offsets": offsets,
            "lossy": lossy_reason is not None, "lossy_reason": lossy_reason,
            "markers_exact": result["max_marker_error"] == 0.0,
            "max_marker_error": result["max_marker_error"]}


# -- the arrow directory (both families) ------------------------------------------------------


def backend_transfer(run: ProbeRun, backend: Any, data_path: Path) -> tuple[Any, str]:
    """(transfer object, vLLM-side connector name) the trainer would build for this backend."""
    hs_path = str(data_path / "hidden_states")
    train, launch = argparse.ArgumentParser(), argparse.ArgumentParser()
    backend.add_train_args(train)
    backend.add_launch_args(launch)
    train_args, launch_args = train.parse_args([]), launch.parse_args([])
    train_args.hidden_states_path = launch_args.hidden_states_path = hs_path
    connector = backend.build_kv_transfer_config(launch_args)["kv_connector"]
    return backend.from_train_args(train_args, str(data_path)), connector


def write_hs_file(run: ProbeRun, path: Path, dump: torch.Tensor, token_ids: torch.Tensor,
                  connector: str) -> None:
    """Write hs_{i}.safetensors as the named vLLM connector does (FP8 via hs-connectors' own quantizer)."""
    from safetensors.torch import save_file

    tensors = {"hidden_states": dump.contiguous(), "token_ids": token_ids}
    if connector == "FP8HiddenStatesConnector":
        fp8 = resolve(f"{run.family.HS_CONNECTORS}.fp8_utils")
        q, scales = fp8.quantize_tensor_to_fp8(dump)
        tensors.update({"hidden_states": q, fp8.SCALES_KEY: scales})
    elif connector != "ExampleHiddenStatesConnector":
        raise ProbeError(f"no writer for hidden-states connector {connector!r}")
    save_file(tensors, str(path))


class NeedsStore(ProbeError):
    """A backend that reads through a running store, not a file: skipped, not failed."""


def _arrow_dir(run: ProbeRun, name: str) -> Path:
    """The preprocessed arrow directory speculators' training reads (one sample; a family's
    `ARROW_ROWS` copies of it where training splits the directory), with an empty hidden_states/
    beside it."""
    import datasets

    data_path = run.tmp / f"arrow-{name}"
    ids = run.token_ids()
    n = getattr(run.family, "ARROW_ROWS", 1)
    rows = {"input_ids": [ids.tolist()] * n, "loss_mask": [[1] * run.seq_len] * n, "seq_len": [run.seq_len] * n}
    getattr(datasets, "disable_progress_bars", lambda: None)()
    ds = datasets.Dataset.from_dict(rows)
    ds.set_format(type="torch")  # as speculators' preprocessing saves it
    ds.save_to_disk(str(data_path))
    (data_path / "hidden_states").mkdir()
    return data_path


def direct_arrow_runner(run: ProbeRun) -> tuple[Callable, dict]:
    """The arrow directory + hidden_states/hs_0.safetensors through an ArrowDataset that loads the
    file itself (no hidden-states transfer: the 0.5-0.6 releases)."""
    data_path = _arrow_dir(run, "file")
    ids = run.token_ids()

    def go(dump: torch.Tensor, transform: Any) -> dict:  # dump: [T, L, H]
        write_hs_file(run, data_path / "hidden_states" / "hs_0.safetensors", dump, ids,
                      "ExampleHiddenStatesConnector")
        dataset = run.family.arrow_dataset(run.data_mod, run.seq_len + 2, str(data_path), None, transform)
        torch.manual_seed(0)
        item = dataset[0]
        if item is None:
            raise ProbeError("ArrowDataset returned no sample")
        return run.collate(item)

    return go, {"transfer": "none: ArrowDataset loads hidden_states/hs_{i}.safetensors itself", "backend": "file",
                "writer": "a safetensors file {hidden_states [T, L, H], token_ids}, as vLLM's example connector writes"}


def arrow_runner(run: ProbeRun, name: str, backend: Any) -> tuple[Callable, dict]:
    """The arrow directory + hidden_states/hs_0.safetensors through ArrowDataset and one transfer."""
    data_mod = run.data_mod
    data_path = run.tmp / f"arrow-{name}"
    transfer, connector = backend_transfer(run, backend, data_path)
    if not isinstance(transfer, data_mod.FileTransfer):
        raise NeedsStore(f"backend {name!r} reads through {type(transfer).__name__}, not a file: "
                         "needs its store running")
    ids = run.token_ids()
    _arrow_dir(run, name)

    def go(dump: torch.Tensor, transform: Any) -> dict:  # dump: [T, L, H]
        write_hs_file(run, data_path / "hidden_states" / "hs_0.safetensors", dump, ids, connector)
        dataset = run.family.arrow_dataset(data_mod, run.seq_len + 2, str(data_path), transfer, transform)
        torch.manual_seed(0)
        item = dataset[0]
        if item is None or type(item).__name__ == "SampleUnavailable":
            raise ProbeError(f"ArrowDataset returned no sample ({item!r})")
        return run.collate(item)

    t = type(transfer)
    return go, {"transfer": f"{t.__module__}.{t.__qualname__}", "backend": name, "writer": connector}


# -- the loss target's norm ---------------------------------------------------------------


class _Stop(Exception):
    pass


def target_norm(run: ProbeRun) -> tuple[bool | None, str]:
    """Build a tiny Eagle3DraftModel and run forward with hooks: does the LM head see norm(target)?"""
    model_name = run.family.DRAFT_MODEL
    model_cls, config_cls = run.look_up(model_name), run.look_up(run.family.DRAFT_CONFIG)
    if model_cls is None or config_cls is None:
        return None, "no Eagle3DraftModel / Eagle3SpeculatorConfig found to run"
    from transformers import LlamaConfig

    from speculators.config import SpeculatorsConfig, VerifierConfig
    from speculators.proposals.greedy import GreedyTokenProposalConfig

    hidden, seq_len = 8, 5
    layer = LlamaConfig(hidden_size=hidden, intermediate_size=16, num_attention_heads=2,
                        num_key_value_heads=2, head_dim=4, num_hidden_layers=1, vocab_size=16)
    layer._attn_implementation = "sdpa"
    spec = SpeculatorsConfig(algorithm="eagle3", proposal_methods=[GreedyTokenProposalConfig()],
                             default_proposal_method="greedy",
                             verifier=VerifierConfig(name_or_path=None, architectures=[]))
    config = config_cls(transformer_layer_config=layer, draft_vocab_size=16, speculators_config=spec,
                        eagle_aux_hidden_state_layer_ids=[1, 2, 3])
    torch.manual_seed(0)
    model = run.family.draft_model(model_cls, config).eval()
    head, norm = getattr(model, "verifier_lm_head", None), getattr(model, "verifier_norm", None)
    if head is None:
        return None, f"{model_name} has no verifier_lm_head to hook"
    seen: dict[str, torch.Tensor] = {}
    if norm is not None:
        norm.register_forward_hook(
            lambda m, i, o: seen.update(norm_in=i[0].detach(), norm_out=o.detach()))

    def stop(m, i):
        seen["head_in"] = i[0].detach()
        raise _Stop

    head.register_forward_pre_hook(stop)
    target = torch.randn(1, seq_len, hidden) * 3 + 1  # [1, T, H], far from unit RMS
    try:
        with torch.no_grad():
            model.forward(hidden_states=torch.randn(1, seq_len, 3 * hidden),
                          input_ids=torch.randint(0, 16, (1, seq_len)),
                          document_ids=torch.zeros(1, seq_len, dtype=torch.long),
                          position_ids=torch.arange(seq_len)[None],
                          loss_mask=torch.ones(1, seq_len, dtype=torch.bool),
                          verifier_last_hidden_states=target, ttt_steps=1)
    except _Stop:
        pass
    if "head_in" not in seen:
        return None, f"{model_name}.forward never called verifier_lm_head"
    head_in = seen["head_in"]
    if torch.equal(head_in, target):
        return False, (f"ran {model_name}.forward: verifier_lm_head received "
                       "verifier_last_hidden_states as is")
    if ("norm_out" in seen and torch.equal(seen["norm_in"], target)
            and torch.equal(head_in, seen["norm_out"])):
        return True, (f"ran {model_name}.forward: verifier_lm_head received "
                      "verifier_norm(verifier_last_hidden_states)")
    return None, f"ran {model_name}.forward: verifier_lm_head received something else"


# -- the draft config class ----------------------------------------------------------------


# -- the whole probe ------------------------------------------------------------------------


def run_paths(reply: dict, runners: list, transform: Any, num_slots: int, seq_len: int,
              hidden: int) -> None:
    """Run every path; a path that exists but fails is recorded, never raised."""
    for name, make in runners:
        try:
            run, extra = make()
            reply["paths"].append(probe_path(name, run, transform, num_slots, seq_len, hidden, **extra))
        except NeedsStore as exc:
            reply["skipped"].append({"code_path": name, "reason": str(exc)})
        except ProbeError as exc:
            reply["errors"].append({"code_path": name, "error": str(exc)})
        except Exception as exc:  # noqa: BLE001 - a path that exists but fails is a result
            note(exc)
            reply["errors"].append({"code_path": name, "error": f"{type(exc).__name__}: {exc}",
                                    "where": traceback.format_exc().strip().splitlines()[-3].strip()})


def dflash_fc(reply: dict, run: ProbeRun, draft: dict | None = None) -> tuple[bool | None, str]:
    """A DFlash draft: the release's DFlashDraftModel run on what the data path hands it
    (parity.extract.trainers.speculators.dflash); each path's fc slots become the slots in the order
    the model's fc reads them. (normed, evidence) for the loss target."""
    widths = {len(p["fc_slots"]) for p in reply["paths"]}
    if len(widths) != 1:
        raise ProbeError(f"the data paths hand over different numbers of states: {sorted(widths)}")
    try:
        read = draft_settings(run, draft)
    except Exception as exc:  # noqa: BLE001 - its reader refused the config: the built draft is not compared
        note(exc)
        reply["built_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        read, draft = {"config": None}, None
    found = fc_chunk_order(run, widths.pop(), read)
    for entry in reply["paths"]:
        entry["fc_slots"] = [entry["fc_slots"][k] for k in found["order"]]
    reply["dflash"] = {"model": found["model"], "fc_chunk_order": found["order"]}
    if draft is not None:  # the draft as this release builds it (parity.contract.BuiltDraft): its DFlash fields
        reply["built"] = dflash_built(run, found["built_model"], read, reply["release"])
    return found["normed"], found["evidence"]


def warm() -> None:
    """The import-only first steps of `probe`, before any request (parity.forkserver): the
    package, the family placement and the data path's modules. Nothing is computed."""
    import speculators  # noqa: F401

    try:
        place(speculators_version()[0])
    except UnsupportedRelease:
        return  # the run itself reports it
    for name in ("datasets", "safetensors.torch", "speculators.train.data", "speculators.config"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # a release without it: the run looks it up itself


# The modules of the installed speculators its data path imports (where the release has them).
DATA_PATH_MODULES = ("speculators.train.data", "speculators.config")


def import_data_path() -> None:
    """Import the installed speculators and the modules of its data path that the release has."""
    import speculators  # noqa: F401

    for name in DATA_PATH_MODULES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)


def probe(request: dict) -> dict[str, Any]:
    """The reply for one request (see the module docstring): the release's family, each data path
    run on the marked dump, the default path, whether training norms the loss target, the draft
    config class, and the draft as the release builds it."""
    num_slots = int(request["num_slots"]) if not request.get("imports_only") else 1
    hidden = int(request.get("hidden_size", 8))
    seq_len = int(request.get("seq_len", 6))
    dflash = request.get("kind") == "dflash"
    started = time.perf_counter()
    unimportable = imports_failing(import_data_path, "speculators")  # most of a probe's time
    imported = time.perf_counter()
    if unimportable is not None:  # this interpreter cannot run it (parity.extract.installed)
        version = metadata.version("speculators")
        return {**reply_header(version), **CannotExtract.entry("speculators", version, unimportable,
                                                               unimportable=True)}
    version, own_version = speculators_version()
    reply: dict[str, Any] = {**reply_header(version, release_declared=own_version),
                             "paths": [], "looked_for": [], "errors": [], "skipped": []}
    if request.get("imports_only"):  # where it can run (parity.extract.installed): nothing is built
        return reply
    if num_slots < 1 or seq_len < 2 or not marker_capacity_ok(num_slots, seq_len, hidden):
        reply["error"] = (f"request too small to mark: num_slots={num_slots} (>=1), seq_len={seq_len} "
                          f"(>=2), hidden_size={hidden} (needs 7^(H-1) >= slots*positions)")
        return reply
    try:
        placement = place(version)
    except UnsupportedRelease as exc:
        reply.update(CannotExtract.entry("speculators", version, str(exc)))
        return reply
    family = placement.module
    reply["family"] = placement.family
    if placement.note:
        reply["release_note"] = placement.note
    run = _run_paths(reply, family, version, num_slots, hidden, seq_len, dflash)
    if run is None:
        return reply
    if not reply["paths"] and not reply["errors"]:
        reply["error"] = (f"speculators {version} ran none of its family's data paths: looked for "
                          f"{', '.join(reply['looked_for'])}")
        return reply
    reply["default_path"], reply["default_path_reason"] = family.default_path(
        run, {p["code_path"] for p in reply["paths"]})
    for entry in reply["paths"]:
        entry["default"] = (entry["code_path"] == reply["default_path"]
                            and entry.get("backend", run.backend_default) == run.backend_default)
    reply["target_normed_by_trainer"], reply["target_norm_evidence"] = _normed(reply, run, request, dflash)
    _schema_and_draft(reply, run, request, version, dflash)
    reply["seconds"] = {"import": round(imported - started, 2),
                        "probe": round(time.perf_counter() - imported, 2)}
    return reply


def _run_paths(reply: dict, family, version: str, num_slots: int, hidden: int, seq_len: int,
               dflash: bool) -> "ProbeRun | None":
    """Each of the family's data paths run on the marked dump, after the batch preprocess and the
    transform its training applies (a DFlash draft: its own preprocess); None when the reply is
    complete (the release lacks DFlash, or its shift_batch)."""
    with tempfile.TemporaryDirectory(prefix="parity-train-probe-") as tmp:
        run = ProbeRun(family=family, tmp=Path(tmp), num_slots=num_slots, hidden=hidden, seq_len=seq_len,
                       looked_for=reply["looked_for"],
                       backend_default=data_args_default("hidden_states_backend") or "file")
        if dflash:  # a DFlash draft: the release's DFlash model, and the preprocess its training gives it
            lacks = lacks_dflash(run)
            if lacks:
                reply.update(CannotExtract.entry("speculators", version, lacks, engine_lacks=True))
                return None
            run.shift, reply["preprocess"] = family.dflash_preprocess(run)
        else:
            run.shift = run.look_up(family.SHIFT_BATCH)
            if run.shift is None:
                reply["error"] = f"speculators {version}: no shift_batch found (looked for {family.SHIFT_BATCH})"
                return None
            reply["preprocess"] = family.SHIFT_BATCH
        transform, reply["train_transform"] = family.train_transform(run)
        run_paths(reply, family.data_paths(run), transform, num_slots, seq_len, hidden)
    return run


def _normed(reply: dict, run: "ProbeRun", request: dict, dflash: bool) -> tuple[bool | None, str]:
    """Whether training norms the loss target, and the evidence (a DFlash draft: what its fc reads)."""
    if dflash and reply["paths"]:
        return dflash_fc(reply, run, request.get("draft"))
    if dflash:
        return None, "no data path ran to hand the DFlash model its states"
    try:
        return target_norm(run)
    except Exception as exc:  # noqa: BLE001
        note(exc)
        return None, f"could not run the draft model: {type(exc).__name__}: {exc}"


def _schema_and_draft(reply: dict, run: "ProbeRun", request: dict, version: str, dflash: bool) -> None:
    """The release's draft config class as the draft reader uses it, and (a draft given) the draft
    as this release builds it and the depth training unrolled it to."""
    try:
        reply["config_schema"] = config_schema()
    except Exception as exc:  # noqa: BLE001 - the draft reader then works without the class
        note(exc)
        reply["config_schema"] = None
        reply["config_schema_error"] = f"{type(exc).__name__}: {exc}"
    if request.get("draft") and not dflash:  # the draft as this release builds it (parity.contract.BuiltDraft)
        try:
            reply["built"] = built_draft(run, request["draft"], version)
        except Exception as exc:  # noqa: BLE001 - reported as a finding: this side's draft is not compared
            note(exc)
            reply["built_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        try:  # the depth training unrolled the draft to (parity.contract.TrainedDepth)
            reply["trained_depth"] = trained_depth(run, request["draft"])
        except Exception as exc:  # noqa: BLE001 - unknown: the served steps are not compared with it
            note(exc)
            reply["trained_depth_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]


def main() -> None:
    reply_over_stdio(SpeculatorsReply.checked(with_limits(probe, "speculators")), hard_exit=False)


if __name__ == "__main__":
    main()
