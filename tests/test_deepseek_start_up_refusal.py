"""DeepSeek-V3 on SGLang 0.4.4.post4-0.4.8: the engine's own answer, not a limit of parity's CPU
run (issue 37, item 4).

Those releases' DeepSeek model class has no `set_eagle3_layers_to_capture`, which their EAGLE-3
start-up (`ModelRunner.initialize`) calls on the target model right after building it, before
any forward: every EAGLE-3 launch of DeepSeek fails there, on a GPU as anywhere. parity's CPU
run could neither build nor run that model on these releases (a CUDA-only Triton MoE kernel in
0.4.4.post4-0.4.7.post1, a CUDA assertion in `__init__` in 0.4.5.post2-0.4.6.post4, the CPU MoE
method dropping `routed_scaling_factor` in 0.4.8), which read as "parity cannot run it". The
probe now runs the release's capture statement on an unbuilt instance of the model class first
(probe.start_up_refusal) and, when the build or the prefill then stops, gives that refusal: one
release per range of failure.

It fails when the fix is removed (a drift module) and when the engine's class gains the hook (an
edit of the installed code in a shadow environment): parity then says its CPU run stops, exit 2.
"""

from __future__ import annotations

import json

import pytest

from .helpers import DEEPSEEK, built, drift_overrides, run_parity, sglang_draft, shadow_release

pytestmark = pytest.mark.slow

SITE = "lib/python3.11/site-packages"
NO_HOOK = ("cannot serve an EAGLE-3 draft for DeepseekV3ForCausalLM: its model class "
           "sglang.srt.models.deepseek_v2.DeepseekV3ForCausalLM has no set_eagle3_layers_to_capture, which its "
           "EAGLE-3 start-up calls on the target model, so every EAGLE-3 launch of this target fails there "
           "(AttributeError: 'DeepseekV3ForCausalLM' object has no attribute 'set_eagle3_layers_to_capture')")
# what stopped parity's CPU run on each, before the fix (docs/releases.md, SGLang errors 6, 13, 19)
STOPPED = {"0.4.5": "TypeError: 'NoneType' object is not callable",  # the Triton fused_experts, None off CUDA
           "0.4.6.post2": "determine_n_share_experts_fusion (AssertionError: Torch not compiled with CUDA enabled)",
           "0.4.8": "routed_scaling_factor is required for biased_grouped_topk"}


def _need(version: str) -> None:
    if not built("sglang", version):
        pytest.skip(f"sglang {version}'s environment is not built (parity.ondemand.ensure_release('sglang', "
                    f"'{version}'))")


def _contract(tmp_path, version: str, **kw):
    draft = sglang_draft(tmp_path / "draft", ids=[2, 30, 58])
    return run_parity("contract", "serving", "--target-config", str(DEEPSEEK), "--draft", str(draft),
                      "--sglang", version, "--json", **kw)


@pytest.mark.parametrize("version", list(STOPPED))
def test_deepseek_is_the_engines_own_refusal(tmp_path, version):
    """The same verdict 0.4.8.post1-0.5.4.post1 give, in the engine's words: an engine_error
    (exit 1), no state captured, no harness limit."""
    _need(version)
    proc = _contract(tmp_path, version)
    assert proc.returncode == 1, proc.stderr
    contract = json.loads(proc.stdout)
    errors = [f for f in contract["findings"] if f["severity"] == "error"]
    assert [(f["kind"], f["message"]) for f in errors] == [("engine_error", f"sglang {version} {NO_HOOK}")]
    assert contract["fc_input"] == [None, None, None]
    assert "harness" not in proc.stdout + proc.stderr


def test_without_the_start_up_refusal_parity_cannot_run_it(tmp_path):
    """The fix removed: the prefill stops parity's CPU run again (exit 2, never a verdict)."""
    _need("0.4.8")
    proc = _contract(tmp_path, "0.4.8", overrides=drift_overrides("tests.drift.serving_no_start_up_refusal"))
    assert proc.returncode == 2, proc.stdout
    assert "parity's CPU harness cannot run sglang 0.4.8" in proc.stderr and STOPPED["0.4.8"] in proc.stderr


def test_a_class_with_the_hook_is_not_refused(tmp_path):
    """The engine's DeepSeek class given the hook (an edit of the installed code): no refusal is
    made up; what stops is parity's CPU run (exit 2), as a GPU would go on to run the model."""
    _need("0.4.8")
    file = f"{SITE}/sglang/srt/models/deepseek_v2.py"
    old = "class DeepseekV3ForCausalLM(DeepseekV2ForCausalLM):\n    pass\n"
    new = ("class DeepseekV3ForCausalLM(DeepseekV2ForCausalLM):\n"
           "    def set_eagle3_layers_to_capture(self, layer_ids=None):  # the edit\n"
           "        self.capture_aux_hidden_states = True\n")
    shadow, original, env = shadow_release(tmp_path, "sglang", "0.4.8", {file: (old, new)})
    proc = _contract(tmp_path, "0.4.8", env=env)
    assert proc.returncode == 2, proc.stdout
    assert STOPPED["0.4.8"] in proc.stderr, proc.stderr
    assert "# the edit" not in (original / file).read_text()  # the original is untouched
