"""Markdown helpers shared by the generators: escaping text that comes from the code."""
from __future__ import annotations

import re

_CODE = re.compile(r"(`+)(.+?)\1", re.S)


def escape(text: str) -> str:
    """Text from a docstring or a help string as Markdown: code spans kept as they are, and outside
    them the characters Markdown or HTML would read (`<`, `>`, `*`, `|`, `[`) escaped."""
    out, pos = [], 0
    for m in _CODE.finditer(text):
        out.append(_plain(text[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_plain(text[pos:]))
    return "".join(out)


def _plain(text: str) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for ch in "*|[]_":
        text = text.replace(ch, "\\" + ch)
    return text


def cell(text: str) -> str:
    """One table cell: escaped, on one line."""
    return escape(" ".join(text.split()))


def code(text: str) -> str:
    """`text` as a code span, however many backticks it holds."""
    ticks = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def anchor(name: str) -> str:
    """A stable heading id: lower case, runs of other characters as one '-'."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
