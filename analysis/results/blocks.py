"""The blocks a report section is made of (report.html.jinja renders them; report.md too): a
section holds notices and blocks, a block is a table, a figure, a text or a dialogue. Every module
with a section builds it from these and registers it (section_registry.py)."""
from __future__ import annotations

from typing import Any, TypedDict

import pandas as pd


class Section(TypedDict):
    """One section of the report: its id (report.json's key for `data`), title, notices and blocks."""

    id: str
    title: str
    notices: list[dict]
    blocks: list[dict]
    data: Any  # what report.json holds under the id (None: nothing)


def notice(text: str, level: str = "warning") -> dict:
    return {"level": level, "text": text}


def table(headers: list[str], rows: list[list[Any]], text_cols: set[int] | None = None, caption: str = "",
          id: str = "") -> dict:
    return {"kind": "table", "headers": headers, "rows": [[cell(c) for c in r] for r in rows],
            "text_cols": text_cols if text_cols is not None else {0}, "caption": caption, "id": id}


def cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return "n/a"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def section(id: str, title: str) -> Section:
    return {"id": id, "title": title, "notices": [], "blocks": [], "data": None}


def text(text: str) -> dict:
    return {"kind": "text", "text": text}


def pct(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{100 * x:.1f}%"
