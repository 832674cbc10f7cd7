"""The reply of vLLM's probe (parity.extract.engines.vllm.probe), typed once for the child that
writes it (`VLLMReply.checked`, run in the release's environment, which has pydantic) and the
parent that reads it (`VLLMReply.read`, in parity.extract.engines.vllm): the envelope
(parity.contract.reply) plus what the probe found, in either mode (serving, data-generation
dump), and no other key.
"""

from __future__ import annotations


from pydantic import BaseModel, ConfigDict, Field, model_validator

from ....contract.reply import BuiltReply, EngineReply, RunnerCapture, ServedForwardReply, ServedVariant


class DraftSizes(BaseModel):
    """The draft's sizes as vLLM's config reader and draft class take them from the real draft
    directory (its family's `real_draft_sizes`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    draft_vocab_size: int | None = Field(default=None, description="The draft vocabulary vLLM builds (its "
                                         "draft_vocab_size, else the vocab_size it falls back to).")


class VLLMReply(EngineReply, BuiltReply):
    """What vLLM's probe answers: the family that ran, each model runner's resolution of the ids
    and what it captured (each slot named numerically), the draft as vLLM's classes read it."""

    kernel_standins: list[str] = Field(default_factory=list, description="The CPU kernels parity stood in for "
                                       "(each checked against the engine's own where it runs), in words.")
    dump_method: str | None = Field(default=None, description="The speculative method whose capture data "
                                    "generation runs (a dump request), as the family names it.")
    method: str | None = Field(default=None, description="The speculative method the serving set-up ran "
                               "(`eagle3`, `dflash`).")
    config_refused: bool = Field(default=False, description="vLLM's config classes refused the set-up (its error "
                                 "says how).")
    gpu_default_runner: str | None = Field(default=None, description="The model runner a GPU deployment of the "
                                           "release uses by default (a key of `runners`).")
    num_hidden_layers: int | None = Field(default=None, ge=0, description="The target's depth as vLLM's config "
                                          "reads it.")
    default_ids: list[int] | None = Field(default=None, description="The aux layer ids the model captures when no "
                                          "config names any (its own default).")
    runners: dict[str, RunnerCapture] | None = Field(default=None, description="Per model runner: the ids it "
                                                     "resolved, what it captured, or why it captured nothing.")
    dflash_refusal: str | None = Field(default=None, description="vLLM's DFlash draft refusing what the target "
                                       "captured: the engine's words.")
    draft_error: str | None = Field(default=None, description="Why the draft class could not be built (its facts "
                                    "are then unread).")
    draft_unloadable: str | None = Field(default=None, description="vLLM's own loader refused the draft's checkpoint: "
                                         "why (unservable as written).")
    draft_sizes: DraftSizes | None = Field(default=None, description="The draft's vocabulary sizes as vLLM's "
                                               "config reader takes them from the real draft directory.")
    draft_sizes_error: str | None = Field(default=None, description="Why vLLM's config reader refused the draft "
                                          "config.")
    launch_unresolved: bool = Field(default=False, description="The serve arguments were not resolved because the "
                                    "family has no launch resolver: parity's limit, not the engine's refusal.")

    draft_refused: str | None = Field(default=None, description="vLLM's config classes refused the set-up with "
                                      "the draft as written while the target alone configures: the engine's "
                                      "words (an unservable draft, nothing captured).")

    @model_validator(mode="after")
    def _runners_unless_stopped(self) -> "VLLMReply":
        if self.error is None and self.launch_refused is None and not self.launch_only and self.draft_refused is None:
            if self.runners is None or self.gpu_default_runner not in self.runners:
                raise ValueError("a reply with no error and no refused launch names the runners and, among them, "
                                 "the GPU default")
        return self



class VLLMVariant(ServedVariant):
    """A variant as vLLM's forward side (parity.extract.engines.vllm.forward_side) served it (its
    first step)."""

    runner: str | None = Field(default=None, description="The model runner the release's GPU default picks for "
                               "this draft, whose start-up read the ids.")


class VLLMForwardReply(ServedForwardReply[VLLMVariant]):
    """What vLLM's forward side answers (`parity forward --engine vllm`'s serving path)."""


__all__ = ["VLLMForwardReply", "VLLMReply", "VLLMVariant"]
