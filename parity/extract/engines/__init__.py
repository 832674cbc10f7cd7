"""Engines: what each serving engine feeds the draft, one folder per engine.

An engine is a package here (`sglang/`, `vllm/`) whose module-level names implement `Engine`;
the gate, the lock, the matrix, export, the CLI, replay and `parity forward` reach it only
through `engine(name)`. Adding an engine is adding a folder here whose `__init__.py` defines
those names; nothing outside this folder changes.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .. import folders, side
from ...errors import UserError

if TYPE_CHECKING:
    from ...contract import ServingContract
    from ...inputs import Draft, Target

DEFAULT = "sglang"


class ServingExtractionError(UserError, RuntimeError):
    """The engine could not be run at all for this input (not a finding: no contract)."""


@runtime_checkable
class Engine(Protocol):
    """What parity needs from a serving engine. Every release-specific line lives below this
    boundary, in the engine's release-family adapters. Arguments before `/` are passed by
    position (each engine names them in its own terms, e.g. `sglang_version`); `version`
    None means the release installed in the running interpreter. The target and the draft
    arrive read and checked (parity.inputs.read_inputs, at the CLI or plugin): an engine
    never reads the user's files again, it serves the draft directory as production would."""

    NAME: str
    """The engine's name as the CLI and contracts spell it, e.g. 'sglang'."""

    FORWARD_MODULE: str
    """The module `parity forward` runs (`python -m`, JSON request on stdin) for the serving path."""

    def python(self, version: str | None, /) -> str:
        """The interpreter that has `version` of the engine installed (None: the running one);
        raises EnvError, with its remedy, when no environment has it."""

    def preflight(self, target: "Target", version: str | None = None, /) -> None:
        """Refuse (InputError) a target the engine cannot build, before any extraction starts."""

    def probe_serving(self, target: "Target", draft: "Draft", version: str | None = None, /, *,
                      candidates: list[list[int]] | None = None,
                      serve_args: "tuple[str, ...] | None" = None) -> "tuple[ServingContract, list[dict]]":
        """The serving contract, plus what the engine would capture for each candidate id list
        (each {"ids", "fc_input": [names or None], "capture_ids", "error"}), in one engine run.
        `serve_args`: the user's serve command's arguments, resolved by the engine into the
        contract's `launch` (an engine that cannot resolve them refuses: InputError)."""

    IDS_KEY: str
    """Where in a draft's config.json the engine reads the aux ids, dotted (e.g.
    'eagle_config.eagle_aux_hidden_state_layer_ids'): the key a fix is written under."""

    def write_ids(self, config: dict, ids: list[int], /) -> dict:
        """A copy of the draft config `config` with `ids` written where the engine reads them
        (and nowhere it would read other ids first)."""

    def served_config(self, spec: dict, ids: list[int], /) -> dict:
        """The draft config in the engine's served format, from a speculators draft config
        `spec`, with the aux ids `ids` written where the engine reads them."""

    def extract_serving(self, target: "Target", draft: "Draft", version: str | None = None, /, *,
                        serve_args: "tuple[str, ...] | None" = None) -> "ServingContract":
        """The serving contract for this target and draft under the installed (or named) release."""


def names() -> list[str]:
    """Every engine folder here."""
    return folders(sys.modules[__name__])


def engine(name: str = DEFAULT) -> Engine:
    """The engine called `name`; an unknown name is a one-line InputError."""
    return side(sys.modules[__name__], "engine", name, Engine)  # type: ignore[return-value]
