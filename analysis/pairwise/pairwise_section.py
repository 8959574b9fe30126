"""The report's "Pairwise ratings" section (order 280, after the human-anchored sections): the pooled
Bradley-Terry ratings on an Elo scale with a figure, the tau with the pointwise ranking, the
position-bias audit and how the two orders were combined; shown when the runs hold pairwise rows."""
from __future__ import annotations

import base64
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on servers / CI; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from esc_eval.analysis.pairwise.bradley_terry import RATING_HEADERS, rating_rows  # noqa: E402
from esc_eval.analysis.pairwise.pairwise_analysis import (  # noqa: E402
    EXPLAIN, TAU_HEADERS, analyse_pairwise, pairwise_json, tau_rows,
)
from esc_eval.analysis.pairwise.position_bias import BIAS_HEADERS, POOLED, bias_rows  # noqa: E402
from esc_eval.analysis.pairwise.verdicts import COUNT_HEADERS, count_rows  # noqa: E402
from esc_eval.analysis.results.blocks import Section, notice, section, table, text  # noqa: E402
from esc_eval.analysis.results.loaders import AnalysisInputError  # noqa: E402
from esc_eval.analysis.results.section_registry import register_section  # noqa: E402


def elo_figure(ratings: pd.DataFrame, judge: str, path: Path) -> Path:
    """The pooled Elo ratings of one judge with their intervals, best on top."""
    r = ratings[(ratings["judge"] == judge) & (ratings["dimension"] == POOLED)].sort_values("elo")
    fig, ax = plt.subplots(figsize=(6.5, 0.35 * len(r) + 1.2))
    err = [(r["elo"] - r["elo_lo"]).fillna(0), (r["elo_hi"] - r["elo"]).fillna(0)]
    ax.errorbar(r["elo"], range(len(r)), xerr=err, fmt="o", capsize=3)
    ax.set_yticks(range(len(r)), r["model"])
    ax.axvline(1000, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("Elo-scale rating (Bradley-Terry, all dimensions pooled)")
    ax.set_title(f"Pairwise ratings, judge {judge}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def pairwise_section(rows: pd.DataFrame, scores: pd.DataFrame | None, fig_dir: Path, n_boot: int = 1000,
                     seed: int = 0) -> Section:
    s = section("pairwise", "Pairwise ratings (beyond the paper)")
    try:
        result = analyse_pairwise(rows, scores, n_boot=n_boot, seed=seed)
    except AnalysisInputError as e:
        s["notices"].append(notice(f"No pairwise ratings: {e}.", "info"))
        return s
    r = result.ratings
    s["blocks"].append(text(EXPLAIN.format(n_boot=r.n_boot)))
    s["notices"] += [notice(n) for n in result.notes()]
    pooled = r.ratings[r.ratings["dimension"] == POOLED]
    s["blocks"].append(table(RATING_HEADERS, rating_rows(pooled), {0, 1, 2}, id="pairwise-ratings",
                             caption="Bradley-Terry ratings, all dimensions pooled (Elo scale)"))
    for judge in pooled["judge"].unique():
        p = elo_figure(r.ratings, judge, fig_dir / f"pairwise_{re.sub(r'[^A-Za-z0-9]', '_', judge)}.png")
        s["blocks"].append({"kind": "figure", "caption": f"Elo-scale ratings of judge {judge} with 95% intervals",
                            "path": p, "data": base64.b64encode(p.read_bytes()).decode("ascii")})
    if not r.tau.empty:
        s["blocks"].append(table(TAU_HEADERS, tau_rows(r.tau), {0, 1, 5}, id="pairwise-tau",
                                 caption="Kendall's tau: pairwise ratings vs the pointwise mean of the seven dimensions"))
    s["blocks"].append(table(BIAS_HEADERS, bias_rows(result.bias), {0, 1, 8}, id="pairwise-position-bias",
                             caption="Position bias (50% picks of the first shown = none)"))
    s["blocks"].append(table(COUNT_HEADERS, count_rows(result.counts), {0, 1}, id="pairwise-verdicts",
                             caption="Both orders combined (a flip counts as a tie)"))
    s["blocks"].append(table(RATING_HEADERS, rating_rows(r.ratings[r.ratings["dimension"] != POOLED]), {0, 1, 2},
                             id="pairwise-ratings-by-dimension", caption="Ratings by dimension"))
    s["data"] = pairwise_json(result)
    return s


# beyond the paper: pairwise verdicts, when the runs hold any (analysis/results/section_registry.py)
register_section("pairwise", 280, lambda c: pairwise_section(c.pairwise, c.scores, c.fig_dir, c.n_boot, c.seed),
                 when=lambda c: c.pairwise is not None and not c.pairwise.empty)
