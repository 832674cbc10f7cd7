"""Injected: the 0.5.3.post1 family's ModelRunner is handed parity's own torch_native backend for
an MLA model too (concerns/target.py, `runner_args_for`, undone), as before parity gave
these releases their CPU MLA path.

Run as `python -m tests.drift.serving_mla_runner_named_torch_native` under SGLang 0.5.3.post1's
(or 0.4.8.post1's) environment in place of the serving probe: the real
`ModelRunner.model_specific_adjustment` then refuses DeepSeek-V3 ("Invalid attention backend for
MLA: torch_native") before any state is captured."""

from parity.extract.engines.sglang import probe
from parity.extract.engines.sglang.families import v0_5_3_post1

v0_5_3_post1.Adapter.runner_args_for = lambda self, model_config: self.server_args

if __name__ == "__main__":
    raise SystemExit(probe.main())
