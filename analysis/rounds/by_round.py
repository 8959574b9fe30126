"""Scores by round (beyond the paper): each target's score as its dialogues stood after each round,
and where its support degrades or improves, from a by-round run folder (`esc-eval score --by-round`:
sim/runs/by_round.py cuts each dialogue after each round and the judge scores the prefixes).

Per (language, target, judge, round): the mean of the seven dimensions x 25 over the dialogues that
reached the round, with a percentile bootstrap CI resampling cards (a card's dialogues together).
The change from the first round to each dialogue's last (the whole dialogue), paired by dialogue,
with its CI: "degrades" when the CI is below 0, "improves" above, else "holds".
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from esc_eval.analysis.results.blocks import section, table, text
from esc_eval.analysis.results.loaders import AnalysisInputError, load_scores
from esc_eval.analysis.results.ratio_ci import ratio_ci
from esc_eval.analysis.results.section_registry import ReportContext, register_section
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, TABLE_SCALE
from esc_eval.sim.runs.by_round import ROUND_PREFIX, split_prefix_id
from esc_eval.sim.runs.open import OutputFolder

KEYS = ["language", "target_model", "judge"]


def round_values(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per scored prefix: dialogue (the whole dialogue's id), round, card_id, KEYS and `value`,
    the mean of its seven dimensions' scores x 25 (dimensions without a usable score left out)."""
    cols = [*KEYS, "dialogue", "round", "card_id", "value"]
    if scores.empty:
        return pd.DataFrame(columns=cols)
    s = scores[scores["dimension"].isin(DIMENSION_NAMES) & scores["score"].notna()]
    split = s["dialogue_id"].map(split_prefix_id)
    s = s[split.notna()].assign(dialogue=split.dropna().map(lambda x: x[0]), round=split.dropna().map(lambda x: x[1]))
    if s.empty:
        return pd.DataFrame(columns=cols)
    card = s["card_id"] if "card_id" in s.columns else s["dialogue"]
    s = s.assign(card_id=card.fillna(s["dialogue"]))
    out = s.groupby([*KEYS, "dialogue", "round", "card_id"], dropna=False)["score"].mean().mul(TABLE_SCALE)
    return out.rename("value").reset_index()[cols]


