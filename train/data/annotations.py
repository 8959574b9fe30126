"""Human annotation tables for ESC-RANK training.

Format (CSV, Parquet, JSON or JSONL; one row per annotator's score of one dialogue on one
dimension):

    dialogue_id   str   id of a dialogue in the dialogue sources (run folder dialogue_id, or
                        "<file stem>:<key>" for the official JSON, "<file stem>:<index>" for ESConv)
    dimension     str   paper name (fluency, expression, empathy, information, skillful, humanoid,
                        overall) or official key (fluency, diversity, empathic, suggestion, tech,
                        human, overall); stored as the paper name. Rows of a dimension beyond the
                        paper (safety, which a study may also ask for) are skipped: ESC-RANK has no
                        adapter for it to train
    score         int   0..4
    annotator     str   who scored (optional column; default "annotator")
    target_model  str   optional; the model under test (else taken from the dialogue)

JSON may be a list of such objects, or the official score layout {"<key>": {"fluency": 3, ...}}
when read with `load_official_scores(path, annotator=...)`.

No public copy of the paper's human annotations exists; the tests build their own tables.
"""
from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Literal

from esc_eval.sim.judging.dimensions import is_paper_dimension, to_dimension
from esc_eval.train.config import OFFICIAL_ANNOTATOR
from esc_eval.train.errors import TrainInputError

REQUIRED_COLUMNS = ("dialogue_id", "dimension", "score")
UNNAMED_ANNOTATOR = "annotator"  # a label whose file names no annotator (judge examples carry it on)
Aggregate = Literal["median", "each"]


@dataclass(frozen=True)
class Annotation:
    """One (dialogue, dimension) label; `annotator` is 'median' after aggregation."""

    dialogue_id: str
    dimension: str
    score: int
    annotator: str = UNNAMED_ANNOTATOR
    target_model: str | None = None


def _rows_from_file(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        raise TrainInputError(f"{path}: annotation table not found")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            import pandas as pd

            return pd.read_csv(path, dtype={"dialogue_id": str, "annotator": str}).to_dict("records")
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path).to_pylist()
        if suffix == ".jsonl":
            return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if suffix == ".json":
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, list):
                raise TrainInputError(f"{path}: expected a list of annotation rows (for the official score "
                                      "layout use load_official_scores)")
            return data
    except TrainInputError:
        raise
    except Exception as e:  # parse errors of any reader
        raise TrainInputError(f"{path}: cannot read the annotation table ({e})") from None
    raise TrainInputError(f"{path}: unknown annotation table format {suffix!r} (csv, parquet, json, jsonl)")


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip())


def validate_rows(rows: Iterable[dict[str, Any]], where: str = "annotations") -> list[Annotation]:
    """Validate raw rows; the first bad one raises TrainInputError naming the row and the field."""
    out = []
    for i, row in enumerate(rows):
        at = f"{where} row {i}"
        if not isinstance(row, dict):
            raise TrainInputError(f"{at}: expected an object, got {type(row).__name__}")
        for col in REQUIRED_COLUMNS:
            if col not in row or _missing(row[col]):
                raise TrainInputError(f"{at}: missing field {col!r}")
        try:
            dimension = to_dimension(str(row["dimension"]))
        except ValueError as e:
            raise TrainInputError(f"{at}: field 'dimension': {e}") from None
        if not is_paper_dimension(dimension):
            continue
        raw = row["score"]
        try:
            score_f = float(raw)
        except (TypeError, ValueError):
            raise TrainInputError(f"{at}: field 'score' is {raw!r}, not a number 0-4") from None
        if not score_f.is_integer() or not 0 <= score_f <= 4:
            raise TrainInputError(f"{at}: field 'score' is {raw!r}; scores are integers 0-4")
        annotator = row.get("annotator")
        tm = row.get("target_model")
        out.append(Annotation(
            dialogue_id=str(row["dialogue_id"]).strip(), dimension=dimension, score=int(score_f),
            annotator="annotator" if _missing(annotator) else str(annotator),
            target_model=None if _missing(tm) else str(tm),
        ))
    if not out:
        raise TrainInputError(f"{where}: the annotation table is empty")
    return out


def load_annotations(path: str | Path) -> list[Annotation]:
    """Read and validate an annotation table (format in the module docstring)."""
    path = Path(path)
    return validate_rows(_rows_from_file(path), where=str(path))


def load_official_scores(path: str | Path, annotator: str = OFFICIAL_ANNOTATOR) -> list[Annotation]:
    """The release's score JSON {"0": {"fluency": 3, ...}} as annotation rows; dialogue ids are
    "<file stem>:<key>", matching `load_official_dialogues` on the same-named dialogue file.
    Unparsed official scores (-1) are skipped."""
    from esc_eval.sim.runs.official import OfficialFormatError, read_official_scores

    path = Path(path)
    try:
        scores = read_official_scores(path, model=path.stem, language="-")  # ids only need the stem
    except OfficialFormatError as e:
        raise TrainInputError(f"{path}: cannot read official scores ({e})") from None
    rows = [{"dialogue_id": r["dialogue_id"], "dimension": r["dimension"], "score": r["score"], "annotator": annotator}
            for r in scores if r["score"] is not None]
    return validate_rows(rows, where=str(path))


def aggregate_annotations(annotations: Iterable[Annotation], how: Aggregate = "median") -> list[Annotation]:
    """One label per (dialogue, dimension): the low median of the annotators (how="median"), or
    every annotator's row kept as its own example (how="each")."""
    annotations = list(annotations)
    if how == "each":
        return annotations
    if how != "median":
        raise TrainInputError(f"unknown aggregation {how!r} (median | each)")
    groups: dict[tuple[str, str], list[Annotation]] = defaultdict(list)
    for a in annotations:
        groups[(a.dialogue_id, a.dimension)].append(a)
    return [Annotation(dialogue_id=d, dimension=dim, score=int(statistics.median_low([a.score for a in g])),
                       annotator="median" if len(g) > 1 else g[0].annotator, target_model=g[0].target_model)
            for (d, dim), g in groups.items()]
