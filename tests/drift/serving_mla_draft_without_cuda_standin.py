"""Injected fault: parity's `torch.cuda.synchronize` stand-in is not put around the MLA draft's
embedding binding (concerns/draft.py, `on_cpu_embedding_binding`), so SGLang's
`Eagle3DeepseekV2ForCausalLM.set_embed` reaches the real `torch.cuda.synchronize()`, which the
CPU build of torch refuses: a real CUDA-only failure (kimi_k25_eagle3.py, `set_embed`).

Run as `python -m tests.drift.serving_mla_draft_without_cuda_standin` in place of the serving
probe: the run must end as a limit of parity's harness (exit 2, naming it), never a verdict."""

from parity.extract.engines.sglang import probe
from parity.extract.engines.sglang.concerns import draft as draft_concern

draft_concern.on_cpu_embedding_binding = lambda draft: None

if __name__ == "__main__":
    raise SystemExit(probe.main())
