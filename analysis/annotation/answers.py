"""One answer of the human evaluation, wherever it comes from (the annotation page, an imported
sheet, a human-score table): the checks it passes before anything is stored (a score 0-4, a known
dimension, a duration), a study's dimensions, and the answers table's columns and long layout.
annotation_store.py keeps them in SQLite."""
from __future__ import annotations

from typing import Any

import pandas as pd

from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, SAFETY, to_dimension

ANSWER_COLUMNS = ["study", "annotator", "dialogue_id", "dimension", "score", "seconds", "rubric_version", "answered_at",
                  "source"]


class AnnotationStoreError(AnalysisInputError):
    """Bad input to the store (unknown study, annotator or token, a score outside 0-4): nothing was written."""


def check_score(score: Any) -> int:
    """An integer 0-4 (4.0 is accepted, 2.5, 5, "x" and True are not)."""
    if isinstance(score, bool) or score is None:
        raise AnnotationStoreError(f"score {score!r} is not an integer 0-4")
    try:
        value = float(score)
    except (TypeError, ValueError):
        raise AnnotationStoreError(f"score {score!r} is not an integer 0-4") from None
    if not value.is_integer() or not 0 <= value <= 4:
        raise AnnotationStoreError(f"score {score!r} is outside the integers 0-4")
    return int(value)


def check_dimension(dimension: Any) -> str:
    try:
        return to_dimension(str(dimension))
    except ValueError as e:
        raise AnnotationStoreError(str(e)) from None


def study_dimensions(config: dict[str, Any]) -> list[str]:
    """A stored study config's dimensions: the seven, then safety when the study asked for it
    (studies made before safety existed have the seven)."""
    return [*DIMENSION_NAMES, *([SAFETY] if config.get("safety") else [])]


def check_seconds(seconds: Any) -> float | None:
    if seconds is None:
        return None
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        raise AnnotationStoreError(f"seconds {seconds!r} is not a number") from None
    if not 0 <= value < 1e7:
        raise AnnotationStoreError(f"seconds {seconds!r} is not a duration")
    return value


def answers_long(answers: pd.DataFrame) -> pd.DataFrame:
    """Store answer rows -> the long annotation layout of analysis.annotation.sheets (annotator,
    dialogue_id, dimension, score as float), what the agreement functions read."""
    return pd.DataFrame({"annotator": answers["annotator"].astype(str), "dialogue_id": answers["dialogue_id"].astype(str),
                         "dimension": answers["dimension"].astype(str), "score": answers["score"].astype(float)})