def _cluster_mean_ci(values: np.ndarray, cards: np.ndarray, n_boot: int, seed: int) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean, resampling cards with all their dialogues."""
    labels, inverse = np.unique(cards, return_inverse=True)
    if n_boot <= 0 or len(labels) < 2:
        return float("nan"), float("nan")
    sums, counts = np.zeros((len(labels), 1)), np.zeros(len(labels))
    np.add.at(sums, inverse, values[:, None])
    np.add.at(counts, inverse, 1.0)
    lo, hi = ratio_ci(sums, counts, n_boot, seed, 0.95)
    return float(lo[0]), float(hi[0])


def round_table(values: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per KEYS and round: n dialogues, mean value and its CI over cards."""
    rows = []
    for key, g in values.groupby([*KEYS, "round"], sort=True):
        lo, hi = _cluster_mean_ci(g["value"].to_numpy(float), g["card_id"].astype(str).to_numpy(), n_boot, seed)
        rows.append({**dict(zip([*KEYS, "round"], key)), "n": len(g), "mean": float(g["value"].mean()),
                     "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows, columns=[*KEYS, "round", "n", "mean", "ci_low", "ci_high"])


def round_change(values: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per KEYS: each dialogue's value at its last scored round minus its first, the mean change with
    its CI over cards, and the verdict (degrades | improves | holds; n/a without a CI)."""
    rows = []
    for key, g in values.groupby(KEYS, sort=True):
        by = g.sort_values("round").groupby("dialogue")
        first, last = by.first(), by.last()
        both = first.add_suffix("_first").join(last.add_suffix("_last"))
        both = both[both["round_last"] > both["round_first"]]
        if both.empty:
            continue
        change = (both["value_last"] - both["value_first"]).to_numpy(float)
        lo, hi = _cluster_mean_ci(change, both["card_id_first"].astype(str).to_numpy(), n_boot, seed)
        verdict = "n/a" if np.isnan(lo) else "degrades" if hi < 0 else "improves" if lo > 0 else "holds"
        rows.append({**dict(zip(KEYS, key)), "n": len(both), "first_round": int(both["round_first"].min()),
                     "last_round_median": float(both["round_last"].median()), "first": float(both["value_first"].mean()),
                     "last": float(both["value_last"].mean()), "change": float(change.mean()), "ci_low": lo,
                     "ci_high": hi, "verdict": verdict})
    return pd.DataFrame(rows, columns=[*KEYS, "n", "first_round", "last_round_median", "first", "last", "change",
                                       "ci_low", "ci_high", "verdict"])


def _ci(lo: float, hi: float) -> str:
    return "-" if np.isnan(lo) else f"[{lo:.1f}, {hi:.1f}]"


def rounds_markdown(by_round: pd.DataFrame, change: pd.DataFrame) -> str:
    if by_round.empty:
        return "_No scores by round: score a run with `esc-eval score --by-round`._\n"
    lines = ["## Change from the first round to the whole dialogue (x 25, bootstrap 95% CI over cards)\n",
             "| Language | Target | Judge | n | First | Whole dialogue | Change | 95% CI | Verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for _, r in change.iterrows():
        lines.append(f"| {r['language']} | {r['target_model']} | {r['judge']} | {r['n']} | {r['first']:.1f} | "
                     f"{r['last']:.1f} | {r['change']:+.1f} | {_ci(r['ci_low'], r['ci_high'])} | {r['verdict']} |")
    lines += ["", "## Score by round (mean of the seven dimensions x 25)\n",
              "| Language | Target | Judge | Round | n | Mean | 95% CI |", "|---|---|---|---|---|---|---|"]
    for _, r in by_round.iterrows():
        lines.append(f"| {r['language']} | {r['target_model']} | {r['judge']} | {r['round']} | {r['n']} | "
                     f"{r['mean']:.1f} | {_ci(r['ci_low'], r['ci_high'])} |")
    return "\n".join(lines) + "\n"


def rounds_analysis(run_dirs: list[str], n_boot: int = 1000, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    values = round_values(load_scores(run_dirs))
    if values.empty:
        raise AnalysisInputError(f"{', '.join(map(str, run_dirs))}: no scores by round (score a run with "
                                 "`esc-eval score -i RUN --by-round -o OUT`, then analyse OUT)")
    return round_table(values, n_boot, seed), round_change(values, n_boot, seed)


def write_rounds(run_dirs: list[str], out: str | None = None, n_boot: int = 1000, seed: int = 0) -> tuple[dict[str, str], str]:
    """rounds.md, rounds.csv (score by round) and rounds_change.csv into `out` (default <first run>/report)."""
    from esc_eval.analysis.results.outputs import report_folder

    out = report_folder(run_dirs, out)
    by_round, change = rounds_analysis(run_dirs, n_boot, seed)
    markdown = "# Scores by round\n\n" + rounds_markdown(by_round, change)
    with OutputFolder(out) as folder:
        md, csv, ch = folder / "rounds.md", folder / "rounds.csv", folder / "rounds_change.csv"
        md.write_text(markdown, encoding="utf-8")
        by_round.to_csv(csv, index=False)
        change.to_csv(ch, index=False)
        paths = folder.finals({"markdown": md, "csv": csv, "change_csv": ch})
    return {k: str(v) for k, v in paths.items()}, markdown


def rounds_section(scores: pd.DataFrame, n_boot: int, seed: int) -> dict[str, Any]:
    s = section("rounds", "Scores by round (beyond the paper)")
    values = round_values(scores)
    s["blocks"].append(text("Each dialogue scored as it stood after each round (the dialogue so far, ending with the "
                            "target's reply; esc-eval score --by-round): the mean of the seven dimensions x 25 per "
                            "round, and the change from the first round to the whole dialogue, paired by dialogue, "
                            "with bootstrap 95% CIs over cards. This folder's other tables pool the prefixes of every "
                            "round as dialogues: read Table 2 from the run the prefixes were cut from."))
    if values.empty:
        s["blocks"].append(text("No scores by round."))
        return s
    by_round, change = round_table(values, n_boot, seed), round_change(values, n_boot, seed)
    s["blocks"].append(table(["Language", "Target", "Judge", "n", "First", "Whole dialogue", "Change", "95% CI", "Verdict"],
                             [[r["language"], r["target_model"], r["judge"], r["n"], round(r["first"], 1),
                               round(r["last"], 1), round(r["change"], 1), _ci(r["ci_low"], r["ci_high"]), r["verdict"]]
                              for _, r in change.iterrows()], {0, 1, 2, 7, 8}, caption="Change over the rounds",
                             id="rounds-change"))
    s["blocks"].append(table(["Language", "Target", "Judge", "Round", "n", "Mean", "95% CI"],
                             [[r["language"], r["target_model"], r["judge"], r["round"], r["n"], round(r["mean"], 1),
                               _ci(r["ci_low"], r["ci_high"])] for _, r in by_round.iterrows()], {0, 1, 2, 6},
                             caption="Score by round", id="rounds"))
    s["data"] = {"change": json.loads(change.to_json(orient="records")), "by_round": json.loads(by_round.to_json(orient="records"))}
    return s


def has_rounds(ctx: ReportContext) -> bool:
    d = ctx.dialogues
    return bool(not d.empty and "termination_reason" in d.columns and (d["termination_reason"] == ROUND_PREFIX).any())


# beyond the paper: scores by round (analysis/results/section_registry.py)
register_section("rounds", 960, lambda c: rounds_section(c.scores, c.n_boot, c.seed), when=has_rounds)
