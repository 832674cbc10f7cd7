"""The launch concern: the server args a launch would resolve and where the process-wide ones
are published, how the user's serve arguments are resolved (the launch contract), and the
speculative algorithm served (EAGLE-3 or DFlash), whose refusal is the same in every release.

- `Launch` (0.5.21 on): `resolve_once`'s declared resolutions (launch.declared); `ServerArgs`
  with model_path "dummy", so the GPU-oriented argument resolution is skipped (real paths are
  given where read); published with `runtime_context.publish(..., ranks=SpawnRanks(...))`.
- `ArgsForScheduler` (0.5.4-0.5.20): launch arguments resolved by `ServerArgs.__post_init__`
  assigning the fields (no `resolve_once`): the launch contract records each assignment and the
  function that made it (launch.traced); the process-wide server args published with
  `server_args.set_global_server_args_for_scheduler(...)` (no runtime context; in 0.5.16-0.5.20 it
  hands them to the runtime context itself: 0.5.16 has no `runtime_context.publish`,
  0.5.17-0.5.20's takes no `ranks`).
- `UnresolvedArgsForScheduler` (0.5.3.post2-0.5.3.post3): `ServerArgs.__post_init__` has no skip for
  `model_path="dummy"` (0.5.4 added it): it always resolves the launch for the machine it runs
  on (asks for an accelerator, sizes GPU memory, reads the model's config). parity's server args
  are the dataclass's declared defaults with the draft, tp size and attention backend set,
  exactly what 0.5.4 and later build for a dummy model path (`__post_init__` returning at once);
  nothing the extraction reads is resolved there (unresolved).
- `UnresolvedArgsInRunnerGlobals` (0.4.9-0.5.3.post1): unresolved args as above, and no
  `set_global_server_args_for_scheduler`: the process-wide server args are the dict
  `managers.schedule_batch.global_server_args_dict`, filled by the real `ModelRunner.__init__`
  once a model config is known (the target concern's `RunnerGlobalsBeforeBuild`).
- `UnresolvedArgsWithMultimodalStatement` (0.4.4.post2-0.4.8): as `UnresolvedArgsInRunnerGlobals`,
  and `enable_multimodal` set by its one `__post_init__` statement where it is no field.

DFlash (`--speculative-algorithm DFLASH`, the algorithm a DFlash draft is served under unless
the serve arguments name another): whether an algorithm serves a DFlash draft is the release's
own answer (`dflash_question`); a release whose SpeculativeAlgorithm has no DFLASH refuses a
DFlash draft itself (0.5.10 and older: typed engine_lacks), and a family whose adapter does not
run DFlash (RUNS_DFLASH False) says so as parity's limit. The names a DFlash extraction runs and
where the ids are read are the capture concern's (`REQUIRES_DFLASH`, `check_dflash_paths`).
"""

from __future__ import annotations

import dataclasses

from ....run_until import CodePathMoved, require, run_assignment
from ..launch import declared, traced

# SpeculativeAlgorithm's methods that may say whether an algorithm serves a DFlash draft, the
# family-wide one first: which one a release has is read from its class (dflash_question).
DFLASH_QUESTIONS = ("is_dflash_family", "is_dflash")

_ARGS = ("sglang.srt.server_args.ServerArgs", "sglang.srt.speculative.spec_info.SpeculativeAlgorithm")


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


def unresolved_server_args(self, draft_dir: str | None, backend: str, device: str | None = None):
    """Server args holding the dataclass's declared defaults, `__post_init__` not run: the
    `_server_args` of the variants whose release resolves the launch for the machine it runs on."""
    from sglang.srt.server_args import ServerArgs

    self._published = (draft_dir, backend)
    spec = {}
    if draft_dir is not None:
        spec = dict(speculative_algorithm=self.algorithm, speculative_draft_model_path=draft_dir)
    return unresolved(ServerArgs, model_path="dummy", tp_size=1, device=device, attention_backend=backend, **spec)


