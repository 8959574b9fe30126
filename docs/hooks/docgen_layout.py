"""The code's layout, generated from the tree: every package of pyproject's list with what its
`__init__` docstring says it holds, its modules with the first sentence of theirs, and the layer
contracts of [tool.importlinter]. Read with `ast`, nothing is imported."""
from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from docgen_text import anchor, cell, code


def _docstring(path: Path) -> str:
    try:
        return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    except (OSError, SyntaxError):
        return ""


def first_sentence(text: str) -> str:
    """The first sentence of a docstring, without a leading "name:" label."""
    para = " ".join(text.strip().split("\n\n")[0].split())
    para = re.sub(r"^[\w.]+:\s+", "", para)
    m = re.match(r"(.+?\.)(\s|$)", para)
    text = m.group(1) if m else para
    return text[:1].upper() + text[1:]


def packages(root: Path) -> list[tuple[str, Path]]:
    """(import name, folder) of every package pyproject lists, in its package-dir order."""
    cfg = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    return [(name, root / folder) for name, folder in cfg["package-dir"].items()]


def contracts(root: Path) -> list[dict]:
    return tomllib.loads((root / "pyproject.toml").read_text())["tool"].get("importlinter", {}).get("contracts", [])


def render_layout(root: Path) -> str:
    pkgs = packages(root)
    lines = ["## Packages", "", "| Package | Folder | What it holds |", "|---|---|---|"]
    for name, folder in pkgs:
        doc = first_sentence(_docstring(folder / "__init__.py"))
        lines.append(f"| [{name}](#{anchor(name)}) | `{folder.relative_to(root)}/` | {cell(doc)} |")
    lines.append("")
    for name, folder in pkgs:
        depth = name.count(".")
        lines += [f"{'#' * min(2 + depth, 6)} {name} {{ #{anchor(name)} }}", ""]
        doc = _docstring(folder / "__init__.py")
        if doc:
            lines += ["```text", doc, "```", ""]
        modules = sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")
        if modules:
            lines += ["| Module | What it holds |", "|---|---|"]
            lines += [f"| `{p.relative_to(root)}` | {cell(first_sentence(_docstring(p)))} |" for p in modules]
            lines.append("")
    lines += ["## Layer contracts", "",
              "Checked by `lint-imports` in CI (pyproject.toml `[tool.importlinter]`); "
              "`tests/cli/test_cli_layout.py` also checks that no module is in an import cycle, "
              "annotation-only imports included.", ""]
    for c in contracts(root):
        lines.append(f"- **{cell(c['name'])}** ({c['type']})")
        if c["type"] == "layers":
            lines.append(f"    - in {', '.join(code(x) for x in c['containers'])}, top to bottom: "
                         + " > ".join(code(layer) for layer in c["layers"]))
        elif c["type"] == "forbidden":
            lines.append(f"    - {', '.join(code(x) for x in c['source_modules'])} may not import "
                         + ", ".join(code(x) for x in c["forbidden_modules"]))
    return "\n".join(lines) + "\n"
