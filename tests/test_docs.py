"""The workflows and scripts the documentation tells users to copy are valid as shown.

Every ```yaml block of README.md and docs/*.md parses; in every GitHub workflow among them,
each step's `run:` script calls only what exists: `parity <subcommand>` with flags the parser
has, `./dev <cmd>` that the dev script handles, pytest options pytest (with the parity plugin)
has and markers it registers, `python3 <script>.py` files that are in the repository, and
Python heredocs that compile. `steps.<id>` references name a step that exists.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from .doc_commands import DOCS, _FLAG, check_against_parser, code_blocks, dev_commands
from .helpers import ROOT

yaml = pytest.importorskip("yaml")

YAML_BLOCKS = [b for path in DOCS for b in code_blocks(path) if b.lang in ("yaml", "yml")]
_KEYWORDS = {"if", "then", "else", "elif", "do", "for", "while", "until", "!", "time", "exec", "{", "}"}


def _id(block) -> str:
    return f"{block.path.relative_to(ROOT)}:{block.line}"


def test_the_docs_hold_yaml_blocks():
    assert {b.path.name for b in YAML_BLOCKS} >= {"ci-workflow.md", "ci-bump-workflow.md"}


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=_id)
def test_every_yaml_block_parses(block):
    try:
        yaml.safe_load("\n".join(block.lines))
    except yaml.YAMLError as exc:
        pytest.fail(f"{_id(block)}: not valid YAML (GitHub rejects the file): {exc}")


# -- run: scripts -----------------------------------------------------------------------------------

def _steps(block):
    try:
        doc = yaml.safe_load("\n".join(block.lines))
    except yaml.YAMLError:  # test_every_yaml_block_parses says so
        return []
    if not isinstance(doc, dict) or "jobs" not in doc:
        return []
    return [(job, step) for job, body in doc["jobs"].items() for step in body.get("steps", [])]


def _heredocs(script: str) -> tuple[str, list[tuple[str, str]]]:
    """The script without its heredoc bodies, and the bodies with the command that reads them."""
    out, bodies, lines, i = [], [], script.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        m = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)
        i += 1
        if m:
            body = []
            while i < len(lines) and lines[i].strip() != m.group(1):
                body.append(lines[i])
                i += 1
            bodies.append((line, "\n".join(body)))
            i += 1
    return "\n".join(out), bodies


def simple_commands(script: str) -> list[list[str]]:
    """The simple commands of a shell script, roughly: enough to find the command words."""
    text, _ = _heredocs(script)
    text = re.sub(r"\\\n", " ", text)
    out = []
    for line in text.splitlines():
        line = re.sub(r"(^|\s)#\s.*$", "", line)
        for seg in re.split(r"\$\(|&&|\|\||[;|()`]", line):
            words = seg.split()
            while words and (words[0] in _KEYWORDS or re.match(r"^\w+=", words[0])):
                words = words[1:]
            if words:
                out.append(words)
    return out


@pytest.fixture(scope="module")
def pytest_help() -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = lambda *a: subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *a],  # noqa: E731
                                    capture_output=True, text=True, cwd=ROOT, env=env).stdout
    return run("--help") + "\n" + run("--markers")


def problems_in(script: str, pytest_help: str) -> list[str]:
    found = []
    for words in simple_commands(script):
        cmd, rest = words[0], words[1:]
        line = " ".join(words)
        if os.path.basename(cmd) == "parity":
            if not rest:
                continue
            found += [f"{line}: {p}" for p in check_against_parser(rest[:1], " ".join(rest))]
        elif cmd == "./dev":
            if not rest or rest[0] not in dev_commands():
                found.append(f"{line}: the dev script has no command {rest[:1]} (it has {sorted(dev_commands())})")
        elif cmd == "pytest" or (re.match(r"(.*/)?python3?$", cmd) and rest[:2] == ["-m", "pytest"]):
            args = rest if cmd == "pytest" else rest[2:]
            for opt in _FLAG.findall(" ".join(args)):
                if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", pytest_help):
                    found.append(f"{line}: pytest has no option {opt}")
            for i, a in enumerate(args[:-1]):
                if a == "-m":
                    for marker in re.findall(r"[A-Za-z_]\w*", args[i + 1]):
                        if marker not in ("and", "or", "not") and f"@pytest.mark.{marker}" not in pytest_help:
                            found.append(f"{line}: no pytest marker {marker!r} is registered")
        elif re.match(r"(.*/)?python3?$", cmd) and rest and rest[0].endswith(".py"):
            if not (ROOT / rest[0]).exists():
                found.append(f"{line}: no script {rest[0]} in the repository")
    return found


WORKFLOW_STEPS = [(b, job, step) for b in YAML_BLOCKS for job, step in _steps(b) if "run" in step]


def test_the_workflows_have_run_steps():
    assert any("parity matrix" in s["run"] for _, _, s in WORKFLOW_STEPS)
    assert any("pytest -m parity" in s["run"] for _, _, s in WORKFLOW_STEPS)


@pytest.mark.parametrize("block,job,step", WORKFLOW_STEPS,
                         ids=[f"{_id(b)}:{s.get('name', s['run'][:30])}" for b, _, s in WORKFLOW_STEPS])
def test_workflow_steps_call_only_commands_that_exist(block, job, step, pytest_help):
    assert not problems_in(step["run"], pytest_help), (_id(block), step.get("name"))
    for head, body in _heredocs(step["run"])[1]:
        if re.match(r"\s*python3?\s+-\s", head):
            compile(body, f"{_id(block)}: {step.get('name')}", "exec")


@pytest.mark.parametrize("block", [b for b in YAML_BLOCKS if _steps(b)], ids=_id)
def test_workflow_step_references_name_steps_that_exist(block):
    ids = {s["id"] for _, s in _steps(block) if "id" in s}
    used = set(re.findall(r"steps\.([\w-]+)\.", "\n".join(block.lines)))
    assert used <= ids, (_id(block), used - ids)


def test_the_checker_catches_what_it_is_for(pytest_help):
    bad = ("parity matrix --contract x --no-such-flag\n.parity/.venv/bin/parity frobnicate\n./dev nope\n"
           "pytest -m parity --parity-nope contracts/\npython3 tools/no_such_script.py\n")
    found = problems_in(bad, pytest_help)
    assert len(found) == 5, found
    assert not problems_in("pytest -m parity --parity-contracts contracts/ -n auto\n./dev test -x\n"
                           "parity can-i-deploy --sglang 1 --speculators 2 --contract c.json", pytest_help)


def test_dev_commands_shown_in_the_docs_exist():
    shown = {(b.path.name, m.group(1)) for path in DOCS for b in code_blocks(path) for line in b.lines
             if (m := re.match(r"^\s*(?:\$\s+)?\./dev\s+([\w-]+)", line))}
    assert shown, "no ./dev command found in the docs"
    known = dev_commands()
    assert {cmd for _, cmd in shown} <= known, (shown, known)

