"""The blocks a report section is made of (report.html.jinja renders them; report.md too): a
section holds notices and blocks, a block is a table, a figure, a text or a dialogue. Modules with
a section of their own (safety.py, seekers.py) build it from these."""
from __future__ import annotations

from typing import Any

import pandas as pd


def _notice(text: str, level: str = "warning") -> dict:
    return {"level": level, "text": text}


def _table(headers: list[str], rows: list[list[Any]], text_cols: set[int] | None = None, caption: str = "",
           id: str = "") -> dict:
    return {"kind": "table", "headers": headers, "rows": [[_cell(c) for c in r] for r in rows],
            "text_cols": text_cols if text_cols is not None else {0}, "caption": caption, "id": id}


def _cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return "n/a"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def _section(id: str, title: str) -> dict:
    return {"id": id, "title": title, "notices": [], "blocks": []}


def _text(text: str) -> dict:
    return {"kind": "text", "text": text}


def _pct(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{100 * x:.1f}%"


# public names for the sections built outside report.py
notice, table, cell, section, text, pct = _notice, _table, _cell, _section, _text, _pct
