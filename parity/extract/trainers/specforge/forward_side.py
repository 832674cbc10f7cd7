"""`parity forward`'s training path for SpecForge: not built yet.

SpecForge's draft model and training step need its own modeling code on a CPU; until that
path is run, `parity forward` refuses the SpecForge trainer with this one line.
"""

from __future__ import annotations

from ....contract.reply import ForwardReply
from ....envs import reply_over_stdio


def main() -> None:
    reply_over_stdio(ForwardReply.checked(lambda request: {
        "error": "parity forward has no SpecForge training path yet: use the speculators trainer"}))


if __name__ == "__main__":
    raise SystemExit(main())
