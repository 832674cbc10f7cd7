"""Injected fault: vLLM's kernel bodies are NOT replaced, so its CPU attention runs as shipped
(the CUDA wheel has no CPU kernel: it returns uninitialised memory instead of raising).

Run as `python -m tests.drift.vllm_no_kernel_standins` in place of the vLLM probe: the probe
must turn that run into an error, never into a contract."""

from parity.extract.engines.vllm import probe


def _not_replaced(adapter) -> list[str]:
    return []


probe.replace_kernels = _not_replaced

if __name__ == "__main__":
    raise SystemExit(probe.main())
