"""Synthetic run folders written with the real RunFolder writer (no models): for the viewer's
benchmark and for checking commands on folders of many dialogues (e.g. 8,500 like the paper's).

Every dialogue is 11 turns (greeting + 5 rounds) of varied text; every dialogue gets seven scores
with a P(0..4) vector, drawn from a per-model level so that models differ.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import os
from pathlib import Path
from typing import Any

import numpy as np

from esc_eval.sim.judging.dimensions import DIMENSION_NAMES
from esc_eval.sim.runs.records import dialogue_id as make_dialogue_id
from esc_eval.sim.runs.runfolder import RunFolder
from esc_eval.sim.runs.storage import is_uri

_WORDS = ("anxious job sleep family friend boss exam money lonely partner breakup grief move city school "
          "tired angry sad hopeless stressed worried talk help listen understand feel try plan week").split()
_CATEGORIES = [("Life", "Work", "Workplace stress"), ("Emotion", "Family", "Parent conflict"),
               ("Life", "Study", "Exam pressure"), ("Emotion", "Love", "Breakup"), ("Life", "Health", "Insomnia")]


def _sentence(rng: np.random.Generator, n: int) -> str:
    return " ".join(_WORDS[i] for i in rng.integers(0, len(_WORDS), n)).capitalize() + "."


def write_fake_run(path: str | os.PathLike[str], n_dialogues: int, models: list[str] | None = None,
                   part_rows: int = 64, seed: int = 0, run_id: str = "fake", judge: str = "fake/judge",
                   seeds_per_card: int = 1) -> Path | str:
    """A run folder of n_dialogues ok dialogues (cards x models x seeds) and their seven scores each.

    part_rows: rows per Parquet part, like the batch layer's flush (64 rows)."""
    models = models or ["model-a", "model-b"]
    rng = np.random.default_rng(seed)
    folder = RunFolder(path)
    level = {m: 1.5 + 2.0 * i / max(1, len(models) - 1) for i, m in enumerate(models)}
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    dialogues: list[dict[str, Any]] = []
    scores: list[dict[str, Any]] = []
    per_card = len(models) * seeds_per_card
    for i in range(n_dialogues):
        card, rest = divmod(i, per_card)
        model, s = models[rest % len(models)], rest // len(models)
        lang = "zh" if card % 5 == 4 else "en"
        card_id = f"{lang}-{card:06d}"
        did = make_dialogue_id(card_id, model, "fake/seeker", "official", s)
        turns = [{"index": k, "speaker": "assistant" if k % 2 == 0 else "seeker", "text": _sentence(rng, 12 + k),
                  "prompt_tokens": 200 + 40 * k, "completion_tokens": 30, "latency_s": 0.5, "finish_reason": "stop"}
                 for k in range(11)]
        cats = _CATEGORIES[card % len(_CATEGORIES)]
        at = t0 + dt.timedelta(seconds=i)
        dialogues.append({
            "run_id": run_id, "dialogue_id": did, "card_id": card_id, "language": lang, "category_1": cats[0],
            "category_2": cats[1], "category_3": cats[2], "card_source": "fake", "target_model": model,
            "role_model": "fake/seeker", "strategy": "official", "seed": s, "target_params": "{}",
            "role_params": "{}", "turns": turns, "n_turns": 11, "status": "ok", "termination_reason": "completed",
            "error": None, "attempts": 1, "prompt_tokens": sum(t["prompt_tokens"] for t in turns),
            "completion_tokens": 330, "started_at": at, "finished_at": at})
        for dim in DIMENSION_NAMES:
            score = int(np.clip(round(level[model] + rng.normal(0, 0.8)), 0, 4))
            probs = np.full(5, 0.05)
            probs[score] = 0.8
            scores.append({
                "run_id": run_id, "dialogue_id": did, "target_model": model, "language": lang, "dimension": dim,
                "score": score, "probs": probs.tolist(), "expected": float(probs @ np.arange(5)),
                "raw": f"{score}", "parse_status": "ok", "judge": judge, "method": "logprob", "parser": "strict",
                "error": None, "prompt_tokens": 900, "latency_s": 0.1, "scored_at": at})
        if len(dialogues) >= part_rows:
            folder.write_part("dialogues", dialogues)
            folder.write_part("scores", scores)
            dialogues, scores = [], []
    folder.write_part("dialogues", dialogues)
    folder.write_part("scores", scores)
    folder.update_manifest(run_id=run_id, kind="fake", n_dialogues=n_dialogues)
    return folder.path if not is_uri(path) else str(path)  # a storage URI has no local path


@contextlib.contextmanager
def fake_run_folder(folder: Path | None, dialogues: int, models: int, part_rows: int = 64, what: str = "bench"):
    """(the run folder, seconds it took to build or None): `folder` as given, built with fake dialogues
    if it holds none, or a temporary one removed afterwards (the benchmarks of the viewer, the
    annotation server and the trust analyses run on it)."""
    import tempfile
    import time

    tmp = None
    if folder is None:
        tmp = tempfile.TemporaryDirectory(prefix=f"esc-eval-{what}-bench-")
        folder = Path(tmp.name) / "run"
    try:
        build_s = None
        if not list((Path(folder) / "dialogues").glob("part-*.parquet")):
            t0 = time.perf_counter()
            write_fake_run(folder, dialogues, [f"model-{i:02d}" for i in range(models)], part_rows=part_rows)
            build_s = round(time.perf_counter() - t0, 1)
        yield Path(folder), build_s
    finally:
        if tmp is not None:
            tmp.cleanup()
