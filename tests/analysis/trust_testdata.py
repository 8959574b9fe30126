"""Synthetic miscalibrated judges and the run folders / human scores built from them, for the
calibration and human-anchored leaderboard tests."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd

from analysis_testdata import dialogue_row
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def synthetic_judge(n: int, scale: float, seed: int, spread: float = 1.5) -> tuple[np.ndarray, np.ndarray]:
    """(the judge's P(0..4), human labels): labels drawn from softmax(z), the judge reports
    softmax(scale * z): overconfident for scale > 1, underconfident below 1, calibrated at 1."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, spread, (n, 5))
    truth = softmax(z)
    labels = (rng.random((n, 1)) > truth.cumsum(axis=1)).sum(axis=1)
    return softmax(scale * z), np.minimum(labels, 4)


def judged_run(make_run, n: int = 120, models: tuple[str, ...] = ("m1", "m2"), scale: float = 2.5,
               judge: str = "judge-p", seed: int = 0, name: str = "run", probs: bool = True) -> tuple[Path, dict]:
    """A run folder whose judge gives an overconfident P(0..4) on every dimension, and each
    (dialogue, dimension)'s true label (what the human annotators of the tests say)."""
    dialogues, scores, truth = [], [], {}
    p, labels = synthetic_judge(n * len(DIMENSION_NAMES), scale, seed)
    k = 0
    for i in range(n):
        model = models[i % len(models)]
        did = f"{name}-d{i:04d}"
        dialogues.append(dialogue_row(did, model, card_id=f"c{i // len(models)}", run_id=name))
        for dim in DIMENSION_NAMES:
            v = p[k]
            scores.append({
                "run_id": name, "dialogue_id": did, "target_model": model, "language": "en", "dimension": dim,
                "score": int(v.argmax()), "probs": v.tolist() if probs else None,
                "expected": float(v @ np.arange(5)) if probs else None, "raw": str(int(v.argmax())),
                "parse_status": "ok", "judge": judge, "method": "logprob" if probs else "generate", "parser": "strict",
                "error": None, "prompt_tokens": 100, "latency_s": 0.5, "scored_at": T0,
                "probs_status": "full" if probs else None})
            truth[(did, dim)] = int(labels[k])
            k += 1
    return make_run(name, dialogues=dialogues, scores=scores), truth


def human_sheet(path: Path, truth: dict, dialogue_ids: list[str], annotators=("ana", "ben"), seed: int = 0,
                noise: float = 0.0) -> Path:
    """A long annotation CSV: each annotator gives the true label (moved by one with probability `noise`)."""
    rng = np.random.default_rng(seed)
    rows = []
    for did in dialogue_ids:
        for dim in DIMENSION_NAMES:
            for a in annotators:
                s = truth[(did, dim)] + (int(rng.choice([-1, 1])) if rng.random() < noise else 0)
                rows.append({"dialogue_id": did, "annotator": a, "dimension": dim, "score": int(np.clip(s, 0, 4))})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path
