"""Synthetic pairwise verdict rows with known target strengths (a Bradley-Terry model), written with
the real RunFolder writer (sim.runs.records.pairwise_row): for the tests and `esc-eval bench pairwise`.

Every card meets every pair of targets on every dimension, each pair asked in both orders. One
answer is drawn so: with probability `failure_rate` no usable answer (a parse failure); else with
probability `position_bias` the first-shown dialogue, whatever it holds; else a tie with probability
`tie_rate`; else the pair's model `a` with P = 1 / (1 + exp(theta_b - theta_a)). Card ids and
dialogue ids follow analysis/results/fake_runs.py, so verdicts can sit beside its dialogues and scores.
"""
from __future__ import annotations

import datetime as dt
import os
from itertools import combinations
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from esc_eval.sim.judging.dimensions import DIMENSION_NAMES
from esc_eval.sim.runs.records import dialogue_id, pairwise_row, stable_id
from esc_eval.sim.runs.runfolder import RunFolder


def fake_card_ids(n_cards: int) -> list[str]:
    """The card ids of analysis/results/fake_runs.py write_fake_run (every fifth card in zh)."""
    return [f"{'zh' if c % 5 == 4 else 'en'}-{c:06d}" for c in range(n_cards)]


def fake_verdict_frame(n_cards: int, models: Sequence[str], strengths: Sequence[float] | None = None, *,
                       dimensions: Sequence[str] = tuple(DIMENSION_NAMES), position_bias: float = 0.0,
                       tie_rate: float = 0.0, failure_rate: float = 0.0, judge: str = "fake/judge",
                       seed: int = 0, run_id: str = "fake") -> pd.DataFrame:
    """Every PAIRWISE_SCHEMA column, one row per (card, pair, dimension, order); strengths: theta per
    model (default: evenly spaced over [-1, 1] in the order given)."""
    if len(set(models)) < 2 or len(set(models)) != len(models):
        raise ValueError("fake verdicts need at least 2 distinct models, each named once")
    if strengths is not None and len(strengths) != len(models):
        raise ValueError(f"{len(strengths)} strengths for {len(models)} models")
    theta = dict(zip(models, np.linspace(-1, 1, len(models)) if strengths is None else strengths))
    models = sorted(models)
    rng = np.random.default_rng(seed)
    cards = fake_card_ids(n_cards)
    pairs = list(combinations(models, 2))  # sorted names: model_a < model_b
    grid = pd.MultiIndex.from_product([cards, range(len(pairs)), list(dimensions), ["ab", "ba"]],
                                      names=["card_id", "pair", "dimension", "order"]).to_frame(index=False)
    n = len(grid)
    a = np.array([p[0] for p in pairs], dtype=object)[grid["pair"]]
    b = np.array([p[1] for p in pairs], dtype=object)[grid["pair"]]
    p_a = 1 / (1 + np.exp(np.array([theta[y] - theta[x] for x, y in pairs])[grid["pair"]]))
    u = rng.random((4, n))
    first = np.where(grid["order"] == "ab", "a", "b")
    preferred = np.where(u[1] < position_bias, first,
                         np.where(u[2] < tie_rate, "tie", np.where(u[3] < p_a, "a", "b"))).astype(object)
    failed = u[0] < failure_rate
    preferred[failed] = None
    verdict = np.where(preferred == "tie", "tie", np.where(preferred == first, "first", "second")).astype(object)
    verdict[failed] = None
    lang = grid["card_id"].str[:2]
    did = {(c, m): dialogue_id(c, m, "fake/seeker", "official", 0) for c in cards for m in models}
    da = [did[(c, m)] for c, m in zip(grid["card_id"], a)]
    db = [did[(c, m)] for c, m in zip(grid["card_id"], b)]
    pair_ids = {k: stable_id("pair", *k) for k in set(zip(da, db))}
    at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    return pd.DataFrame({
        "run_id": run_id, "pair_id": [pair_ids[k] for k in zip(da, db)], "card_id": grid["card_id"], "language": lang,
        "strategy": "official", "seed": 0, "dialogue_a": da, "dialogue_b": db, "model_a": a, "model_b": b,
        "dimension": grid["dimension"], "order": grid["order"], "verdict": verdict, "preferred": preferred,
        "raw": np.where(failed, "?", verdict.astype(str)), "parse_status": np.where(failed, "parse_failure", "ok"),
        "judge": judge, "method": "generate", "probs": None, "error": None, "prompt_tokens": 1800,
        "latency_s": 0.2, "judged_at": at})


def write_fake_verdicts(path: str | os.PathLike[str], n_cards: int, models: Sequence[str],
                        strengths: Sequence[float] | None = None, part_rows: int = 50_000, **kw) -> Path | str:
    """fake_verdict_frame's rows as `pairwise` parts of the run folder at path (made if need be);
    kw: fake_verdict_frame's options (position_bias, tie_rate, failure_rate, judge, seed, ...)."""
    frame = fake_verdict_frame(n_cards, models, strengths, **kw)
    folder = RunFolder(path)
    # pandas' string columns hold a missing verdict as NaN; the row writer wants None
    records = [{k: None if isinstance(v, float) and v != v else v for k, v in r.items()}
               for r in frame.to_dict("records")]
    for i in range(0, len(records), part_rows):
        folder.write_part("pairwise", [pairwise_row(r) for r in records[i:i + part_rows]])
    if not folder.read_manifest():
        folder.update_manifest(run_id=kw.get("run_id", "fake"), kind="fake")
    return folder.path
