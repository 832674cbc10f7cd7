"""The verdict table (issue 32): every bundled draft x serving engine x command, end to end.

One row per bundled draft (fixtures/drafts, each with the target and training it belongs to)
x engine (SGLang as installed, vLLM newest, vLLM 0.33: the release with both model runners)
x command (`check`, `matrix`, `can-i-deploy`, and `pytest -m parity` on a lock written by
`parity lock`): the expected exit code and verdict, each run as a user runs it (a subprocess
of the CLI, or pytest with the plugin). A lock names no serving engine other than SGLang
(parity.lock.Lock.engine), so `pytest -m parity` has SGLang rows only.

Each row runs once per session (`_run` memoises); the commands of one draft and engine repeat
the same extractions, which the reply cache answers after the first (docs/reply-cache.md).
Every `check --json` row also feeds the size guard (tests/sizes.py): no size of either contract
is a width parity shrank. On 8075d6f the llama-3.1-8b-eagle3 rows under vLLM 0.34 (check, matrix,
can-i-deploy) read DRIFT, exit 1, on the tiny model's vocabulary sizes (32, 256) reported as the
draft's, and so did the issue's own command below (measured).
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import ROOT, built
from .sizes import leaked_sizes

pytestmark = pytest.mark.slow

TARGETS = ROOT / "fixtures" / "targets"
DRAFTS = ROOT / "fixtures" / "drafts"
SPECFORGE = "specforge"

# draft -> (target, dump layout, or SPECFORGE for a draft SpecForge trained)
PAIRS = {
    "kimi-k2.5-eagle3": ("kimi-k2.5", "h0,h3,h31,h59"),
    "kimi-k2.5-eagle3-fixed": ("kimi-k2.5", "h0,h3,h31,h59"),
    "kimi-k2.5-eagle3-mla": ("kimi-k2.5", "h0,h3,h31,h59"),
    "llama-3.1-8b-eagle3": ("llama-3.1-8b", "h2,h16,h29,h32"),
    "qwen3-8b-eagle3": ("qwen3-8b", "h2,h18,h33,h36"),
    "specforge-deepseek-v3-eagle3": ("deepseek-v3-61l", SPECFORGE),
    "specforge-llama3-8b-eagle3": ("llama-3.1-8b", SPECFORGE),
    "tiny-llama-32l-nested-ids": ("tiny-llama-32l", "h2,h16,h29,h32"),
}

SGLANG, VLLM_NEWEST, VLLM_TWO_RUNNERS = "sglang-0.5.23", "vllm-0.34.0", "vllm-0.33.0"
ENGINES = (SGLANG, VLLM_NEWEST, VLLM_TWO_RUNNERS)
COMMANDS = ("check", "matrix", "can-i-deploy", "pytest")

P, D = (0, "parity"), (1, "drift")

# (draft, engine) -> (exit code, verdict) of every command on that pair
VERDICTS: dict[tuple[str, str], tuple[int, str]] = {
    ("kimi-k2.5-eagle3", SGLANG): D,  # the born-from case: served [h2, h30, h58], trained [h0, h3, h31]
    ("kimi-k2.5-eagle3", VLLM_NEWEST): D,  # V2 reads no nested ids: the defaults [h2, h30, h58]
    ("kimi-k2.5-eagle3", VLLM_TWO_RUNNERS): D,
    ("kimi-k2.5-eagle3-fixed", VLLM_NEWEST): D,  # the SGLang fix [0, 3, 31] is nested: V2 never reads it
    ("kimi-k2.5-eagle3-fixed", VLLM_TWO_RUNNERS): (1, "unservable"),  # V1 reads it: DeepSeek id 0 raises
    ("specforge-deepseek-v3-eagle3", VLLM_NEWEST): P,
    ("specforge-deepseek-v3-eagle3", VLLM_TWO_RUNNERS): D,  # the two runners feed different states
    ("kimi-k2.5-eagle3-fixed", SGLANG): P,
    # the MLA draft class (Eagle3DeepseekV2ForCausalLM): the ids [0, 3, 31] are fed as trained, but
    # speculators builds the config as Llama attention (rotary over the whole head), the engines as
    # MLA: speculators builds no draft of this class, so the built draft is not compared (a note)
    ("kimi-k2.5-eagle3-mla", SGLANG): P,
    ("kimi-k2.5-eagle3-mla", VLLM_NEWEST): D,  # and V2 reads no nested ids: [h2, h30, h58]
    ("kimi-k2.5-eagle3-mla", VLLM_TWO_RUNNERS): (1, "unservable"),  # V1 reads them: DeepSeek id 0 raises
    ("llama-3.1-8b-eagle3", SGLANG): P,
    ("llama-3.1-8b-eagle3", VLLM_NEWEST): P,  # issue 32: DRIFT on 8075d6f (vocab 32 / 256)
    ("llama-3.1-8b-eagle3", VLLM_TWO_RUNNERS): D,  # the V1 runner reads [1, 15, 28]: h1, h15, h28
    ("qwen3-8b-eagle3", SGLANG): P,
    ("qwen3-8b-eagle3", VLLM_NEWEST): P,
    ("qwen3-8b-eagle3", VLLM_TWO_RUNNERS): D,
    ("specforge-deepseek-v3-eagle3", SGLANG): P,
    ("specforge-llama3-8b-eagle3", SGLANG): P,
    ("specforge-llama3-8b-eagle3", VLLM_NEWEST): P,
    ("specforge-llama3-8b-eagle3", VLLM_TWO_RUNNERS): P,
    ("tiny-llama-32l-nested-ids", SGLANG): P,
    ("tiny-llama-32l-nested-ids", VLLM_NEWEST): P,
    ("tiny-llama-32l-nested-ids", VLLM_TWO_RUNNERS): D,
}

ROWS = [(d, e, c) for d in PAIRS for e in ENGINES for c in COMMANDS
        if not (c == "pytest" and e != SGLANG)]
# `check` runs on every pair; the other commands, which print the same verdict from the same
# extractions, on the born-from drift under SGLang in the suite, on the rest under
# `./dev test --all` (`exhaustive`); a parity verdict through each command is the README's
# (tests/test_readme_commands.py) and the bundled locks' (contracts/).
# Under vLLM 0.33 (two runners), `check` on the born-from draft and on the draft whose runners feed
# different states; the others there are `exhaustive` too.
EVERY_COMMAND = {"kimi-k2.5-eagle3"}  # the born-from drift: matrix, can-i-deploy and pytest -m parity on it
TWO_RUNNERS_CHECKED = {"kimi-k2.5-eagle3", "specforge-deepseek-v3-eagle3"}


def _in_the_suite(draft: str, engine: str, command: str) -> bool:
    if engine == VLLM_TWO_RUNNERS and draft not in TWO_RUNNERS_CHECKED:
        return False
    if command == "check":
        return True
    return draft in EVERY_COMMAND and engine == SGLANG  # the commands' own plumbing: one engine


PARAMS = [pytest.param(d, e, c, id=f"{d}-{e}-{c}",
                       marks=[] if _in_the_suite(d, e, c) else [pytest.mark.exhaustive])
          for d, e, c in ROWS]


def _need(engine: str) -> None:
    package, version = engine.split("-", 1)
    if package == "vllm" and not built("vllm", version):
        pytest.skip(f"vllm {version}'s environment is not built (./dev setup {engine})")


def _inputs(draft: str) -> list[str]:
    target, layout = PAIRS[draft]
    args = ["--target-config", str(TARGETS / target / "config.json"), "--draft", str(DRAFTS / draft)]
    return args + (["--trainer", SPECFORGE] if layout == SPECFORGE else ["--dump-layout", layout])


def _release_args(engine: str, draft: str, command: str) -> list[str]:
    package, version = engine.split("-", 1)
    out = ["--engine", "vllm", "--vllm", version] if package == "vllm" else ["--sglang", version]
    trained = PAIRS[draft][1] == SPECFORGE
    if command == "check":
        # check runs the installed SGLang and speculators (no flag for the main environment's own
        # releases); SpecForge is never installed there, so its release is named
        return (out if package == "vllm" else []) + (["--specforge", "0.2.0"] if trained else [])
    if command == "can-i-deploy" and package == "vllm":
        out = ["--vllm", version]  # can-i-deploy takes the engine from the release flag
    return out + (["--specforge", "0.2.0"] if trained else ["--speculators", "0.9.0"])


def _parity(*argv: str, timeout: float = 1500) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "parity", *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@functools.lru_cache(maxsize=None)
def _run(draft: str, engine: str, command: str, lock_dir: str) -> tuple[int, str, dict | str]:
    """(exit code, verdict, the JSON reply or pytest's output) of one row, run once."""
    if command == "pytest":  # a lock of the pair, alone in its folder, checked by the plugin
        contracts = Path(lock_dir) / draft
        contracts.mkdir(exist_ok=True)
        locked = _parity("lock", str(contracts / f"{draft}.json"), *_inputs(draft))
        assert locked.returncode == 0, locked.stderr[-3000:]
        done = subprocess.run([sys.executable, "-m", "pytest", "-m", "parity", "-p", "no:cacheprovider",
                               "--parity-contracts", str(contracts), str(contracts)],
                              capture_output=True, text=True, timeout=1500, cwd=ROOT)
        out = done.stdout + done.stderr
        verdict = ("parity" if done.returncode == 0 and "1 passed" in out else
                   "drift" if done.returncode == 1 and ("DRIFT" in out or "UNSERVABLE" in out) else "error")
        return done.returncode, verdict, out
    done = _parity(command, *_inputs(draft), *_release_args(engine, draft, command), "--json",
                   *([] if command == "check" else ["--no-verify"]))
    if not done.stdout.strip():
        return done.returncode, "error", done.stderr
    reply = json.loads(done.stdout)
    if command == "check":
        verdict = reply["verdict"]
    else:
        matrix = reply["matrix"] if command == "can-i-deploy" else reply
        rows = matrix["serving"] + matrix["training"]
        verdicts = [v["verdict"] for row in matrix["serving"] for v in row["verdicts"]]
        verdict = ("error" if any(row["error"] for row in rows) else
                   verdicts[0] if len(set(verdicts)) == 1 else f"mixed {verdicts}")
    return done.returncode, verdict, reply


@pytest.fixture(scope="module")
def lock_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("verdict-locks"))


