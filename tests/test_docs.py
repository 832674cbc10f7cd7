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
    assert {b.path.name for b in YAML_BLOCKS} >= {"README.md", "ci-bump-workflow.md"}


# -- the README as a front page --------------------------------------------------------------------

README = ROOT / "README.md"
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_a_front_page_with_the_ci_recipe_first():
    """At most 12 KB, and the whole CI recipe (`parity lock`, then the workflow that runs
    `pytest -m parity`) within its first 60 lines."""
    assert README.stat().st_size <= 12_000, README.stat().st_size
    first = [b for b in code_blocks(README) if b.line + len(b.lines) <= 60]
    assert any(re.match(r"\s*parity lock ", line) for b in first for line in b.lines), "no `parity lock` in 60 lines"
    workflows = [b for b in first if b.lang == "yaml" and _steps(b)]
    assert any("pytest -m parity" in step.get("run", "") for b in workflows for _, step in _steps(b)), \
        "no workflow running `pytest -m parity` in the README's first 60 lines"


def test_every_docs_page_is_linked_from_the_readme():
    linked = {m.group(1).split("#")[0] for m in _LINK.finditer(README.read_text())}
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages <= linked, sorted(pages - linked)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_is_a_file_of_this_repository(path):
    """The README and docs/ are self-contained: a relative link names a file that is in the
    repository (never above it), and an anchor into the README names one of its headings."""
    bad = []
    for m in _LINK.finditer(path.read_text()):
        target = m.group(1)
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        where = (path.parent / file).resolve() if file else path
        if ROOT not in where.parents or not where.exists():
            bad.append(target)
        elif anchor and where == README and anchor not in _anchors(README):
            bad.append(target)
    assert not bad, bad


def _anchors(path) -> set[str]:
    """GitHub's anchors for a Markdown file's headings."""
    return {re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for line in path.read_text().splitlines() if line.startswith("#")}


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

