"""SGLang 0.4.6.post4's seed launch, resolved by its own `ServerArgs.__post_init__` with the
GPU's memory answered for the resolution only (issue 37: these releases' cells read "parity
cannot run it", the start-up's `gpu_mem <= 81920` on the None a CPU answers).

The seed (`--speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens
16`) resolves to 2 draft tokens, set by `__post_init__` (its topk-1 rule), the same on every
card: a drift with a verified fix. `--page-size 3` is refused by its assert on every card: the
engine's refusal of the arguments, in its words. `--page-size 4096` added makes the memory matter (its chunked
prefill is 2048 under 25 000 MiB, which its assert refuses, 8192 above): parity's limit, exit 2,
never the engine's refusal. The check itself, on resolutions that are functions of the capacity:
tests/test_gpu_memory_answer.py."""

from __future__ import annotations

import json

import pytest

from .helpers import LLAMA, ROOT, built, run_parity

pytestmark = [pytest.mark.slow, pytest.mark.exhaustive]  # one release's cells: ./dev test --all (docs/development.md)

VERSION = "0.4.6.post4"
SEED = "--speculative-algorithm EAGLE3 --speculative-num-steps 1 --speculative-eagle-topk 1 " \
       "--speculative-num-draft-tokens 16"


@pytest.mark.parametrize("extra", ["", " --page-size 4096", " --page-size 3"],
                         ids=["seed", "page-size-the-memory-decides", "page-size-refused-on-every-card"])
def test_the_seed_launch_resolves_unless_the_gpu_s_memory_decides_it(extra):
    if not built("sglang", VERSION):
        pytest.skip(f"sglang {VERSION}'s environment is not built (parity.ondemand.ensure_release('sglang', "
                    f"'{VERSION}'))")
    proc = run_parity("contract", "serving", "--target-config", str(LLAMA), "--draft",
                      str(ROOT / "fixtures" / "drafts" / "llama-3.1-8b-eagle3"), "--sglang", VERSION,
                      "--serve-args", SEED + extra, "--json")
    if extra == " --page-size 3":  # no chunked prefill size divides by 3: the engine's own refusal on every card
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.strip() == (f"parity: --serve-args: sglang {VERSION}'s argument resolution refused them: "
                                       "AssertionError")
        return
    if extra:
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert ("whether sglang resolves these arguments depends on the GPU's memory: 24 GB: refused "
                "(AssertionError); 80 GB: resolved; 141 GB: resolved") in proc.stderr
        assert "This is a limit of parity's CPU run, not sglang refusing the draft" in proc.stderr
        return
    assert proc.returncode == 1, proc.stderr
    launch = json.loads(proc.stdout)["launch"]
    assert launch["overrides"] == [{"field": "speculative_num_draft_tokens", "requested": 16, "effective": 2,
                                    "by": "__post_init__"}]
    assert launch["effective"]["speculative_num_steps"] == 1 and launch["effective"]["max_running_requests"] == 48
    assert launch["replaced"]["gpu_memory"].startswith("answered as a GPU would (24 GB: 24576 MiB, 80 GB: 81920 MiB")
    [fix] = launch["fixes"]
    assert fix["argv"][-2:] == ["--speculative-num-steps", "15"]
    assert fix["effective"]["speculative_num_draft_tokens"] == 16
