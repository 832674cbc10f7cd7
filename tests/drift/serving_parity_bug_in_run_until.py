"""Injected fault: a bug of parity's own, the one the release sweep met (SGLang 0.4.4.post2-0.4.6.post5,
before 3ff5564): the family adapter hands run_until's source reader None for a method the
release does not have, and the reader's AttributeError is raised inside parity's code. Here it
is met where the probe reports an error as the engine's (setting the capture: an `engine_error`
finding).

Run as `python -m tests.drift.serving_parity_bug_in_run_until` in place of the SGLang probe: the
run must end as parity's internal error (exit 3; "parity cannot run" in the release table),
never as the engine's refusal."""

from parity.extract.engines.sglang import probe
from parity.extract.run_until import stop_line

_adapter_for = probe.adapter_for


def adapter_for(version: str):
    adapter, code_paths, placement = _adapter_for(version)

    def configure_capture(model, use_aux, ids):
        method = getattr(type(model), "_get_attention_backend_of_no_release", None)  # None: no such method
        stop_line(method, "attn_backend")  # parity's reader on None: AttributeError inside run_until

    adapter.configure_capture = configure_capture
    return adapter, code_paths, placement


probe.adapter_for = adapter_for

if __name__ == "__main__":
    raise SystemExit(probe.main())
