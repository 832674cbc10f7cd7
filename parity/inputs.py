"""Reading user input: every problem becomes one line naming the file and what is wrong."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .contract import TargetModel, parse_taps
from .contract.hf import is_wrapper, text_part
from .errors import UserError


class InputError(UserError, ValueError):
    """Bad input: missing or malformed files, impossible ids. Exit code 2, one line."""


# A config.json is a few kilobytes; anything near this is not one (and /dev/zero never ends).
MAX_CONFIG_BYTES = 16 * 1024 * 1024
# A serve command is a few hundred bytes and at most a few hundred arguments (each of the engine's
# flags once, with its value); past these it is not one, and the engine's parser would only burn
# time on it (200,000 repeated flags kept an SGLang probe busy past its 600 s limit).
MAX_SERVE_ARGS_BYTES = 256 * 1024
MAX_SERVE_ARGS = 1024
# parity builds a tiny model of the target's real depth; deeper than this is not a real target
# and would only exhaust memory.
MAX_LAYERS = 1024


def regular_file(path: Path, what: str, limit: int | None = None, holds: str = "a config file") -> Path:
    """`path` if it is a regular file (not a FIFO, device or directory) within `limit` bytes.

    A FIFO would block a read forever and /dev/zero would grow until memory runs out, so
    parity opens nothing that `stat` does not show to be a plain file (a link is followed)."""
    import stat

    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError(f"{what} {path}: file not found") from None
    except OSError as exc:
        raise InputError(f"{what} {path}: cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what} {path}: is a directory, expected a file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what} {path}: not a regular file (a pipe, socket or device); "
                         "give the path of a file")
    if limit is not None and st.st_size > limit:
        raise _too_big(path, what, st.st_size, limit, holds)
    return path


def _too_big(path: Path, what: str, size: int | None, limit: int, holds: str) -> InputError:
    """The refusal of a file past `limit` bytes (`size`: its size, None when it grew past the
    limit while it was read)."""
    found = f"{size} bytes" if size is not None else "more bytes than its size said"
    return InputError(f"{what} {path}: {found}, more than the {limit} {holds} can reasonably hold")


def read_bounded(path: Path, what: str, limit: int, holds: str = "a config file") -> bytes:
    """The bytes of the regular file `path`, refused (one line naming the limit) when it is not
    one or holds more than `limit` bytes: checked before reading, and again while reading (a file
    that grows after its `stat` is read no further than the limit)."""
    path = regular_file(path, what, limit, holds)
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise InputError(f"{what} {path}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise _too_big(path, what, None, limit, holds)
    return data


def read_config(path: Path, what: str) -> dict[str, Any]:
    """A JSON object from `path`, or an InputError naming the file."""
    raw = read_bounded(path, what, MAX_CONFIG_BYTES)
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{what} {path}: not a text file") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} {path}: malformed JSON at line {exc.lineno} column {exc.colno}: "
                         f"{exc.msg}") from None
    except RecursionError:
        raise InputError(f"{what} {path}: JSON nested too deeply to be a config") from None
    if not isinstance(data, dict):
        raise InputError(f"{what} {path}: expected a JSON object, got {type(data).__name__}")
    return data


# Draft steps a replay or forward comparison runs: each is one more full draft pass over every
# sample (and, in a replay, every wiring), so an unbounded count only burns time.
MAX_STEPS = 16


def check_steps(steps: int, flag: str = "--steps") -> int:
    if not 1 <= steps <= MAX_STEPS:
        raise InputError(f"{flag} {steps}: must be 1..{MAX_STEPS} (each step is one more draft pass over "
                         "every sample; accuracy past a few steps is already small)")
    return steps


def safetensors_shapes(path: Path, what: str) -> dict[str, list[int]]:
    """Tensor name -> shape of a safetensors file, from its header alone: a truncated or
    corrupt file is bad input naming the file, not a crash."""
    from safetensors import safe_open

    path = regular_file(path, what)
    try:
        with safe_open(str(path), "pt") as f:
            return {k: list(f.get_slice(k).get_shape()) for k in f.keys()}
    except Exception as exc:  # noqa: BLE001 - the library raises its own error types
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"{what} {path}: not a readable safetensors file ({first})") from None


def target_layers(config: dict[str, Any], path: Path) -> int:
    """N, the target's decoder-layer count, or an InputError saying why it is missing."""
    where = "text_config.num_hidden_layers" if is_wrapper(config) else "num_hidden_layers"
    n = text_part(config).get("num_hidden_layers")
    if n is None:
        if is_wrapper(config):
            raise InputError(f"target config {path}: its text_config has no num_hidden_layers, so the "
                             "text model's depth is unknown")
        raise InputError(f"target config {path}: no num_hidden_layers")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InputError(f"target config {path}: {where} is {n!r}, expected a positive integer")
    if n > MAX_LAYERS:
        raise InputError(f"target config {path}: {where} is {n}; parity builds a model of the "
                         f"target's depth and refuses more than {MAX_LAYERS} layers")
    return n