@pytest.mark.parametrize("draft, engine, command", PARAMS)
def test_verdict(draft, engine, command, lock_dir):
    _need(engine)
    rc, verdict, reply = _run(draft, engine, command, lock_dir)
    assert (rc, verdict) == VERDICTS[draft, engine], (reply if isinstance(reply, str) else
                                                      json.dumps(reply, indent=1)[:6000])
    if command == "check":  # the guard: no size of either contract is a shrunk width
        from parity.contract import load_contract

        target = json.loads((TARGETS / PAIRS[draft][0] / "config.json").read_text())
        config = json.loads((DRAFTS / draft / "config.json").read_text())
        for side in ("training", "serving"):
            contract = load_contract(json.dumps(reply[side]))
            assert not leaked_sizes(contract, target, config), leaked_sizes(contract, target, config)
        assert not [d for d in reply["differences"] if d["where"].startswith("vocab.")], reply["differences"]


def test_the_issue_32_command_reads_what_each_vllm_release_really_feeds(lock_dir):
    """The issue's command (llama-3.1-8b-eagle3 on the 32-layer Llama, h2,h16,h29,h32): vLLM 0.34
    (V2 the only runner) feeds [h2, h16, h29], PARITY; 0.33's V1 runner reads the eagle_config ids
    [1, 15, 28] one layer early, [h1, h15, h28], a DRIFT with the fix [2, 16, 29] verified. Neither
    lists a vocabulary difference (8075d6f listed 32 and 256 as the draft's)."""
    for engine in (VLLM_NEWEST, VLLM_TWO_RUNNERS):
        _need(engine)
    rc, verdict, new = _run("llama-3.1-8b-eagle3", VLLM_NEWEST, "check", lock_dir)
    assert (rc, verdict, new["serving"]["fc_input"]) == (0, "parity", ["h2", "h16", "h29"]), new["differences"]
    assert new["differences"] == [] and new["serving"]["runners"] == {}
    rc, verdict, two = _run("llama-3.1-8b-eagle3", VLLM_TWO_RUNNERS, "check", lock_dir)
    assert (rc, verdict) == (1, "drift")
    assert two["serving"]["runners"] == {"v1": ["h1", "h15", "h28"], "v2": ["h2", "h16", "h29"]}
    assert [d["where"] for d in two["differences"] if d["where"].startswith("vocab.")] == []
    fix = two["suggestion"]
    assert (fix["eagle_aux_hidden_state_layer_ids"], fix["verified"]) == ([2, 16, 29], True), fix
    for side in (new, two):
        assert (side["serving"]["vocab"]["draft_vocab_size"], side["serving"]["vocab"]["target_vocab_size"]) == \
            (32000, 128256)
