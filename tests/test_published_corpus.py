"""The published-drafts corpus (fixtures/published, issue 48 item 4): every pair of corpus.toml
that has a target, checked end to end by `parity check` under its trainer and each engine
(SGLang 0.5.23, the main environment; vLLM 0.34.0), asserting the verdict and the exit code
corpus.toml expects. The expectations are the truth about each pair as its engine and trainer
serve and train it (read from their installed code and settled by running it, each `why` and
`verified_by` says how), not what parity printed: a false DRIFT, a false PARITY, an UNSERVABLE
that serves or an exit 2 where the engine gives an answer fails here.

A pair on which parity is known to be wrong carries `parity_gives` (and `known_bug`, naming the
issue) beside its expectation: that case is a strict xfail, so it fails the suite both while
parity gives anything else than the known wrong answer and once the bug is fixed (the marker then
has to go).

The suite runs CI_SAMPLE's cases; the rest are `exhaustive` (`./dev test --all`).

Cost (CI: 2 cores): `--no-verify` (no second extraction for a fix), and the two engines of a pair
are consecutive cases: the pair's training contract is the same request under both, which the
reply cache answers once per run (under pytest-xdist the second worker waits for the first's
reply), and every extraction forks from the run's warmed servers (parity.forkserver)."""

from __future__ import annotations

import json
import shlex
import tomllib

import pytest

from parity import cli

from .helpers import ROOT, built

CORPUS = ROOT / "fixtures" / "published"
PAIRS = [p for p in tomllib.loads((CORPUS / "corpus.toml").read_text())["pair"] if p.get("target")]
ENGINES = {"sglang": ("0.5.23", []), "vllm": ("0.34.0", ["--engine", "vllm", "--vllm", "0.34.0"])}
EXIT = {"parity": 0, "drift": 1, "unservable": 1, "error": 2}

# The cases the suite (and so CI) runs; every other is `exhaustive` (./dev test --all): a trainer
# parity runs under both engines (a key read by training only, issue 48 item 1), a draft one engine
# cannot build and the other serves, the born-from drift under both, a DFlash draft, a size the
# default trainer's converter only assumes (TorchSpec's Kimi-K2.5 draft: no draft_vocab_size).
CI_SAMPLE = {("specforge-llama-3.1-8b-instruct-eagle3", "sglang"), ("specforge-llama-3.1-8b-instruct-eagle3", "vllm"),
             ("safeailab-llama-3.1-8b-instruct-eagle3-train-config", "sglang"),
             ("safeailab-llama-3.1-8b-instruct-eagle3-train-config", "vllm"),
             ("specforge-kimi-k2.5-eagle3", "sglang"), ("specforge-kimi-k2.5-eagle3", "vllm"),
             ("specforge-qwen3-8b-dflash", "sglang"),
             ("torchspec-kimi-k2.5-eagle3", "vllm")}


def argv(pair: dict, engine: str) -> list[str]:
    """The check corpus.toml names for the pair: its target, its draft, the training side
    (`check_training`: `--trainer specforge --specforge 0.2.0`, or the dump layout of a trainer
    parity does not model), the engine."""
    return ["check", "--target-config", str(ROOT / pair["target"]), "--draft", str(CORPUS / pair["draft"]),
            *shlex.split(pair["check_training"]), *ENGINES[engine][1], "--no-verify", "--json"]


class KnownWrong(AssertionError):
    """Parity gives the known wrong answer corpus.toml records (`parity_gives`): the only failure
    its xfail accepts; any other answer fails, and the right one is an XPASS, which fails too."""


def cases():
    for pair in PAIRS:
        for engine in ENGINES:
            expected = pair["expected"][engine]
            marks = [] if (pair["name"], engine) in CI_SAMPLE else [pytest.mark.exhaustive]
            if engine == "vllm":
                marks.append(pytest.mark.skipif(not built("vllm", ENGINES["vllm"][0]),
                                                reason="the vllm-0.34.0 environment is not built"))
            if "parity_gives" in expected:
                marks.append(pytest.mark.xfail(strict=True, raises=KnownWrong,
                                               reason=f"parity gives {expected['parity_gives']} (exit "
                                               f"{expected['parity_exit']}): {expected['known_bug']}"))
            yield pytest.param(pair, engine, id=f"{pair['name']}-{engine}", marks=marks)


def test_the_corpus_is_complete():
    """At least 20 published pairs, each with its sources, the check it runs and an expectation
    per engine whose exit code is the verdict's; the CI sample names pairs that exist."""
    assert len(PAIRS) >= 20
    assert CI_SAMPLE <= {(pair["name"], engine) for pair in PAIRS for engine in ENGINES}
    for pair in PAIRS:
        assert pair["draft_source"] and pair["target_source"] and pair["check_training"], pair["name"]
        assert (CORPUS / pair["draft"] / "config.json").is_file() and (ROOT / pair["target"]).is_file()
        for engine, (release, _) in ENGINES.items():
            expected = pair["expected"][engine]
            assert expected["release"] == release, pair["name"]
            assert EXIT[expected["verdict"]] == expected["exit"], (pair["name"], engine)
            if "parity_gives" in expected:
                assert expected["known_bug"] and EXIT[expected["parity_gives"]] == expected["parity_exit"]


def reason(report: dict, err: str) -> str:
    """Why parity gave its verdict, in its own words: the differences, else the unservable
    reason, else its one line on stderr."""
    lines = [d.get("message", "") for d in report.get("differences") or []]
    if report.get("unservable"):
        lines.append(report["unservable"])
    return "; ".join(lines) or err.strip()


@pytest.mark.slow  # each case runs a trainer and an engine in child processes
@pytest.mark.parametrize("pair,engine", list(cases()))
def test_published_pair(pair, engine, capsys):
    expected = pair["expected"][engine]
    rc = cli.main(argv(pair, engine))
    out, err = capsys.readouterr()
    report = json.loads(out) if out.strip() else {}
    got = (report.get("verdict"), rc)
    if "parity_gives" in expected and got == (expected["parity_gives"], expected["parity_exit"]):
        raise KnownWrong(f"{pair['name']} under {engine}: {reason(report, err)}")
    assert got == (expected["verdict"], expected["exit"]), (
        f"{pair['name']} under {engine} {expected['release']}: parity gives {got[0]} (exit {rc}), expected "
        f"{expected['verdict']} (exit {expected['exit']}): {reason(report, err)}\n  expected because: {expected['why']}")
