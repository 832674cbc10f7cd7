"""The commands the documentation shows, read out of the Markdown, for tests that keep them true.

`doc_commands(path)` finds every `parity ...`, `./dev parity ...` and `$ ./dev parity ...` line
in a file's code blocks (indented or fenced), joins its continuation lines and splits the
`parity a | parity b` alternatives. Each command knows whether it is concrete (every path in
it exists in this repository: it can be run as written) or a template (T/config.json, NAME,
D, ...: only its subcommand and flags can be checked), and which exit code the lines shown
after it document (1 when they show a drift, 0 when they show a clean result, None when no
output is shown).

`check_against_parser(argv)` says what in a command line the `parity` parser does not know.
"""

from __future__ import annotations

import argparse
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from .helpers import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_PROMPT = re.compile(r"^(?:\$\s+)?(?:\./dev\s+)?parity(?:\s+|$)")
_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
_PLACEHOLDER = re.compile(r"(?:^|[/\s=,])[A-Z][A-Z0-9_]*(?:$|[./\s,])")  # T/..., NAME.json, D, DUMPS
_DRIFT_SHOWN = re.compile(r"verdict: drift|DRIFT|NOT DEPLOYABLE|^no: ", re.M)
# Commands whose positional arguments are files they write: (subcommand, index among positionals).
WRITES = {"lock": 0, "export": 1}


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the block's first line
    lang: str | None  # None for an indented block
    lines: list[str]


@dataclass
class DocCommand:
    path: Path
    line: int
    text: str  # the command as shown, continuation lines joined
    argv: list[str]  # after `parity`
    output: list[str] = field(default_factory=list)  # the lines shown after it in its block

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.text}"

    @property
    def placeholders(self) -> list[str]:
        """What in the command is not real: template words, `...`, [optional] parts, missing paths."""
        out = []
        if "..." in self.text:
            out.append("...")
        if re.search(r"\[-|\|", self.text):
            out.append("[optional parts]")
        out += [t for t in self.argv if _PLACEHOLDER.search(t)]
        writes = set(self.written_args())
        out += [t for t in self.argv if _looks_like_path(t) and t not in writes and not (ROOT / t).exists()]
        return out

    @property
    def rotten_paths(self) -> list[str]:
        """Paths into this repository (their first folder is here) that do not exist, though
        nothing marks them as a template (NAME, T/, D): a bundled file that moved."""
        writes = set(self.written_args())
        return [t for t in self.argv if _looks_like_path(t) and t not in writes and not _PLACEHOLDER.search(t)
                and not (ROOT / t).exists() and (ROOT / t.split("/")[0]).exists() and "/" in t]

    @property
    def concrete(self) -> bool:
        return not self.placeholders

    def written_args(self) -> list[str]:
        """The arguments this command writes to (lock's file, export's directory)."""
        if not self.argv or self.argv[0] not in WRITES:
            return []
        positionals = _positionals(self.argv)
        i = WRITES[self.argv[0]]
        return positionals[i:i + 1]

    @property
    def documented_exit(self) -> int | None:
        shown = "\n".join(self.output)
        if not shown.strip():
            return None
        return 1 if _DRIFT_SHOWN.search(shown) else 0


def _looks_like_path(token: str) -> bool:
    return not token.startswith("-") and ("/" in token or token.endswith(".json"))


def _positionals(argv: list[str]) -> list[str]:
    """argv's positional arguments, using the parser to know which flags take a value."""
    parser, rest = subparser_for(argv)
    out, i = [], 0
    while i < len(rest):
        t = rest[i]
        if t.startswith("-"):
            action = parser._option_string_actions.get(t.split("=")[0]) if parser else None
            takes = action is not None and action.nargs != 0 and "=" not in t
            i += 2 if takes else 1
            continue
        out.append(t)
        i += 1
    return out


