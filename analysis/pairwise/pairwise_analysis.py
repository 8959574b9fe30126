"""The pairwise analysis as one call, and its files: verdict counts (verdicts.py), the position-bias
audit (position_bias.py), Bradley-Terry ratings on an Elo scale with the tau against the pointwise
ranking (bradley_terry.py); written as pairwise.md, pairwise.json and pairwise_ratings.csv.

Bad input fails in one line before anything is written: no pairwise rows, a judge or dimension not
in them, fewer than 2 targets."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

import pandas as pd

from esc_eval.analysis.pairwise.bradley_terry import RATING_HEADERS, PairwiseRatings, bt_ratings, rating_rows
from esc_eval.analysis.pairwise.position_bias import BIAS_HEADERS, POOLED, bias_notes, bias_rows, position_bias
from esc_eval.analysis.pairwise.verdicts import COUNT_HEADERS, FLIP_NOTE, check_rows, combine_orders, count_rows
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.results.outputs import markdown_table
from esc_eval.sim.runs.open import OutputFolder

EXPLAIN = ("Each pair of targets' dialogues of the same card was judged on each dimension in both orders. "
           "Ratings: Bradley-Terry, on an Elo scale (1000 + 400/ln 10 x theta; a 400-point gap = 10:1 odds of "
           "being preferred), ties half a win each way; brackets: 95% intervals from {n_boot} bootstrap resamples "
           "of the cards. " + FLIP_NOTE)
TAU_HEADERS = ["Judge", "Pointwise scores of", "Targets", "Cards", "Kendall's tau [95% CI]", "Note"]


@dataclass
class PairwiseAnalysis:
    counts: pd.DataFrame  # verdicts.combine_orders counts
    bias: pd.DataFrame  # position_bias.BIAS_COLUMNS
    ratings: PairwiseRatings

    def notes(self) -> list[str]:
        return bias_notes(self.bias) + self.ratings.notes


def select_rows(rows: pd.DataFrame, judge: str | None = None, dimensions: list[str] | None = None) -> pd.DataFrame:
    """The rows of one judge and some dimensions, with one-line errors for what is not there."""
    check_rows(rows)
    judges = sorted(rows["judge"].fillna("unknown").unique())
    if judge is not None:
        if judge not in judges:
            raise AnalysisInputError(f"judge {judge!r} has no pairwise rows; the rows hold {judges}")
        rows = rows[rows["judge"] == judge]
    if dimensions:
        have = sorted(rows["dimension"].unique())
        missing = sorted(set(dimensions) - set(have))
        if missing:
            raise AnalysisInputError(f"dimension(s) {missing} have no pairwise rows; the rows hold {have}")
        rows = rows[rows["dimension"].isin(dimensions)]
    targets = set(rows["model_a"].unique()) | set(rows["model_b"].unique())
    if len(targets) < 2:
        raise AnalysisInputError(f"pairwise rows name {len(targets)} target(s): a rating needs at least 2")
    return rows


def analyse_pairwise(rows: pd.DataFrame, scores: pd.DataFrame | None = None, judge: str | None = None,
                     dimensions: list[str] | None = None, n_boot: int = 1000, seed: int = 0) -> PairwiseAnalysis:
    """rows: load_pairwise's; scores: load_scores' (for the tau with the pointwise ranking; None: none)."""
    rows = select_rows(rows, judge, dimensions)
    outcomes = combine_orders(rows)
    return PairwiseAnalysis(outcomes.counts, position_bias(rows),
                            bt_ratings(outcomes.table, scores, n_boot=n_boot, seed=seed))


def tau_rows(tau: pd.DataFrame) -> list[list]:
    def fmt(r) -> str:
        if pd.isna(r["tau"]):
            return "n/a"
        return f"{r['tau']:.2f}" + ("" if pd.isna(r["tau_lo"]) else f" [{r['tau_lo']:.2f}, {r['tau_hi']:.2f}]")

    return [[r["judge"], r["pointwise_judge"] or "n/a", r["models"], r["cards"], fmt(r), r["note"]]
            for _, r in tau.iterrows()]


def pairwise_markdown(result: PairwiseAnalysis) -> str:
    r = result.ratings
    pooled = r.ratings[r.ratings["dimension"] == POOLED]
    parts = [EXPLAIN.format(n_boot=r.n_boot), ""] + [f"> {n}\n" for n in result.notes()]
    parts += ["## Ratings, all dimensions pooled", "", markdown_table(RATING_HEADERS, rating_rows(pooled))]
    if not r.tau.empty:
        parts += ["## Agreement with the pointwise ranking", "", markdown_table(TAU_HEADERS, tau_rows(r.tau))]
    parts += ["## Position bias", "", markdown_table(BIAS_HEADERS, bias_rows(result.bias))]
    parts += ["## Verdicts: both orders combined", "", markdown_table(COUNT_HEADERS, count_rows(result.counts))]
    parts += ["## Ratings by dimension", "",
              markdown_table(RATING_HEADERS, rating_rows(r.ratings[r.ratings["dimension"] != POOLED]))]
    return "\n".join(parts)


def records(df: pd.DataFrame) -> list[dict]:
    return json.loads(df.to_json(orient="records", force_ascii=False, default_handler=str))


def pairwise_json(result: PairwiseAnalysis) -> dict:
    return {"n_boot": result.ratings.n_boot, "ties": FLIP_NOTE, "notes": result.notes(),
            "ratings": records(result.ratings.ratings), "tau": records(result.ratings.tau),
            "pointwise": records(result.ratings.pointwise), "position_bias": records(result.bias),
            "verdicts": records(result.counts)}


def write_pairwise(result: PairwiseAnalysis, out_dir: str | os.PathLike[str]) -> dict[str, str]:
    """pairwise.md, pairwise.json and pairwise_ratings.csv in a folder or storage URI; their paths by key."""
    with OutputFolder(out_dir) as out:
        files = {"markdown": out.path / "pairwise.md", "json": out.path / "pairwise.json",
                 "csv": out.path / "pairwise_ratings.csv"}
        files["markdown"].write_text("# Pairwise ratings\n\n" + pairwise_markdown(result), encoding="utf-8")
        files["json"].write_text(json.dumps(pairwise_json(result), indent=2, ensure_ascii=False) + "\n",
                                 encoding="utf-8")
        result.ratings.ratings.to_csv(files["csv"], index=False)
        return {k: str(v) for k, v in out.finals(files).items()}


def pairwise_of_runs(run_dirs: list[str], judge: str | None = None, dimensions: list[str] | None = None,
                     n_boot: int = 1000, seed: int = 0, out: str | None = None) -> tuple[str, dict[str, str]]:
    """`esc-eval analysis pairwise-ratings`: the runs' pairwise verdicts (and their pointwise scores, for
    the tau) analysed, written into `out` (default <first run>/report); the Markdown and the paths."""
    from esc_eval.analysis.results.loaders import load_pairwise, load_scores
    from esc_eval.analysis.results.outputs import report_folder

    result = analyse_pairwise(load_pairwise(run_dirs), load_scores(run_dirs), judge=judge, dimensions=dimensions,
                              n_boot=n_boot, seed=seed)
    return pairwise_markdown(result), write_pairwise(result, report_folder(run_dirs, out))
