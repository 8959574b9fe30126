"""How long calibration and the human-anchored leaderboard take at the paper's scale (`esc-eval bench trust`).

A fake run folder of 8,500 dialogues (analysis.results.fake_runs: seven scores each with a P(0..4)), 500
of them scored by two annotators in an annotate store (SQLite, as `annotate` keeps it; each
annotator's score is the judge's label moved by one a third of the time). Timed in this process,
each step once, with the defaults as shipped (5 folds, 1,000 bootstrap resamples):
read the scores and the store; calibration (fit, cross-fit, CIs); the leaderboard with PPI;
writing the recalibrated judge's rows; the whole report without and with --humans (expected
scores). Both pages are opened in headless Chromium when one is installed (time to the load event).
"""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from esc_eval.analysis.annotation.store import AnnotationStore
from esc_eval.analysis.trust.calibration_runs import calibrate, write_calibrated_rows
from esc_eval.analysis.trust.human_leaderboard import human_anchored
from esc_eval.analysis.trust.human_scores import load_human_scores
from esc_eval.analysis.results.leaderboard import build_leaderboard
from esc_eval.analysis.results.loaders import load_scores
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, round(time.perf_counter() - t0, 3)


def write_human_store(path: Path, scores, n_human: int, annotators: tuple[str, ...] = ("ana", "ben"),
                      seed: int = 0) -> Path:
    """An annotate store with one study: n_human random dialogues, each scored by every annotator."""
    rng = np.random.default_rng(seed)
    ids = sorted(scores["dialogue_id"].unique())
    picked = [str(x) for x in rng.choice(ids, size=min(n_human, len(ids)), replace=False)]
    label = scores.set_index(["dialogue_id", "dimension"])["score"]
    store = AnnotationStore(path)
    store.create_study("bench", {"bench": True}, {a: [(d, "en") for d in picked] for a in annotators}, "bench")
    rows = [{"annotator": a, "dialogue_id": d, "dimension": dim,
             "score": int(np.clip(label[(d, dim)] + rng.choice([-1, 0, 0, 1]), 0, 4))}
            for a in annotators for d in picked for dim in DIMENSION_NAMES]
    store.import_answers("bench", rows, source="bench")
    store.close()
    return path


def open_in_chromium(html: Path) -> float | None:
    """Seconds from navigation to the load event of a local page in headless Chromium (None: no Chromium
    or no playwright installed)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright  # the dev extra's
    except ImportError:
        return None
    if exe is None:
        return None

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto("about:blank")
            t0 = time.perf_counter()
            page.goto(html.resolve().as_uri(), wait_until="load")
            return round(time.perf_counter() - t0, 3)
        finally:
            browser.close()


def bench_trust(run_dir: Path, n_human: int = 500, report: bool = True) -> dict[str, Any]:
    """Time each step (see the module docstring) on a run folder; the store goes beside it."""
    from esc_eval.analysis.report.report import write_report

    with tempfile.TemporaryDirectory(prefix="esc-eval-trust-bench-") as tmp:
        store = write_human_store(Path(tmp) / "annotations.sqlite", load_scores([run_dir]), n_human)
        t: dict[str, float] = {}
        scores, t["load_scores"] = _timed(lambda: load_scores([run_dir]))
        humans, t["load_humans"] = _timed(lambda: load_human_scores(store))
        result, t["calibration"] = _timed(lambda: calibrate(scores, humans))
        board, t["leaderboard"] = _timed(lambda: build_leaderboard(scores))
        anchored, t["ppi"] = _timed(lambda: human_anchored(scores, humans, board))
        t["calibration_and_ppi"] = round(t["load_scores"] + t["load_humans"] + t["calibration"] + t["ppi"], 3)
        _, t["write_calibrated_rows"] = _timed(lambda: write_calibrated_rows(result))
        out: dict[str, Any] = {
            "bench": "trust", "n_dialogues": int(scores["dialogue_id"].nunique()), "n_score_rows": int(len(scores)),
            "n_human_dialogues": len(humans.dialogue_ids), "annotators": humans.n_annotators,
            "judges_calibrated": int(result.table["judge"].nunique()), "ppi_cells": int(len(anchored)),
            "seconds": t, "target": {"calibration_and_ppi_s": 5.0, "report_open_s": 3.0},
            "notes": "calibration_and_ppi = reading the scores and the store + calibration (temperature, 5 folds, "
                     "1,000 bootstrap resamples per judge and dimension) + PPI for every leaderboard cell; the "
                     "leaderboard's own bootstrap is timed apart (it ran before this feature too).",
        }
        if report:
            # the reference in the same run: the report as it was before, labels and no human scores
            plain, t["report"] = _timed(lambda: write_report([run_dir], Path(tmp) / "plain"))
            paths, t["report_with_humans"] = _timed(lambda: write_report([run_dir], Path(tmp) / "report",
                                                                         humans=humans, score_kind="expected"))
            out["report_html_bytes"] = {"report": plain["html"].stat().st_size,
                                        "report_with_humans": paths["html"].stat().st_size}
            out["report_open_s"] = {"report": open_in_chromium(plain["html"]),
                                    "report_with_humans": open_in_chromium(paths["html"])}
        return out