def target_architecture(config: dict[str, Any], path: Path) -> str:
    """The first of `architectures`, checked to be a list of class names."""
    archs = config.get("architectures")
    if archs is None or archs == []:
        raise InputError(f"target config {path}: no architectures list (e.g. [\"LlamaForCausalLM\"])")
    if isinstance(archs, str):
        raise InputError(f"target config {path}: architectures is the string {archs[:80]!r}; expected a "
                         f"list such as [{json.dumps(archs[:80])}]")
    if not isinstance(archs, list) or not all(isinstance(a, str) and a.isidentifier() for a in archs):
        raise InputError(f"target config {path}: architectures is {_short(archs)}; expected a list of "
                         "model class names such as [\"LlamaForCausalLM\"]")
    return archs[0]


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(frozen=True)
class Target:
    """A target config.json, read and checked once where the user named it (the CLI, the pytest
    plugin, a lock, the matrix) and passed down as is: nothing below that boundary reads it again."""

    path: Path                # the file, as given (messages name it)
    config: dict[str, Any]    # its JSON object as published (a wrapper keeps its text_config)
    model: "TargetModel"      # what parity reads of it: architecture, depth, widths
    given: str | None = None  # its folder as the user wrote it, when `path` is not (a lock's, resolved)

    @property
    def layers(self) -> int:
        """N, the decoder-layer count of the model whose states the draft reads."""
        return self.model.num_hidden_layers

    @property
    def name(self) -> str:
        """The target's folder as the user wrote it (the config's folder), absolute: the name an engine
        is shown for the folder parity serves the target from (engines read names: parity.extract.named)."""
        return os.path.abspath(self.given or self.path.parent)

    @classmethod
    def read(cls, path: Path | str) -> "Target":
        """The target config at `path`, every field parity reads checked: one-line InputError otherwise."""
        path = Path(path)
        cfg = read_config(path, "target config")
        target_layers(cfg, path)
        target_architecture(cfg, path)
        try:
            return cls(path=path, config=cfg, model=TargetModel.from_hf_config(cfg))
        except ValidationError as exc:
            raise InputError(f"target config {path}: {validation_line(exc)}") from None


@dataclass(frozen=True)
class Draft:
    """A draft directory whose config.json was read once. The engines and trainers serve or
    train the directory itself (`path`): they read it the way they would in production, in
    their own process. Reading checks only that it is a directory with a JSON config: what the
    engine makes of odd ids is for the engine's contract to show (`check_ids` is the gate's policy)."""

    path: Path                # the directory
    config: dict[str, Any]    # its config.json
    given: str | None = None  # the path as the user wrote it, when `path` is parity's copy of it

    @property
    def config_file(self) -> Path:
        return self.path / "config.json"

    @property
    def name(self) -> str:
        """The draft's path as the user wrote it (`--draft`, a lock's `draft`): the name an engine is
        shown for the folder parity serves (engines read names: vLLM takes the speculative method
        from it when none is given; parity.extract.named), absolute as the user's shell would make it
        (a lock's, a relative and an absolute spelling of one folder name it alike). A copy parity
        makes keeps its original's."""
        return os.path.abspath(self.given or self.path)

    @property
    def written_ids(self) -> Any:
        """The aux ids as written: eagle_config's, else the top-level ones (None: neither)."""
        eagle = self.config.get("eagle_config") if isinstance(self.config.get("eagle_config"), dict) else {}
        return eagle.get("eagle_aux_hidden_state_layer_ids", self.config.get("eagle_aux_hidden_state_layer_ids"))

    @classmethod
    def read(cls, path: Path | str) -> "Draft":
        """The draft directory at `path` and its config.json (one-line InputError otherwise)."""
        path = Path(path)
        if not path.is_dir():
            raise InputError(f"draft {path}: not a directory")
        return cls(path=path, config=read_config(path / "config.json", "draft config"))


