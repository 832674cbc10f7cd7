"""Engines: what each serving engine feeds the draft, one folder per engine.

An engine is a package here (`sglang/`, `vllm/`) whose module-level names implement `Engine`
(or an object registered with `register_engine`, as a test's engine is). Everything outside the
engine's folder (the CLI, the pytest plugin, the gate, the lock, the matrix, export, replay)
reaches it only through `engine(name, release)`: a `BoundEngine`, the engine with the release it
runs under. An engine declares its own command-line options (`add_options`, `release_from`), so
adding an engine is adding a folder here; nothing outside this folder changes.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .. import Bound, Registry
from ...errors import UserError

if TYPE_CHECKING:
    from ...contract import DatagenDump, ServingContract
    from ...contract.reply import Candidate
    from ...inputs import Draft, Target

DEFAULT = "sglang"

# The commands that ask for an engine's release; each engine adds its flag to those it takes
# (`add_options(parser, command)`): "datagen" is the dump description's flag (the release that
# makes a data-generation dump), "sweep" the release range `parity sweep` runs (RANGE, 'all' when
# not given, for an engine that declares SWEEP_FROM), the others are the commands of that name.
COMMANDS = ("contract", "datagen", "check", "lock", "export", "replay", "matrix", "can-i-deploy", "forward", "sweep")


class ServingExtractionError(UserError, RuntimeError):
    """The engine could not be run at all for this input (not a finding: no contract)."""


@runtime_checkable
class Engine(Protocol):
    """What parity needs from a serving engine. Every release-specific line lives below this
    boundary, in the engine's release-family adapters. The release is passed by position
    after the inputs (each engine names the parameter in its own terms; every probe's reply
    names it `release`, parity.contract.reply); None means the release installed in the
    running interpreter (or the engine's default). The target and the draft arrive read and
    checked (parity.inputs.read_inputs, at the CLI or plugin): an engine never reads the user's files again, it serves the draft directory as
    production would. Callers hold it bound to a release: `engine(name, release)`."""

    NAME: str
    """The engine's name as the CLI and contracts spell it, e.g. 'sglang'."""

    FLAG: str
    """The command-line flag that names its release, e.g. '--sglang'."""

    RELEASE_NOUN: str
    """Its release in a sentence, e.g. 'an SGLang release'."""

    FORWARD_MODULE: str
    """The module `parity forward` runs (`python -m`, JSON request on stdin) for the serving path."""

    FORWARD_REPLY: type
    """The typed reply of that module (a parity.contract.reply.ServedForwardReply), which the
    child validates before it sends it and `parity forward` reads."""

    FORWARD_LONG_POSITIONS: bool
    """Whether its forward side serves the draft's rows past the positions the draft declares
    (parity.forward.positions); without, `parity forward` runs them at 0..seq-len-1."""

    IDS_KEYS: "dict[str, str]"
    """Per draft kind ('eagle3', 'dflash': the contract's `draft_kind`), where in a draft's config.json
    the engine reads that kind's layer ids, dotted (e.g. 'eagle_config.eagle_aux_hidden_state_layer_ids',
    'dflash_config.target_layer_ids'): the key an ids fix is written under. A kind without one gets
    no ids fix."""

    # Optional: refuse_launch(target, draft, release, *, serve_args) (BoundEngine.refuse_launch: the
    # serve arguments refused before any model is built); SEED_LAUNCH (BoundEngine.seed_launch); CONVENTION (a parity.conventions.Convention): its
    # layer-id numbering as a typed rule, listed by parity.extract.numbering.conventions().

    def add_options(self, parser: Any, command: str, /) -> None:
        """Add this engine's options to `command`'s parser (one of COMMANDS), if it takes any."""

    def release_from(self, args: argparse.Namespace, /) -> str | None:
        """The release of this engine the parsed command line names (None: none named)."""

    def forward_refusal(self, steps: int, /) -> str | None:
        """Why its forward side cannot compare `steps` draft steps on the CPU, as the rest of a
        one-line refusal after '--engine NAME --steps N: '; None when it can."""

    def python(self, version: str | None, /) -> str:
        """The interpreter that has `version` of the engine installed (None: the running one);
        raises EnvError, with its remedy, when no environment has it."""

    def preflight(self, target: "Target", version: str | None = None, /) -> None:
        """Refuse (InputError) a target the engine cannot build, before any extraction starts."""

    def probe_serving(self, target: "Target", draft: "Draft", version: str | None = None, /, *,
                      candidates: list[list[int]] | None = None,
                      serve_args: "tuple[str, ...] | None" = None) -> "tuple[ServingContract, list[Candidate]]":
        """The serving contract, plus what the engine would capture for each candidate id list
        (each a parity.contract.reply.Candidate, or a mapping of its fields), in one engine run.
        `serve_args`: the user's serve command's arguments, resolved by the engine into the
        contract's `launch` (an engine that cannot resolve them refuses: InputError)."""

    def write_ids(self, config: dict, ids: list[int], kind: str = "eagle3", /) -> dict:
        """A copy of the draft config `config` with `ids` written where the engine reads a `kind`
        draft's ids (IDS_KEYS[kind]), and nowhere it would read other ids first."""

    def served_config(self, spec: dict, ids: list[int], release: str | None = None, /) -> dict:
        """The draft config in the served format of the engine's `release` (None: the installed
        one), from a speculators draft config `spec`, with the aux ids `ids` written where the
        engine reads them."""

    def extract_serving(self, target: "Target", draft: "Draft", version: str | None = None, /, *,
                        serve_args: "tuple[str, ...] | None" = None) -> "ServingContract":
        """The serving contract for this target and draft under the installed (or named) release."""


@runtime_checkable
class Datagen(Protocol):
    """An engine that also makes training data (a hidden-state dump), e.g. vLLM for speculators."""

    def extract_dump(self, target: "Target", datagen_ids: list[int] | None, version: str | None = None,
                     /) -> "DatagenDump":
        """The layout of the dump its data generation makes for these ids (None: the launch default)."""


_REGISTRY = Registry(sys.modules[__name__], "engine", Engine)


@dataclass(frozen=True)
class BoundEngine(Bound):
    """An engine (`impl`, implementing `Engine`) and the release it runs under (None: the
    installed one, or the engine's default)."""

    def ids_key(self, kind: str = "eagle3") -> str | None:
        """Where the engine reads a `kind` draft's layer ids in its config.json, dotted (None: it
        reads none parity knows of)."""
        return self.impl.IDS_KEYS.get(kind)

    @property
    def FORWARD_LONG_POSITIONS(self) -> bool:  # noqa: N802 - the engine's own name for it
        return self.impl.FORWARD_LONG_POSITIONS

    @property
    def probe(self) -> str:
        """The module its probe runs (`python -m`) in the release's environment."""
        return self.impl.PROBE

    def forward_refusal(self, steps: int) -> str | None:
        return self.impl.forward_refusal(steps)

    @property
    def seed_launch(self) -> "tuple[str, ...] | None":
        """The fixed serve arguments `parity sweep` has each release resolve with its own code (its
        SEED_LAUNCH, docs/launch.md); None: the sweep resolves none for this engine."""
        return getattr(self.impl, "SEED_LAUNCH", None)

    @property
    def makes_dumps(self) -> bool:
        """Whether the engine also makes training data (implements Datagen)."""
        return isinstance(self.impl, Datagen)

    def python(self, release: str | None = None) -> str:
        """The interpreter of this release (`release` given: that one, for callers that bind late)."""
        return self.impl.python(release if release is not None else self.release)

    def preflight(self, target: "Target") -> None:
        self.impl.preflight(target, self.release)

    def probe_serving(self, target: "Target", draft: "Draft", *, candidates: list[list[int]] | None = None,
                      serve_args: "tuple[str, ...] | None" = None) -> "tuple[ServingContract, list[Candidate]]":
        """The engine's probe_serving, its candidates read as Candidate records (an engine's
        implementation may hand them as mappings of the same fields)."""
        from ...contract.reply import Candidate

        contract, tried = self.recorded(lambda: self.impl.probe_serving(target, draft, self.release,
                                                                        candidates=candidates, serve_args=serve_args))
        return contract, [c if isinstance(c, Candidate) else Candidate.model_validate(c) for c in tried]

    def refuse_launch(self, target: "Target", draft: "Draft", serve_args: "tuple[str, ...] | None") -> None:
        """Refuse serve arguments the release's own parser or resolution refuses (LaunchRefused),
        before any model is built, where the engine can say so alone (its `refuse_launch`);
        otherwise, and without serve arguments, nothing (the extraction refuses them)."""
        own = getattr(self.impl, "refuse_launch", None)
        if own is not None and serve_args is not None:
            self.recorded(lambda: own(target, draft, self.release, serve_args=serve_args))

    def extract_serving(self, target: "Target", draft: "Draft", *,
                        serve_args: "tuple[str, ...] | None" = None) -> "ServingContract":
        return self.recorded(lambda: self.impl.extract_serving(target, draft, self.release, serve_args=serve_args))

    def extract_dump(self, target: "Target", datagen_ids: list[int] | None) -> "DatagenDump":
        if not isinstance(self.impl, Datagen):
            raise TypeError(f"engine {self.name!r} makes no training data (it has no extract_dump)")
        return self.impl.extract_dump(target, datagen_ids, self.release)

    def write_ids(self, config: dict, ids: list[int], kind: str = "eagle3") -> dict:
        return self.impl.write_ids(config, ids, kind)

    def served_config(self, spec: dict, ids: list[int]) -> dict:
        return self.impl.served_config(spec, ids, self.release)


def names() -> list[str]:
    """Every engine: a folder here, or registered."""
    return _REGISTRY.names()


def engine(name: str = DEFAULT, release: str | None = None) -> BoundEngine:
    """The engine called `name`, bound to `release` (None: the installed one); an unknown name is
    a one-line InputError."""
    return BoundEngine(_REGISTRY.get(name), release)


def register_engine(impl: Any) -> Any:
    """Make `impl` (a module or object whose names implement `Engine`) an engine under its NAME,
    as a folder here is: the CLI's --engine, its options and every command reach it."""
    return _REGISTRY.register(impl)


unregister_engine = _REGISTRY.unregister
add_options = _REGISTRY.add_options  # every engine's options for a command (one of COMMANDS)


def engines() -> list[BoundEngine]:
    """Every engine, unbound to a release, in name order."""
    return [engine(n) for n in names()]


def foreign_release(args: argparse.Namespace, chosen: BoundEngine, *, datagen: bool = True) -> str | None:
    """Why the parsed command line cannot be served by `chosen`: another engine's release flag
    given (never silently ignored; on a command with a dump description, `datagen`, an engine
    that also makes training data keeps its flag for that), as one line; None when nothing is
    amiss. Under the default engine (--engine most likely not given) the line says to name the
    flag's engine."""
    for other in engines():
        if other.name == chosen.name or (datagen and other.makes_dumps) or not other.impl.release_from(args):
            continue
        if chosen.name == DEFAULT:
            return f"{other.impl.FLAG} names {other.impl.RELEASE_NOUN}: add --engine {other.name}"
        return (f"{other.impl.FLAG} names {other.impl.RELEASE_NOUN}, but the engine is {chosen.name}: "
                f"use {chosen.impl.FLAG} VERSION")
    return None


def release_flag(name: str, command: str) -> str | None:
    """The flag that names engine `name`'s release on `command` (e.g. '--sglang' on export),
    None when that command takes none of it: what advice may tell a user to type."""
    bound = engine(name)
    probe = argparse.ArgumentParser(add_help=False)
    bound.impl.add_options(probe, command)
    return bound.impl.FLAG if bound.impl.FLAG in probe._option_string_actions else None
