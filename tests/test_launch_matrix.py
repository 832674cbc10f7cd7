"""The launch contract in `parity matrix` and `parity can-i-deploy` (docs/launch.md, docs/matrix.md):
the serve arguments are parsed and resolved under each serving release by that release's own
code, and each cell holds the result: an override is a drift of that cell naming the field, a
release whose parser refuses them says so in its words (that cell, not the whole matrix).

Every case runs the real CLI on the bundled born-from fixture (the fixed Kimi-K2.5 draft: its
ids are at parity, so only the serve command can drift)."""

from __future__ import annotations

import json

import pytest

from .helpers import ROOT, built, run_parity as parity

KIMI = ROOT / "fixtures" / "targets" / "kimi-k2.5" / "config.json"
KIMI_FIXED = ROOT / "fixtures" / "drafts" / "kimi-k2.5-eagle3-fixed"
LAYOUT = "h0,h3,h31,h59"
SEED = ("--model-path moonshotai/Kimi-K2.5 --speculative-algorithm EAGLE3 --speculative-draft-model-path my/draft "
        "--speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 16 --trust-remote-code")
GOOD = SEED.replace("--speculative-num-steps 1 ", "--speculative-num-steps 15 ")
GIVEN = ("--target-config", str(KIMI), "--draft", str(KIMI_FIXED), "--dump-layout", LAYOUT)

pytestmark = pytest.mark.slow


def can_i_deploy(*args: str):
    return parity("can-i-deploy", "--sglang", "0.5.23", "--speculators", "0.9.0", "--no-verify", *args)


def test_can_i_deploy_names_the_override_and_passes_the_fixed_command():
    seed = can_i_deploy(*GIVEN, "--serve-args", SEED)
    assert seed.returncode == 1, seed.stdout + seed.stderr
    assert seed.stdout.startswith("no: sglang 0.5.23 with speculators 0.9.0: the serve command is not run as asked: "
                                  "launch speculative_num_draft_tokens: asked 16, sglang 0.5.23 runs 2 "
                                  "(changed by _handle_eagle_family)")
    assert "--speculative-num-steps 15 (verified on this release)" in seed.stdout
    good = can_i_deploy(*GIVEN, "--serve-args", GOOD, "--json")
    assert good.returncode == 0, good.stdout + good.stderr
    answer = json.loads(good.stdout)
    assert answer["deploy"] is True and answer["reason"].endswith("resolves the serve command as asked")
    [row] = answer["matrix"]["serving"]
    assert row["launch"]["resolved"]["effective"]["speculative_num_draft_tokens"] == 16
    assert answer["matrix"]["serve_args"] == GOOD.split()


def test_can_i_deploy_with_a_lock_resolves_its_stored_arguments(tmp_path):
    lock = tmp_path / "contracts" / "kimi.json"
    written = parity("lock", str(lock), *GIVEN, "--serve-args", SEED)
    assert written.returncode == 0, written.stderr
    stored = can_i_deploy("--lock", str(lock))
    assert stored.returncode == 1, stored.stdout + stored.stderr
    assert "launch speculative_num_draft_tokens: asked 16, sglang 0.5.23 runs 2" in stored.stdout
    replaced = can_i_deploy("--lock", str(lock), "--serve-args", GOOD)  # --serve-args replaces them for one run
    assert replaced.returncode == 0, replaced.stdout + replaced.stderr


def test_a_matrix_cell_per_release_refused_in_its_own_words():
    """--enable-watermark is new in 0.5.22: 0.5.21's parser refuses it (that cell, in its words),
    0.5.22 resolves the command and overrides the draft tokens (a drift of that cell)."""
    for version in ("0.5.21", "0.5.22"):
        if not built("sglang", version):
            pytest.skip(f"sglang {version}'s environment is not built (./dev setup sglang-{version})")
    args = ("matrix", "--sglang", "0.5.21,0.5.22", "--speculators", "0.9.0", "--no-verify", *GIVEN,
            "--serve-args", SEED + " --enable-watermark")
    proc = parity(*args, "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    old, new = json.loads(proc.stdout)["serving"]
    assert old["launch"] == {"resolved": None, "unresolved": None, "lock_moved": [],
                             "refused": "--serve-args: sglang 0.5.21's argument parser refused them: "
                                        "unrecognized arguments: --enable-watermark"}
    assert old["verdicts"] == [] and old["error"] is None
    assert [v["verdict"] for v in new["verdicts"]] == ["drift"] and new["fc_input"] == ["h0", "h3", "h31"]
    assert new["launch"]["resolved"]["overrides"] == [{"field": "speculative_num_draft_tokens", "requested": 16,
                                                       "effective": 2, "by": "_handle_eagle_family"}]
    text = parity(*args).stdout  # one launch line per cell, the fix under a drift
    assert ("  0.5.21           launch REFUSED: --serve-args: sglang 0.5.21's argument parser refused them: "
            "unrecognized arguments: --enable-watermark") in text
    assert ("      launch: DRIFT: speculative_num_draft_tokens 16 -> 2 (by _handle_eagle_family)\n"
            "          fix: serve with ") in text


def test_a_release_before_0_11_resolves_the_serve_arguments_for_its_cell():
    """vLLM 0.10.2 (the 0.9 family) resolves serve arguments with its own parser and config
    classes: its cell has the launch, neither unresolved nor refused, and can-i-deploy gives a
    verdict (it said "cannot tell", exit 2, while the family had no resolver)."""
    from .test_launch import LLAMA_DRAFT, VLLM_EAGLE3
    from .helpers import LLAMA

    if not built("vllm", "0.10.2"):
        pytest.skip("vllm 0.10.2's environment is not built (./dev setup vllm-0.10.2)")
    proc = parity("can-i-deploy", "--vllm", "0.10.2", "--speculators", "0.9.0", "--no-verify", "--target-config",
                  str(LLAMA), "--draft", str(LLAMA_DRAFT), "--dump-layout", "h2,h16,h29,h32",
                  "--serve-args", VLLM_EAGLE3, "--json")
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    [row] = json.loads(proc.stdout)["matrix"]["serving"]
    assert row["launch"]["unresolved"] is None and row["launch"]["refused"] is None, row["launch"]
