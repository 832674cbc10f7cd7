"""`parity forward`'s serving path for vLLM: not built yet (docs/vllm.md, "Not yet").

The module exists so the engine's `FORWARD_MODULE` names something real: run, it answers
with one error line (the caller reports it), never a draft forward it did not run.

    python -m parity.extract.engines.vllm.forward_side  < request.json
"""

from __future__ import annotations

from ....envs import reply_over_stdio


class NotBuilt(RuntimeError):
    """The vLLM draft forward is not part of parity yet."""


def forward(request: dict) -> dict:
    raise NotBuilt("parity forward has no vLLM serving path yet: vLLM's EAGLE-3 draft forward is not run "
                   "by parity (docs/vllm.md, 'Not yet'); use --engine sglang")


def main() -> None:
    reply_over_stdio(forward)


if __name__ == "__main__":
    raise SystemExit(main())
