"""Checks that keep the hand-written pages true to the code: every repository path they name
exists, and every `esc-eval ...` command line they show (in code) names real commands and options.
The hook logs each problem as a warning, which `mkdocs build --strict` turns into a failed build."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from docgen_cli import command_of, walk

TOP = ("serve", "sim", "analysis", "train", "cli", "cluster", "tests", "docs", ".ci")
_PATH = re.compile(r"(?<![\w./:-])((?:%s)/[A-Za-z0-9_./-]*)" % "|".join(re.escape(t) for t in TOP))
_TEST_FILE = re.compile(r"(?<![\w/])(test_\w+\.py)\b")
_FENCE = re.compile(r"^(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)


def missing_paths(markdown: str, root: Path) -> list[str]:
    """Repository paths (`sim/runs/records.py`, `tests/...`, a bare `test_x.py`) that do not exist.
    A path followed by a placeholder (`<`, `*`, `{`) is a pattern, not a path, and is skipped."""
    problems: list[str] = []
    tests = None
    for m in _PATH.finditer(markdown):
        if markdown[m.end():m.end() + 1] in ("<", "*", "{"):
            continue
        path = m.group(1).rstrip(".")
        if path and not (root / path).exists() and path not in problems:
            problems.append(path)
    for m in _TEST_FILE.finditer(markdown):
        if markdown[m.end():m.end() + 1] == "*":
            continue
        if tests is None:
            tests = {p.name for p in (root / "tests").rglob("test_*.py")}
        if m.group(1) not in tests and m.group(1) not in problems:
            problems.append(m.group(1))
    return problems


def code_texts(markdown: str) -> Iterator[str]:
    """The code of a page: each line of its fenced blocks (a line ending in `\\` joined to the
    next) and each inline code span outside them."""
    prose: list[str] = []
    block: list[str] | None = None
    pending = ""
    for line in markdown.splitlines():
        if _FENCE.match(line.strip()):
            block = [] if block is None else None
            continue
        if block is None:
            prose.append(line)
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield pending + line
        pending = ""
    for m in _CODE_SPAN.finditer("\n".join(prose)):
        yield m.group(2)


class CommandTree:
    """The commands and options of a typer app, by full name."""

    def __init__(self, app: Any, prog: str = "esc-eval") -> None:
        self.prog = prog
        self.options: dict[str, set[str]] = {}
        self.groups: set[str] = set()
        for path, cmd, _ in walk(command_of(app), prog):
            name = path[len(prog):].strip()
            opts = {"--help"}
            for p in getattr(cmd, "params", []):
                opts |= set(getattr(p, "opts", [])) | set(getattr(p, "secondary_opts", []) or [])
            self.options[name] = {o for o in opts if o.startswith("-")}
            if hasattr(cmd, "list_commands"):
                self.groups.add(name)

    def problems(self, line: str) -> list[str]:
        """What is wrong with the `esc-eval` command lines in one line of code."""
        out: list[str] = []
        for m in re.finditer(rf"(?<![\w/-]){re.escape(self.prog)}(?![\w-])", line):
            out += self._one(line[m.end():].split())
        return out

    def _one(self, tokens: list[str]) -> list[str]:
        names = [""]
        rest = list(tokens)
        while rest and rest[0].startswith("-"):  # the root's own options
            if rest[0] not in self.options[""]:
                return [f"{self.prog}: unknown option {rest[0]}"]
            rest.pop(0)
        while rest and names[0] in self.groups and re.fullmatch(r"[a-z][\w-]*(\|[a-z][\w-]*)*", rest[0]):
            word = rest.pop(0)
            names = [f"{n} {w}".strip() for n in names for w in word.split("|")]
            unknown = [n for n in names if n not in self.options]
            if unknown:
                return [f"unknown command: {self.prog} {u}" for u in unknown]
            if len(names) > 1:
                break
        problems = []
        for token in rest:
            if token.startswith("#") or token in ("|", "&&", ";", ">"):
                break
            opt = token.strip("[](),;").split("=")[0]
            if re.fullmatch(r"--?[A-Za-z][\w-]*", opt):
                for n in names:
                    if opt not in self.options[n]:
                        problems.append(f"{self.prog} {n}: unknown option {opt}".replace("  ", " "))
        return problems
