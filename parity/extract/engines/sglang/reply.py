"""The reply of SGLang's probe (parity.extract.engines.sglang.probe), typed once for the child
that writes it (`SGLangReply.checked`, run in the release's environment, which has pydantic) and
the parent that reads it (`SGLangReply.read`, in parity.extract.engines.sglang): the envelope
(parity.contract.reply) plus what the probe found, and no other key.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ....contract.reply import EngineReply, FindingsReply, ServedForwardReply, ServedVariant, Slot


class TargetSeen(BaseModel):
    """The target as SGLang's run read its config (shown, never compared)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    architecture: str | None = Field(default=None, description="Its architectures[0].")
    model_type: str | None = Field(default=None, description="Its model_type.")
    num_hidden_layers: int | None = Field(default=None, description="Its depth, as the engine reads it.")
    hidden_size: int | None = Field(default=None, description="Its (text model's) hidden_size.")
    vocab_size: int | None = Field(default=None, description="Its (text model's) vocab_size.")


class SGLangReply(EngineReply, FindingsReply):
    """What SGLang's probe answers: the family that ran, the ids its start-up resolved, what its
    model code captured (each slot named numerically), the draft as its classes read it."""

    algorithm: str | None = Field(default=None, description="The speculative algorithm the draft is served under "
                                  "(the serve arguments' resolution, else the one the draft is written for).")
    unsupported: bool = Field(default=False, description="The release cannot build or read the target's "
                              "architecture (its error says how): the target config is named in the message.")
    draft_unloadable: bool = Field(default=False, description="The release refuses the draft's config at start-up "
                                   "(its error says how): unservable as written. A flag here; vLLM's reply names "
                                   "its loader's reason instead.")
    expected_slots: int | None = Field(default=None, ge=0, description="How many slots the draft's fc expects: the "
                                       "ids' count, else the capture's.")
    use_aux: bool | None = Field(default=None, description="Whether the start-up turns on the aux hidden-state "
                                 "capture at all.")
    requested_ids: list[Any] | None = Field(default=None, description="The ids the start-up read from the draft "
                                            "config; None when it took its own default.")
    ids_source: str = Field(default="n/a", description="Where the start-up took the ids from, in words.")
    capture_ids: list[int] | None = Field(default=None, description="The layer indices the built model captures "
                                          "after the start-up configured it, as the engine holds them.")
    slots: tuple[Slot, ...] | None = Field(default=None, description="Each H-wide slice of what the fc is "
                                           "handed, in order, named by numerical identity.")
    target: TargetSeen | None = Field(default=None, description="The target as the run saw it: architecture, "
                                          "model_type, num_hidden_layers, hidden_size, vocab_size.")

    @model_validator(mode="after")
    def _slots_unless_stopped(self) -> "SGLangReply":
        if self.slots is None and self.error is None and self.launch_refused is None and not self.launch_only:
            raise ValueError("a reply with no error and no refused launch names the captured slots")
        return self



class SGLangVariant(ServedVariant):
    """A variant as SGLang's forward side (parity.extract.engines.sglang.forward_side) served it."""

    checkpoint_renames: dict[str, str] | None = Field(default=None, description="The checkpoint's tensors renamed "
                                                      "as this release's draft class loads them (parity's export "
                                                      "form), old name to new.")
    checkpoint_zero_biases: list[str] | None = Field(default=None, description="The tensors this release's draft "
                                                     "class holds that the checkpoint lacks, written as zeros "
                                                     "(parity's export form).")


class SGLangForwardReply(ServedForwardReply[SGLangVariant]):
    """What SGLang's forward side answers (`parity forward`'s serving path)."""


__all__ = ["SGLangForwardReply", "SGLangReply", "SGLangVariant"]
