"""Injected fault: SGLang's draft class takes a CUDA-only path while it is built (it asks
torch.cuda for the current device, as the MLA draft's set_embed does), which parity's CPU
harness cannot run.

Run as `python -m tests.drift.serving_cuda_only_draft` in place of the serving probe: the run
must end as a limit of parity's harness (exit 2, naming it), never as UNSERVABLE."""

import torch

from parity.extract.engines.sglang import probe

_draft_facts = probe.draft_facts


def _cuda_only(*args, **kwargs):
    torch.cuda.current_device()  # the real torch: raises on a CPU build, from inside torch.cuda
    return _draft_facts(*args, **kwargs)


probe.draft_facts = _cuda_only

if __name__ == "__main__":
    raise SystemExit(probe.main())
