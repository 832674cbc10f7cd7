"""`can_i_deploy`: the answer for one (serving release, trainer release) pair, from the same computation."""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..extract.engines import DEFAULT as DEFAULT_ENGINE, BoundEngine, engine as bind_engine
from ..extract.trainers import DEFAULT as DEFAULT_TRAINER, BoundTrainer
from ..verdict import Verdict
from .build import build_matrix
from .rows import Matrix, fc_text


class Answer(BaseModel):
    """Whether the draft may be served by one release of the engine, trained by one trainer release."""

    deploy: bool | None = Field(description="None: cannot tell (a side could not be extracted).")
    engine: str = Field(default=DEFAULT_ENGINE, description="The serving engine asked about.")
    serving: str = Field(description="The serving engine's release asked about.")
    speculators: str = Field(description="The trainer's release asked about (speculators by default).")
    trainer: str = Field(default=DEFAULT_TRAINER, description="The training stack asked about.")
    reason: str = Field(description="The answer in one line, with the reason.")
    matrix: Matrix = Field(description="The one-cell matrix the answer was read from.")

    def to_json_dict(self) -> dict:
        # the trainer's release is keyed by the default trainer's name, whichever the trainer (the
        # format since can-i-deploy first answered), the engine's release by the engine's own
        return {"deploy": self.deploy, **({"engine": self.engine} if self.engine != DEFAULT_ENGINE else {}),
                self.engine: self.serving, DEFAULT_TRAINER: self.speculators,
                **({"trainer": self.trainer} if self.trainer != DEFAULT_TRAINER else {}),
                "reason": self.reason, "matrix": self.matrix.to_json_dict()}


def can_i_deploy(serving: str, trainer_release: str, target_config=None, draft=None, dump_layout=None, *,
                 contract=None, verify: bool = True, trainer: BoundTrainer | None = None,
                 trainer_ids: list[int] | None = None, engine: BoundEngine | None = None,
                 serve_args: tuple[str, ...] | None = None) -> Answer:
    """`serving`: the release of `engine` (the default engine unless named); `trainer_release`: the
    release of `trainer` (the default trainer, or a lock's, unless named) to ask about;
    `serve_args`: the serve command's arguments, resolved by that release (default: a lock's)."""
    m = build_matrix(target_config, draft, dump_layout, contract=contract, serving=[serving],
                     trainer_releases=[trainer_release], verify=verify, trainer=trainer, trainer_ids=trainer_ids,
                     engine=engine, serve_args=serve_args)
    return answer(m, serving, trainer_release)


def answer(m: Matrix, serving: str, trainer_release: str) -> Answer:
    """Read the answer from a matrix of that one pair."""
    t, row = m.training[0], m.serving[0]
    served_by = f"{m.engine} {serving}"
    pair = f"{served_by} with {m.trainer} {trainer_release}"
    asked = dict(engine=m.engine, serving=serving, speculators=trainer_release, trainer=m.trainer, matrix=m)
    if t.error:
        return Answer(**asked, deploy=None, reason=t.error)
    if row.error:
        return Answer(**asked, deploy=None, reason=row.error)
    launch = row.launch
    if launch is not None and launch.resolved is None:  # refused, or no resolver: no verdict
        return Answer(**asked, deploy=None, reason=launch.refused or launch.unresolved)
    if t.lock_drift:
        return Answer(**asked, deploy=False, reason=f"no: {m.trainer} {trainer_release} no longer trains what "
                      f"the lock says ({'; '.join(t.lock_drift)})")
    v = row.verdicts[0]
    as_asked = "" if launch is None else ", and resolves the serve command as asked"
    if v.verdict is Verdict.parity:
        return Answer(**asked, deploy=True, reason=f"yes: {pair} feeds the draft's fc exactly "
                      f"{fc_text(row.fc_input)}, what it was trained on{as_asked}")
    if v.verdict is Verdict.unservable:
        return Answer(**asked, deploy=False, reason=f"no: {pair}: {served_by} cannot serve this draft "
                      f"as written: {v.unfixable}")
    if launch is not None and launch.drift and v.fix is None and not v.unfixable and v.launch_only:
        fix = f"; fix: {launch.fix()}" if launch.fix() else ""
        return Answer(**asked, deploy=False, reason=f"no: {pair}: the serve command is not run as asked: "
                      f"{'; '.join(v.differences)}{fix}")
    fix = (f"; fix: write {v.fix_key or bind_engine(m.engine).ids_key()} = {v.fix}"
           + (" (verified on this release)" if v.fix_verified else "") if v.fix is not None else
           f"; no fix on this release: {v.unfixable}" if v.unfixable else "")
    return Answer(**asked, deploy=False, reason=f"no: {pair}: trained on {fc_text(t.fc_input)}, served "
                  f"{fc_text(row.fc_input)}: {'; '.join(v.differences)}{fix}")
