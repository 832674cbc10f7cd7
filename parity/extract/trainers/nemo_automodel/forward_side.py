"""`parity forward`'s training path for NVIDIA NeMo Automodel: not built yet.

Until NeMo Automodel's training step is run here on a CPU, `parity forward` refuses it with this
one line.
"""

from __future__ import annotations

from ....contract.reply import ForwardReply
from ....envs import reply_over_stdio


def main() -> None:
    reply_over_stdio(ForwardReply.checked(lambda request: {
        "error": "parity forward has no NeMo Automodel training path yet: use the speculators trainer"}))


if __name__ == "__main__":
    raise SystemExit(main())