@dataclass(frozen=True)
class TrainingRun:
    """A trainer's training output (--trained, for a trainer whose served draft is written apart
    from its training state: SpecForge's run output directory, one of its checkpoint directories,
    or its training state file). Parity never opens it: the trainer's own code reads it, in its
    own environment's child (its checkpoint is a pickle); reading here checks only that it exists."""

    path: Path                # as given (messages name it)

    @classmethod
    def read(cls, path: Path | str) -> "TrainingRun":
        path = Path(path)
        if not path.exists():
            raise InputError(f"--trained {path}: does not exist")
        return cls(path=path)


def read_inputs(target_config: Path | str, draft_dir: Path | str) -> tuple[Target, Draft]:
    """The target and the draft a command names, each read once."""
    return Target.read(target_config), Draft.read(draft_dir)


def check_ids(target: Target, draft: Draft) -> None:
    """What `parity check` refuses before any extraction: aux ids no engine could capture for
    `target` (not integers, out of range, repeated). Ids out of order are not refused: which
    order each side feeds them in is found by running it (NVIDIA ModelOpt's export writes the
    run's ids as given, and trains on them in layer order)."""
    ids, dfile, n = draft.written_ids, draft.config_file, target.layers
    if ids is None:
        return
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise InputError(f"draft config {dfile}: eagle_aux_hidden_state_layer_ids is {ids!r}, "
                         "expected a list of integers")
    out = [i for i in ids if not -1 <= i <= n]
    if out:
        raise InputError(f"draft config {dfile}: layer ids {out} are out of range for a {n}-layer "
                         f"target (-1..{n})")
    if len(set(ids)) != len(ids):
        raise InputError(f"draft config {dfile}: duplicate layer ids in {ids}")


def check_fit(target: Target, draft: Draft, training) -> None:
    """What `parity check` refuses once the TrainingContract is known: a dump layout naming a
    state twice, and an fc input or widths the draft cannot take."""
    layout = [t.name for t in training.dump_layout]
    if len(set(layout)) != len(layout):
        raise InputError(f"dump layout {layout}: a state appears twice")
    ids = draft.written_ids
    n_aux = draft.config.get("num_aux_hidden_states") or (len(ids) if isinstance(ids, list) else None)
    if n_aux is not None and n_aux != len(training.fc_input):
        raise InputError(f"dump layout {layout}: the training data path builds a {len(training.fc_input)}"
                         f"-state fc input, but draft config {draft.config_file} expects {n_aux} aux states")
    tgt_h = text_part(target.config).get("hidden_size")
    draft_h = draft.config.get("target_hidden_size") or draft.config.get("hidden_size")
    if isinstance(tgt_h, int) and isinstance(draft_h, int) and tgt_h != draft_h:
        where = "text_config.hidden_size" if is_wrapper(target.config) else "hidden_size"
        raise InputError(f"draft config {draft.config_file}: expects target hidden states of width {draft_h}, "
                         f"but target config {target.path} has {where} {tgt_h}")


def validation_line(exc) -> str:
    """A pydantic ValidationError as one line: where and what, for the first error."""
    first = exc.errors()[0]
    where = ".".join(str(x) for x in first.get("loc", ())) or "value"
    return f"{where}: {first.get('msg', 'invalid')} (got {_short(first.get('input'))})"


@dataclass(frozen=True)
class DumpSpec:
    """What the training data's dump holds, as the user described it (parsed once, at the CLI):
    either the layout itself (which state each dumped slot holds) or the data-generation layer
    ids with the convention that says how a dump is made from them."""

    layout: list | None = None          # list[Tap]: the dump's slots, in order
    datagen_ids: list[int] | None = None
    convention: str | None = None       # a typed rule for `datagen_ids` (None: run the engine)
    launch_default: bool = False        # `--datagen-ids default`: the launch script's own ids

    @property
    def given(self) -> bool:
        return self.layout is not None or self.datagen_ids is not None or self.launch_default

    @property
    def runs_datagen(self) -> bool:
        """Data-generation ids (or the launch default) with no typed rule named: the dump is
        found by running the data-generation engine."""
        return self.layout is None and self.convention is None and (
            self.datagen_ids is not None or self.launch_default)

    @property
    def layout_names(self) -> list[str] | None:
        return [t.name for t in self.layout] if self.layout is not None else None


