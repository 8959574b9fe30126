"""What an analysis command writes beside its terminal table: <stem>.md and <stem>.json (and any
extra file, such as a figure) in one local folder or storage URI, all or nothing (OutputFolder)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import pandas as pd

from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.sim.runs.open import OutputFolder


def report_folder(run_dirs, out=None):
    """Where an analysis of `run_dirs` (one run, or several: the first's) writes: `out`, else <first run>/report."""
    from esc_eval.sim.runs.storage import join_location

    first = run_dirs if isinstance(run_dirs, (str, os.PathLike)) else list(run_dirs)[0]
    return out or join_location(first, "report")


def markdown_table(headers: list[str], rows: list[list]) -> str:
    """A Markdown table (a cell's "|" written "/" so it cannot split the row), ending in a newline."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(str(c).replace("|", "/") for c in r) + " |" for r in rows]) + "\n"


def records(df: pd.DataFrame) -> list[dict]:
    """A table as JSON records (NaN -> null)."""
    return json.loads(df.to_json(orient="records"))


def write_markdown_json(out: str | Path, stem: str, markdown: str, data: dict,
                        extra: dict[str, Callable[[Path], None]] | None = None) -> dict[str, str]:
    """<stem>.md and <stem>.json (and each `extra` file, written by its function) in a folder or a storage URI."""
    with OutputFolder(out) as folder:
        files = {"markdown": folder / f"{stem}.md", "json": folder / f"{stem}.json"}
        files["markdown"].write_text(markdown, encoding="utf-8")
        files["json"].write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
        for name, write in (extra or {}).items():
            files[name] = folder / name
            write(files[name])
        return {k: str(v) for k, v in folder.finals(files).items()}


def one_judge(scores: pd.DataFrame, judge: str | None) -> tuple[pd.DataFrame, list[str]]:
    """The scores of one judge (`judge`, or the only one there is) and the judges the runs hold."""
    judges = sorted(scores["judge"].dropna().unique())
    if judge is None and len(judges) > 1:
        raise AnalysisInputError(f"scores from several judges {judges}: pick one with --judge")
    return (scores[scores["judge"] == judge] if judge is not None else scores), judges
