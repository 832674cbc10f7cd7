"""Injected fault: the vLLM model's forward takes a CUDA-only path (it asks torch.cuda for the
current device, as code written for a GPU does), which parity's CPU harness cannot run.

Run as `python -m tests.drift.vllm_cuda_only_forward` in place of the vLLM probe: the run must
end as a limit of parity's harness (exit 2, naming it), never as an engine error or a verdict."""

import torch

from parity.extract.engines.vllm import probe

_capture = probe.capture


def _cuda_only(adapter, model, vllm_config, input_ids, refs) -> dict:
    forward = adapter.forward

    def on_the_gpu(*args, **kwargs):
        torch.cuda.current_device()  # the real torch: raises on a CPU build, from inside torch.cuda
        return forward(*args, **kwargs)

    adapter.forward = on_the_gpu
    return _capture(adapter, model, vllm_config, input_ids, refs)


probe.capture = _cuda_only

if __name__ == "__main__":
    raise SystemExit(probe.main())