def parse_dump(layout: str | None, datagen_ids: str | None = None,
               convention: str | None = None) -> DumpSpec:
    """`--dump-layout h0,h3,h31,h59` or `--datagen-ids 2,30,58` as typed values (InputError
    naming the flag otherwise). The layout wins when both are given, as it is the more exact."""
    try:
        if layout is not None:  # an empty --dump-layout is bad input, not an absent one
            return DumpSpec(layout=parse_taps(layout))
    except ValueError as exc:
        raise InputError(f"--dump-layout: {exc}") from None
    if datagen_ids is not None and datagen_ids.strip() == "default":
        if convention is not None:
            raise InputError(f"--datagen-ids default runs the data-generation engine; a typed rule "
                             f"(--datagen-convention {convention}) needs the ids themselves")
        return DumpSpec(launch_default=True)
    if datagen_ids is not None:
        return DumpSpec(datagen_ids=parse_ids(datagen_ids, "--datagen-ids"), convention=convention)
    return DumpSpec()


def parse_ids(text: str | None, flag: str) -> list[int] | None:
    """`2,30,58` (or `[2, 30, 58]`) as integers; None when the flag was not given."""
    if text is None:
        return None
    try:
        return [int(x) for x in text.strip("[] ").split(",")]
    except ValueError:
        raise InputError(f"{flag} {text}: expected comma-separated integers, e.g. 2,30,58") from None


class LaunchRefused(InputError):
    """The serve arguments are not resolved under this release: its own parser or resolution
    refused them (the engine's words), or (`unresolved`) its release family has no launch
    resolver. Bad input for that release (exit 2); a matrix shows it in that release's cell."""

    def __init__(self, message: str, *, unresolved: bool = False, argv: tuple[str, ...] | list[str] = ()):
        super().__init__(message + quoting_hint(argv))
        self.unresolved = unresolved


def quoting_hint(argv: tuple[str, ...] | list[str]) -> str:
    """What to add to an engine's refusal of the serve arguments when one of them is a JSON object
    whose quotes were removed by splitting the arguments as a shell does (`--speculative-config
    {"method": "eagle3"}` unquoted arrives as `{method:`, `eagle3}`): '' when none is."""
    import json

    for arg in argv:
        if not arg.startswith("{"):
            continue
        try:
            json.loads(arg)
        except ValueError:
            return (f" (the argument {arg!r} is not JSON: --serve-args is split as a shell splits a command line, "
                    "which removes quotes; quote a JSON value whole as in the shell, --speculative-config "
                    "'{\"method\": \"eagle3\", ...}', or give the arguments in a file, --serve-args @FILE)")
    return ""


def parse_serve_args(text: str | None) -> tuple[str, ...] | None:
    """`--serve-args 'ARGS'`: the arguments exactly as given after `python -m sglang.launch_server`
    (shell quoting honoured), or `@FILE` for a file holding them (`#` comments allowed); None
    when not given. What they mean is the engine's to say: its own parser reads them. A file is
    read as the other inputs are (a regular file of at most MAX_SERVE_ARGS_BYTES, checked before
    reading), and at most MAX_SERVE_ARGS arguments are split off (the splitting stops there)."""
    import itertools
    import shlex

    if text is None:
        return None
    source = "--serve-args"
    if text.startswith("@"):
        path = Path(text[1:])
        source = f"--serve-args file {path}"
        raw = read_bounded(path, "--serve-args file", MAX_SERVE_ARGS_BYTES, "a serve command")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{source}: not a text file") from None
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True  # as shlex.split(text, comments=True) splits
    try:
        argv = tuple(itertools.islice(lexer, MAX_SERVE_ARGS + 1))
    except ValueError as exc:
        raise InputError(f"{source}: {exc} (quote as a shell would)") from None
    if len(argv) > MAX_SERVE_ARGS:
        raise InputError(f"{source}: more than {MAX_SERVE_ARGS} arguments, which no serve command needs (it "
                         "gives each of the engine's flags once, with its value)")
    if not argv:
        raise InputError(f"{source}: no arguments (give the serve command's arguments, e.g. "
                         "'--speculative-algorithm EAGLE3 --speculative-num-steps 3')")
    return argv
