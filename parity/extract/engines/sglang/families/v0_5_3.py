"""The SGLang 0.5.3 family (0.5.3.post2 - 0.5.3.post3): its adapter.

As the 0.5.7 family (v0_5_7.py: the aux ids read and the capture set by one statement of the
real `ModelRunner.initialize`; SGLang's own RMSNorm and SiluAndMul kept as on a GPU), except
where docs/engines-on-cpu.md, 'Runtime set-up per release family', says it differs:
`ServerArgs.__post_init__` has no skip for `model_path="dummy"` (0.5.4 added it): it always
resolves the launch for the machine it runs on (asks for an accelerator, sizes GPU memory,
reads the model's config). parity's server args are the dataclass's declared defaults with
the draft, tp size and attention backend set, exactly what 0.5.4 and later build for a dummy
model path (`__post_init__` returning at once); nothing the extraction reads is resolved there.

Composed of: its own `UnresolvedArgs` (also taken by the older families), then the 0.5.7
family's parts as that family composes them, ahead of the 0.5.23 adapter.
"""

from __future__ import annotations

import dataclasses

from packaging.specifiers import SpecifierSet

from . import v0_5_7, v0_5_10, v0_5_12, v0_5_14, v0_5_23

RELEASES = SpecifierSet(">=0.5.3.post2,<0.5.4")  # the releases this family's adapter serves
VERIFIED = ("0.5.3.post3",)  # releases whose capture and forward were verified against transformers

CODE_PATHS = dict(v0_5_7.CODE_PATHS)


def unresolved(cls, **given):
    """An instance of dataclass `cls` holding its declared defaults and `given`, its
    `__post_init__` not run (what a later release's `__post_init__` does for a dummy model)."""
    values = {}
    for field in dataclasses.fields(cls):
        if field.name in given:
            values[field.name] = given.pop(field.name)
        elif field.default is not dataclasses.MISSING:
            values[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            values[field.name] = field.default_factory()
        else:
            raise TypeError(f"{cls.__name__}.{field.name} has no default and parity gives none")
    if given:
        raise TypeError(f"{cls.__name__} has no field(s) {sorted(given)}")
    obj = cls.__new__(cls)
    obj.__dict__.update(values)
    return obj


class UnresolvedArgs:
    """Server args holding the dataclass's declared defaults, `__post_init__` not run."""

    def _server_args(self, draft_dir: str | None, backend: str, device: str | None = None):
        from sglang.srt.server_args import ServerArgs

        self._published = (draft_dir, backend)
        spec = {}
        if draft_dir is not None:
            spec = dict(speculative_algorithm=self.algorithm, speculative_draft_model_path=draft_dir)
        return unresolved(ServerArgs, model_path="dummy", tp_size=1, device=device,
                          attention_backend=backend, **spec)


class Adapter(UnresolvedArgs, v0_5_7.Launch, v0_5_7.Capture, v0_5_10.Launch, v0_5_10.Draft, v0_5_12.NoForwardContext,
              v0_5_14.Launch, v0_5_14.SchedulerArgs, v0_5_14.DpAttention, v0_5_14.DefaultBackend, v0_5_14.Draft,
              v0_5_23.Adapter):
    family = "0.5.3"
    RUNS_DFLASH = False  # no DFlash in these releases: a DFlash draft is their own refusal (v0_5_14.py)
    REQUIRES = v0_5_7.Adapter.REQUIRES
