"""Injected: the 0.5.3.post1 family does not run the statement of `ModelRunner._get_attention_backend`
that publishes the prefill and decode attention backends (concerns/target.py,
`publish_phase_backends`, undone).

Run as `python -m tests.drift.serving_mla_phase_backends_unpublished` under SGLang 0.5.3.post1's
environment in place of the serving probe: DeepSeek's attention dispatch then reads a
`global_server_args_dict` without them and the plain prefill raises KeyError."""

from parity.extract.engines.sglang import probe
from parity.extract.engines.sglang.families import v0_5_3_post1

v0_5_3_post1.Adapter.publish_phase_backends = lambda self, runner: None

if __name__ == "__main__":
    raise SystemExit(probe.main())