def code_blocks(path: Path) -> list[Block]:
    """The fenced and indented (4 spaces, after a blank line) code blocks of a Markdown file."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    prev_blank = True
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"^\s*```\s*([\w-]*)", line)
        if fence:
            j = i + 1
            while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
                j += 1
            blocks.append(Block(path, i + 2, fence.group(1) or "", lines[i + 1:j]))
            i, prev_blank = j + 1, False
            continue
        if prev_blank and line.startswith("    ") and line.strip():
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                j += 1
            blocks.append(Block(path, i + 1, None, [x[4:] for x in lines[i:j]]))
            i, prev_blank = j, False
            continue
        prev_blank = not line.strip()
        i += 1
    return blocks


def _strip_comment(text: str) -> str:
    return re.sub(r"\s+#\s.*$", "", text).rstrip()


def doc_commands(path: Path) -> list[DocCommand]:
    """Every parity command line in a file's code blocks (output lines such as `parity check:
    DRIFT` are not commands: a word ending in ':' follows `parity`)."""
    found: list[DocCommand] = []
    for block in code_blocks(path):
        current: list[DocCommand] = []
        i = 0
        while i < len(block.lines):
            raw = block.lines[i]
            stripped = raw.strip()
            if not _PROMPT.match(stripped):
                if block.lang in (None, "", "console", "text"):  # else (bash, yaml): not output
                    for c in current:
                        c.output.append(raw)
                i += 1
                continue
            start, text = i, _strip_comment(stripped)
            indent = len(raw) - len(raw.lstrip())
            # continuation lines: a trailing backslash, or a more-indented line of [optional] parts
            while i + 1 < len(block.lines):
                nxt = block.lines[i + 1]
                if text.endswith("\\"):
                    text = text[:-1].rstrip() + " " + _strip_comment(nxt.strip())
                elif (len(nxt) - len(nxt.lstrip()) > indent and nxt.strip().startswith(("[", "--"))):
                    text = text + " " + _strip_comment(nxt.strip())
                else:
                    break
                i += 1
            i += 1
            current = []
            for alt in re.split(r"\s+\|\s+(?=(?:\./dev\s+)?parity\b)", text):
                body = _PROMPT.sub("", alt.strip(), count=1)
                argv = shlex.split(body)
                if argv and argv[0].endswith(":"):  # `parity check: DRIFT ...`: output, not a command
                    continue
                current.append(DocCommand(path, block.line + start, alt.strip(), argv))
            found += current
    return found


def all_doc_commands() -> list[DocCommand]:
    return [c for path in DOCS for c in doc_commands(path)]


# -- the parser ----------------------------------------------------------------------------------

def _subparsers(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def subparser_for(argv: list[str]) -> tuple[argparse.ArgumentParser | None, list[str]]:
    """The (sub)parser that handles argv, descending through subcommands, and the rest of argv."""
    from parity.cli import build_parser

    parser, rest = build_parser(), list(argv)
    while rest and not rest[0].startswith("-"):
        sub = _subparsers(parser)
        if sub is None:
            break
        if rest[0] not in sub.choices:
            return None, rest
        parser, rest = sub.choices[rest[0]], rest[1:]
    return parser, rest


def check_against_parser(argv: list[str], text: str | None = None) -> list[str]:
    """What the parser does not know in a command: an unknown subcommand or an unknown flag.
    `text`, when given, is searched for flags too (they hide in `[--markdown|--json]`)."""
    parser, rest = subparser_for(argv)
    if parser is None:
        return [f"no subcommand {rest[0]!r}"]
    if _subparsers(parser) is not None and parser.prog != "parity" and not rest:
        return [f"{parser.prog} needs a subcommand"]
    flags = set(_FLAG.findall(" ".join(t for t in rest if not re.search(r"\s", t))))  # not in a quoted value
    if text is not None:
        after = text.split(argv[0], 1)[1] if argv and not argv[0].startswith("-") else text
        after = re.sub(r"'[^']*'|\"[^\"]*\"", "''", after)  # a quoted value (--serve-args '...') is not parity's flags
        flags |= set(_FLAG.findall(after))
    known = set(parser._option_string_actions)
    return [f"{parser.prog}: no option {f}" for f in sorted(flags) if f not in known]


# -- ./dev ------------------------------------------------------------------------------------------

def dev_commands() -> set[str]:
    """The commands the `dev` script's case statement handles."""
    text = (ROOT / "dev").read_text()
    case = text.split('case "$cmd" in', 1)[1].rsplit("esac", 1)[0]
    names: set[str] = set()
    for m in re.finditer(r"^\s{4}([\w|-]+)\)", case, re.M):
        names |= set(m.group(1).split("|"))
    return names
