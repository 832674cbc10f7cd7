"""DeepSeek-V3 (MLA, the architecture of the bundled Kimi-K2.5 case) on the SGLang families whose
`ModelRunner.__init__` parity runs to publish the server args (0.4.4.post2-0.5.3.post1), and the
engine's own verdict on every release whose DeepSeek class has no EAGLE-3 capture hook
(0.4.4.post4-0.5.4.post1) (issue 37, item 4).

Those runners refuse an MLA model under parity's torch_native backend name ("Invalid attention
backend for MLA"): a choice of parity's CPU harness, not the deployment's. With the runner
handed the MLA backend name a GPU launch would get, the real 61-layer model runs on the CPU, its
MLA prefill answered by parity's SDPA backend, and its output is named by numerical identity
against transformers (`final`). Those releases then give their own verdict: DeepSeek's model
class has no `set_eagle3_layers_to_capture`, which an EAGLE-3 start-up calls, so they cannot
serve an EAGLE-3 draft for it on any hardware.
"""

from __future__ import annotations

import pytest

from parity.contract import names
from parity.envs import PROBE_OVERRIDES
from parity.errors import HarnessLimit
from parity.extract.engines import ServingExtractionError
from parity.extract.engines.sglang import extract_serving
from parity.inputs import read_inputs

from .helpers import DEEPSEEK, built, drift_overrides, sglang_draft

pytestmark = pytest.mark.slow

NO_HOOK = ("cannot serve an EAGLE-3 draft for DeepseekV3ForCausalLM: its model class "
           "sglang.srt.models.deepseek_v2.DeepseekV3ForCausalLM has no set_eagle3_layers_to_capture, which its "
           "EAGLE-3 start-up calls on the target model, so every EAGLE-3 launch of this target fails there")


def _need(version: str) -> None:
    if not built("sglang", version):
        pytest.skip(f"sglang {version}'s environment is not built (./dev setup sglang-{version})")


def _deepseek(tmp_path, version: str):
    return extract_serving(*read_inputs(DEEPSEEK, sglang_draft(tmp_path, ids=[2, 30, 58])), version)


@pytest.mark.parametrize("version", ["0.5.3.post1", "0.4.8.post1"])
def test_deepseek_runs_on_the_families_that_publish_through_the_runner(tmp_path, version):
    """The whole MLA + MoE forward runs and its output is transformers' final state; the one
    error is the engine's own: no capture hook on its DeepSeek class."""
    _need(version)
    c = _deepseek(tmp_path, version)
    assert names(c.fc_input)[0] == "final", c.findings  # identified within identify.MATCH_RTOL
    errors = [f for f in c.findings if f.severity == "error"]
    assert errors[0].kind == "engine_error" and errors[0].message.startswith(f"sglang {version} {NO_HOOK}"), errors
    assert {f.kind for f in errors} <= {"engine_error", "not_captured"}, errors  # no unidentified state


def test_deepseek_on_the_0_5_3_family_is_the_engines_own_verdict(tmp_path):
    """0.5.3.post2-0.5.4.post1 publish no runner dict (no MLA check): the same verdict, in the
    engine's words, rather than a bare AttributeError."""
    _need("0.5.3.post3")
    c = _deepseek(tmp_path, "0.5.3.post3")
    assert names(c.fc_input)[0] == "final", c.findings
    assert [f.message for f in c.findings if f.kind == "engine_error"] == [
        f"sglang 0.5.3.post3 {NO_HOOK} (AttributeError: 'DeepseekV3ForCausalLM' object has no attribute "
        "'set_eagle3_layers_to_capture')"]


def test_without_the_cpu_mla_path_deepseek_does_not_run(tmp_path, monkeypatch):
    """The runner's half of the fix removed (injected), the release's own code stops DeepSeek again
    in its runner's start-up (the MLA check): exit 2, never a verdict."""
    _need("0.5.3.post1")
    monkeypatch.setenv(PROBE_OVERRIDES, drift_overrides("tests.drift.serving_mla_runner_named_torch_native"))
    with pytest.raises((ServingExtractionError, HarnessLimit)) as exc:
        _deepseek(tmp_path, "0.5.3.post1")
    assert "Invalid attention backend for MLA: torch_native" in str(exc.value), str(exc.value)


def test_without_the_phase_backends_no_state_is_named(tmp_path, monkeypatch):
    """The other half removed (injected): DeepSeek's plain prefill stops off CUDA (KeyError:
    'prefill_attention_backend'), so no state is named where the fix names `final`; the answer
    stays the release's own start-up refusal, which comes before any forward (its class has no
    capture hook: probe.start_up_refusal, tests/test_deepseek_start_up_refusal.py)."""
    _need("0.5.3.post1")
    monkeypatch.setenv(PROBE_OVERRIDES, drift_overrides("tests.drift.serving_mla_phase_backends_unpublished"))
    c = _deepseek(tmp_path, "0.5.3.post1")
    assert not any(names(c.fc_input)), c.fc_input
    assert [f.message for f in c.findings if f.severity == "error"] == [
        f"sglang 0.5.3.post1 {NO_HOOK} (AttributeError: 'DeepseekV3ForCausalLM' object has no attribute "
        "'set_eagle3_layers_to_capture')"]
