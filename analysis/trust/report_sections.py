"""The report's sections on human scores (`report --humans`): the leaderboard anchored on them
(analysis.trust.human_leaderboard) and each judge's calibration against them (analysis.trust.calibration_runs).

Blocks are the report's plain dicts (analysis/results/blocks.py); the two sections are registered
after Table 2 when the report has human scores; each section's `data` goes into report.json.
"""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pandas as pd

from esc_eval.analysis.trust.calibration_runs import HEADERS, calibrate, calibration_rows, reliability_figure, worse_notes
from esc_eval.analysis.trust.human_leaderboard import (
    CLAIM_HEADERS, EXPLAIN, anchored_wide, claims_rows, human_anchored, write_anchored,
)
from esc_eval.analysis.trust.human_scores import HumanScores
from esc_eval.analysis.results import blocks
from esc_eval.analysis.results.blocks import section
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.results.section_registry import register_section


def _records(df: pd.DataFrame) -> list[dict]:
    return json.loads(df.to_json(orient="records", force_ascii=False, default_handler=str))


def anchored_section(lb: pd.DataFrame, scores: pd.DataFrame, humans: HumanScores, out: Path) -> dict:
    """The section, and leaderboard_humans.md/.csv (every column's claims) in `out`."""
    s = section("human-anchored", "Leaderboard anchored on human scores (PPI)")
    table = human_anchored(scores, humans, lb)
    write_anchored(table, out, humans.source)
    s["blocks"].append({"kind": "text", "text": f"{EXPLAIN} Human scores: {humans.source} "
                                                f"({len(humans.dialogue_ids)} dialogues, {humans.n_annotators} annotators)."})
    if table.empty:
        s["notices"].append({"level": "info", "text": "No leaderboard rows: nothing to anchor."})
        return s
    headers, rows = anchored_wide(table)
    s["blocks"].append(blocks.table(headers, rows, {0, 1, 2}, id="human-anchored-table",
                                    caption="Human-scale means: PPI estimate [95% CI] (n = human-scored dialogues)"))
    s["blocks"].append(blocks.table(CLAIM_HEADERS, claims_rows(table), {0, 1, 2, 3}, id="human-claims",
                                    caption="Average: what each interval claims (every column: leaderboard_humans.md)"))
    missed = table[table["judge_off_scale"] == True]  # noqa: E712 - None = unknown
    if len(missed):
        s["notices"].append({"level": "warning", "text": (
            f"{len(missed)} of {int(table['judge_off_scale'].notna().sum())} cells: the judge is off people's scale "
            "(the mean of judge - human on the human-scored dialogues, its 95% interval excludes 0; "
            "leaderboard_humans.md lists them).")})
    for _, r in missed[missed["column"] == "Average"].iterrows():
        s["notices"].append({"level": "warning", "text": (
            f"{r['model']} ({r['language']}, judge {r['judge']}), Average: the judge is {r['offset']:+.1f} "
            f"[{r['offset_lo']:+.1f}, {r['offset_hi']:+.1f}] off people's scale (n = {r['n_human']} human scores); "
            f"the human-scale estimate is {r['ppi']:.1f} [{r['ppi_lo']:.1f}, {r['ppi_hi']:.1f}], the judge-only "
            f"interval [{r['judge_lo']:.1f}, {r['judge_hi']:.1f}].")})
    s["data"] = _records(table)
    return s


def calibration_section(scores: pd.DataFrame, humans: HumanScores, fig_dir: Path, n_boot: int, seed: int) -> dict:
    s = section("calibration", "Judge calibration against human scores")
    try:
        result = calibrate(scores, humans, n_boot=n_boot, seed=seed, strict=False)
    except AnalysisInputError as e:
        s["notices"].append({"level": "info", "text": f"No calibration: {e}."})
        return s
    s["blocks"].append({"kind": "text", "text": (
        "Each judge's stored P(0..4) against the human label (the low median of a dialogue's annotators). ECE: "
        "top-label, 10 bins (0 = calibrated); Brier: multi-class (0-2); CIs: bootstrap over dialogues. The "
        f"recalibrated figures are held out ({result.method}, {result.folds}-fold cross-fitting by dialogue); "
        "`esc-eval analysis calibration` writes that judge's rows. ECE is biased upwards in small samples (each "
        "resample's too), so its interval can sit just above a near-zero estimate.")})
    s["blocks"].append(blocks.table(HEADERS, calibration_rows(result), {0, 1, 9}, id="calibration-table"))
    s["notices"] += [{"level": "info", "text": n} for n in [*result.notes, *worse_notes(result)]]
    for judge in result.table["judge"].unique():
        path = fig_dir / f"calibration_{''.join(c if c.isalnum() else '_' for c in judge)}.png"
        p = reliability_figure(result, judge, path)
        s["blocks"].append({"kind": "figure", "caption": f"Reliability of {judge}: accuracy against confidence "
                                                         "per bin (marker size = dialogues)", "path": p,
                            "data": base64.b64encode(p.read_bytes()).decode("ascii")})
    s["data"] = _records(result.table.drop(columns=["fold_fits"]))
    return s


def trust_sections(lb: pd.DataFrame, board_scores: pd.DataFrame, scores: pd.DataFrame, humans: HumanScores,
                   fig_dir: Path, n_boot: int = 1000, seed: int = 0) -> list[dict]:
    """board_scores: what the leaderboard was built from (labels or expected scores); scores: the
    rows as stored (their P(0..4) is what calibration checks)."""
    return [anchored_section(lb, board_scores, humans, fig_dir.parent),
            calibration_section(scores, humans, fig_dir, n_boot, seed)]


# with human scores (report --humans), right after Table 2 (analysis/results/section_registry.py)
register_section("human-scores", 250, lambda c: trust_sections(c.leaderboard, c.board, c.scores, c.humans, c.fig_dir,
                                                               n_boot=c.n_boot, seed=c.seed),
                 when=lambda c: c.humans is not None)