class Launch:
    """Server args resolved once and published in the runtime context; the speculative algorithm."""

    LAUNCH_PATHS: tuple[str, ...] = (*_ARGS, "sglang.srt.runtime_context.publish",
                                     "sglang.srt.runtime_context.SpawnRanks",
                                     "sglang.srt.runtime_context.publish(ranks)")

    # How the user's serve arguments are resolved (the launch contract): resolve_once's
    # declared resolutions (parity.extract.engines.sglang.launch).
    LAUNCH = staticmethod(declared)

    # Whether this family's adapter runs DFlash capture (verified against transformers): a
    # family that does not says so as parity's limit, never as the release's answer.
    RUNS_DFLASH = True
    algorithm: str | None = "EAGLE3"  # the speculative algorithm the server args name (use_algorithm)

    def use_algorithm(self, name: str | None) -> None:
        """Serve under SGLang's speculative algorithm `name` (EAGLE3, DFLASH, DSPARK, or the one
        the serve arguments resolve to: EAGLE, None...): set before `setup`, which publishes it in
        the server args, and every family's capture is decided under it."""
        self.algorithm = name

    def is_dflash(self) -> bool:
        """Whether the algorithm served is of SGLang's DFlash family (its own answer)."""
        if self.algorithm == "EAGLE3":  # asks nothing of a release older than DFlash
            return False
        return self.serves_dflash(self.algorithm)  # the name its own resolution gave

    def dflash_question(self) -> str | None:
        """The installed SpeculativeAlgorithm's own method that says whether an algorithm serves
        a DFlash draft, read from the class: `is_dflash_family` where it has one (DFLASH,
        DSPARK: 0.5.16 on), else `is_dflash` (DFLASH alone: 0.5.12-0.5.15); None on a release
        without DFlash. `serves_dflash` asks it, and the launch verdict names it."""
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        return next((n for n in DFLASH_QUESTIONS if callable(getattr(SpeculativeAlgorithm, n, None))), None)

    def serves_dflash(self, name: str | None) -> bool:
        """Whether SGLang's algorithm `name` serves a DFlash draft, by the release's own method
        (`dflash_question`); False on a release without DFlash."""
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        question = self.dflash_question()
        return question is not None and bool(getattr(SpeculativeAlgorithm.from_string(name), question)())

    def dflash_refusal(self, version: str) -> tuple[str, bool] | None:
        """Why this release cannot extract a DFlash draft, and whether that is the release's own
        answer (its SpeculativeAlgorithm has no DFLASH: as on a GPU) rather than parity's limit
        (this family's adapter does not run DFlash, or a DFlash code path moved: the names the
        capture concern runs, and where it reads the ids); None when it can."""
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        if not hasattr(SpeculativeAlgorithm, "DFLASH"):
            return (f"sglang {version} has no DFlash: its SpeculativeAlgorithm has no DFLASH, so it cannot serve "
                    "a DFlash draft", True)
        if not self.RUNS_DFLASH:
            return (f"parity's sglang {self.family}-family adapter does not run DFlash capture", False)
        try:
            require(*self.REQUIRES_DFLASH)
            self.check_dflash_paths()
        except LookupError as exc:
            return (f"a DFlash code path parity runs moved: {exc}", False)
        return None

    def _server_args(self, draft_dir: str | None, backend: str, device: str | None = None):
        from sglang.srt.server_args import ServerArgs

        self._published = (draft_dir, backend)
        spec = {}
        if draft_dir is not None:
            spec = dict(speculative_algorithm=self.algorithm, speculative_draft_model_path=draft_dir)
        layout = {"pp_size": self.pp} if self.pp != 1 else {}
        return ServerArgs(model_path="dummy", tp_size=self.tp, device=device, attention_backend=backend, **layout,
                          **spec)

    def publish(self, draft_dir: str | None, backend: str = "torch_native") -> None:
        """(Re-)publish the process-wide server args naming this draft (last publish wins)."""
        from sglang.srt import runtime_context as rc

        self.server_args = self._server_args(draft_dir, backend)
        rc.publish(self.server_args, role="test", ranks=rc.SpawnRanks(world_rank=self.rank))


class ArgsForScheduler(Launch):
    """Launch arguments resolved by `__post_init__`'s assignments (launch.traced); the process-wide
    server args published with `set_global_server_args_for_scheduler`."""

    LAUNCH_PATHS: tuple[str, ...] = (*_ARGS, "sglang.srt.server_args.set_global_server_args_for_scheduler")
    LAUNCH = staticmethod(traced)  # no resolve_once yet: __post_init__ resolves by assignment

    def publish(self, draft_dir: str | None, backend: str = "torch_native") -> None:
        """(Re-)publish the process-wide server args naming this draft (no runtime_context.publish)."""
        from sglang.srt.server_args import set_global_server_args_for_scheduler

        self.server_args = self._server_args(draft_dir, backend)
        set_global_server_args_for_scheduler(self.server_args)


class UnresolvedArgsForScheduler(ArgsForScheduler):
    """As `ArgsForScheduler`, the server args holding the dataclass's declared defaults."""

    _server_args = unresolved_server_args


class UnresolvedArgsInRunnerGlobals(Launch):
    """Unresolved server args (launch.traced) kept here; the process-wide dict is filled by the
    target concern's `publish_globals` once a model config is known (the engine fills it from its
    model runner)."""

    LAUNCH_PATHS: tuple[str, ...] = _ARGS
    LAUNCH = staticmethod(traced)

    _server_args = unresolved_server_args

    def publish(self, draft_dir: str | None, backend: str = "torch_native") -> None:
        """The server args naming this draft; the process-wide dict is filled anew for the next model built."""
        self.server_args = self._server_args(draft_dir, backend)
        self._globals_for = None


class UnresolvedArgsWithMultimodalStatement(UnresolvedArgsInRunnerGlobals):
    """In 0.4.5.post1-0.4.5.post3 `ServerArgs.enable_multimodal`, which `TpModelWorker.__init__`'s
    statement reads, is no dataclass field but set by one statement of `__post_init__` (from
    `enable_llama4_multimodal`), which parity's unresolved server args do not run: that statement
    alone is run (run_until.run_assignment)."""

    def _server_args(self, draft_dir: str | None, backend: str, device: str | None = None):
        from sglang.srt.server_args import ServerArgs

        args = super()._server_args(draft_dir, backend, device)
        if "enable_multimodal" not in {f.name for f in dataclasses.fields(ServerArgs)}:
            try:
                run_assignment(ServerArgs.__post_init__, "enable_multimodal", args)
            except CodePathMoved:  # not set there either: nothing this release runs reads it
                pass
        return args
