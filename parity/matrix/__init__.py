"""The version matrix: one draft's contract under every installed release of both sides.

`build_matrix` runs the training extraction under each installed speculators release and
the gate (serving extraction, diff, engine-verified fix) under each installed SGLang
release, each in a subprocess of that release's environment (envs.toml), several at a
time. Nothing is looked up in a table: every cell is computed by the release's own code.

Rows are releases in version order; a serving cell holds the fc states the release feeds,
its verdict against each training contract and the fix the gate finds on that release.
Cells that changed between adjacent releases carry what changed. A release that cannot
be run (no environment, no adapter, a code path that moved) is a loud "cannot extract
under X: <what was looked for>" cell, never a pass.

`can_i_deploy` answers for one (sglang, speculators) pair from the same computation.

    build.py     build_matrix: inputs, releases (parity/releases.py), extractions, rows
    schedule.py  running the extractions, several at a time
    cells.py     each row from what its extractions returned, decided by the gate
    changes.py   what changed between adjacent releases
    rows.py      the row models and the Matrix
    deploy.py    can_i_deploy
The renderers are in parity/report/matrix.py.
"""

from .build import build_matrix
from .deploy import Answer, can_i_deploy
from .rows import CANNOT, Matrix, PairVerdict, ServingRow, TrainingRow, fc_text, fix_text

__all__ = ["CANNOT", "Answer", "Matrix", "PairVerdict", "ServingRow", "TrainingRow", "build_matrix",
           "can_i_deploy", "fc_text", "fix_text"]
