"""Hand-made score rows of several judges for the panel tests (one row per judge, dialogue and dimension)."""
from __future__ import annotations

import datetime as dt

import pandas as pd

from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def row(judge: str, dialogue: str, dimension: str, score, *, model: str = "m1", probs=None, language: str = "en",
        card: str | None = None) -> dict:
    expected = None if probs is None else float(sum(k * p for k, p in enumerate(probs)))
    return {"run_id": "r", "dialogue_id": dialogue, "card_id": card or dialogue, "target_model": model,
            "language": language, "dimension": dimension, "score": None if score is None else float(score),
            "probs": probs, "expected": expected, "raw": str(score),
            "parse_status": "ok" if score is not None else "parse_failure", "judge": judge,
            "method": "logprob" if probs else "generate", "scored_at": T0, "run_dir": "runs/r"}


def frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows).astype({"score": "float64"})


def constant_rows(values: dict[tuple[str, str], int], n_dialogues: int = 3) -> pd.DataFrame:
    """{(judge, model): label}: every dialogue of the model gets that label on all seven dimensions."""
    rows = []
    models = sorted({m for _, m in values})
    for (judge, model), v in values.items():
        for i in range(n_dialogues):
            for dim in DIMENSION_NAMES:
                rows.append(row(judge, f"{model}-d{i}", dim, v, model=model))
    assert models
    return frame(rows)
