"""Scores by round (beyond the paper): each target's score round by round and where its support
changes, from a by-round run folder (`esc-eval score --by-round`, the judge rating the dialogue so
far, or `--by-reply`, the judge rating each round's reply alone in its context: sim/runs/by_round.py
cuts each dialogue after each round and the judge scores the cuts).

Per (language, target, judge, round): the mean of the seven dimensions x 25 over the cohort (the
dialogues that reached the cohort's round: change_point.py, the same dialogues at every round) and,
beside it, over the survivors (every dialogue that reached the round: n), each with a percentile
bootstrap CI resampling cards (a card's dialogues together). The verdict comes from the cohort's
curve: where it changes, with an interval (change_point.py `round_change_point`). The earlier
verdict, the first round against each dialogue's last (`round_change`), is kept for comparison and
is no longer printed: a failure from round 4 was diluted by rounds 1-3 and never located.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from esc_eval.analysis.checks.registry import VerdictCheck, register_check
from esc_eval.analysis.results.blocks import section, table, text
from esc_eval.analysis.results.loaders import AnalysisInputError, load_scores
from esc_eval.analysis.rounds.change_point import (MIN_CARDS, cohort, round_change_point, round_interval, rule_of,
                                                   verdict_text)
from esc_eval.analysis.results.ratio_ci import ratio_ci
from esc_eval.analysis.results.section_registry import ReportContext, register_section
from esc_eval.analysis.judgments.windowed import windowed_line
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


TABLE_COLUMNS = [*KEYS, "rule", "round", "n", "mean", "ci_low", "ci_high", "cohort_round", "cohort_n", "cohort_mean",
                 "cohort_ci_low", "cohort_ci_high"]


def round_table(values: pd.DataFrame, n_boot: int = 1000, seed: int = 0, cohort_at: int | None = None) -> pd.DataFrame:
    """Per KEYS and round: the survivors (n dialogues that reached it), their mean and its CI over cards;
    and the cohort's (the dialogues that reached the cohort's round: change_point.cohort) at rounds up to it."""
    rows = []
    for key, g in values.groupby(KEYS, sort=True):
        c, at = cohort(g, cohort_at)
        for k, gr in g.groupby("round", sort=True):
            lo, hi = _cluster_mean_ci(gr["value"].to_numpy(float), gr["card_id"].astype(str).to_numpy(), n_boot, seed)
            cr = c[c["round"] == k]
            same = len(cr) == len(gr)  # every survivor is in the cohort (the cohort's rounds are a subset of theirs)
            clo, chi = (lo, hi) if same else _cluster_mean_ci(cr["value"].to_numpy(float),
                                                              cr["card_id"].astype(str).to_numpy(), n_boot, seed)
            rows.append({**dict(zip(KEYS, key)), "rule": rule_of(str(key[2])), "round": k, "n": len(gr),
                         "mean": float(gr["value"].mean()), "ci_low": lo, "ci_high": hi, "cohort_round": at,
                         "cohort_n": len(cr), "cohort_mean": float(cr["value"].mean()) if len(cr) else float("nan"),
                         "cohort_ci_low": clo, "cohort_ci_high": chi})
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def round_change(values: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The earlier verdict, kept for comparison (no output prints it; round_change_point replaces it):
    per KEYS, each dialogue's value at its last scored round minus its first, the mean change with
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
    return "-" if lo is None or hi is None or np.isnan(lo) or np.isnan(hi) else f"[{lo:.1f}, {hi:.1f}]"


def _f(v: float, sign: str = "") -> str:
    return "-" if v is None or v != v else f"{v:{sign}.1f}"


def _with_ci(v: float, lo: float, hi: float, sign: str = "") -> str:
    """'-4.5 [-6.2, -3.6]'; the bare value without an interval."""
    ci = _ci(lo, hi)
    return _f(v, sign) if ci == "-" or v != v else f"{_f(v, sign)} {ci}"


CHANGE_HEAD = ["Language", "Target", "Judge", "Rule", "Cohort", "Cards", "Change at round [95%]", "Before", "After",
               "Change", "p", "Verdict", "Note"]
ROUND_HEAD = ["Language", "Target", "Judge", "Rule", "Round", "Cohort n", "Cohort mean [95% CI]", "Survivors n",
              "Survivors mean [95% CI]"]
RULES_NOTE = ("Rule 'prefix' (`score --by-round`): the judge rated the dialogue so far, so a failure from round k "
              "shows late and diluted by the good rounds before it; rule 'reply' (`score --by-reply`): the judge "
              "rated each round's reply alone, in its context, which locates it.")


def change_cells(r) -> list:
    at = "-" if r["change_round"] != r["change_round"] else f"{int(r['change_round'])} {round_interval(r)}".strip()
    p = "-" if r["p_value"] != r["p_value"] else f"{r['p_value']:.3f}"
    return [r["language"], r["target_model"], r["judge"], r["rule"],
            f"{r['n_dialogues']} reached round {r['cohort_round']}", r["n_cards"], at, _f(r["before"]), _f(r["after"]),
            _f(r["change"], "+"), p, verdict_text(r), r["note"]]


def round_cells(r) -> list:
    cohort_cell = _with_ci(r["cohort_mean"], r["cohort_ci_low"], r["cohort_ci_high"]) if r["cohort_n"] else "-"
    return [r["language"], r["target_model"], r["judge"], r["rule"], r["round"], r["cohort_n"] or "-", cohort_cell,
            r["n"], _with_ci(r["mean"], r["ci_low"], r["ci_high"])]


def rounds_markdown(by_round: pd.DataFrame, change: pd.DataFrame) -> str:
    if by_round.empty:
        return "_No scores by round: score a run with `esc-eval score --by-round` or `--by-reply`._\n"
    md = lambda cells: "| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |"  # noqa: E731
    lines = ["## Where the score changes (the cohort's curve; x 25, bootstrap 95% intervals over cards)\n",
             md(CHANGE_HEAD), "|" + "---|" * len(CHANGE_HEAD)]
    lines += [md(change_cells(r)) for _, r in change.iterrows()]
    lines += ["", f"One change point per curve, located by least squares; p: its test against a flat curve (cluster "
              f"bootstrap over cards); a verdict needs p < 0.05 and at least {MIN_CARDS} cards. {RULES_NOTE}", "",
              "## Score by round (mean of the seven dimensions x 25)\n",
              "The cohort: the same dialogues at every round (those that reached the cohort's round); the survivors: "
              "every dialogue that reached the round (fewer as dialogues end: who is left changes too).\n",
              md(ROUND_HEAD), "|" + "---|" * len(ROUND_HEAD)]
    lines += [md(round_cells(r)) for _, r in by_round.iterrows()]
    return "\n".join(lines) + "\n"


def rounds_analysis(run_dirs: list[str], n_boot: int = 1000, seed: int = 0, cohort_at: int | None = None,
                    windowed: str = "include") -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """(the table by round, the verdicts, the line on windowed judgments) of the by-round folders."""
    scores = load_scores(run_dirs, windowed=windowed)
    values = round_values(scores)
    if values.empty:
        raise AnalysisInputError(f"{', '.join(map(str, run_dirs))}: no scores by round (score a run with "
                                 "`esc-eval score -i RUN --by-round -o OUT` or `--by-reply`, then analyse OUT)")
    return (round_table(values, n_boot, seed, cohort_at), round_change_point(values, n_boot, seed, cohort_at),
            windowed_line(scores))


def write_rounds(run_dirs: list[str], out: str | None = None, n_boot: int = 1000, seed: int = 0,
                 cohort_at: int | None = None, windowed: str = "include") -> tuple[dict[str, str], str]:
    """rounds.md, rounds.csv (score by round: cohort and survivors) and rounds_change.csv (the verdicts) into
    `out` (default <first run>/report); windowed: include | exclude | only the judgments made on a window
    (analysis/judgments/windowed.py)."""
    from esc_eval.analysis.results.outputs import report_folder

    out = report_folder(run_dirs, out)
    by_round, change, said = rounds_analysis(run_dirs, n_boot, seed, cohort_at, windowed)
    markdown = "# Scores by round\n\n" + (said + "\n\n" if said else "") + rounds_markdown(by_round, change)
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
    s["blocks"].append(text("Each dialogue scored after each round (esc-eval score --by-round: the dialogue so far; "
                            "--by-reply: that round's reply alone, in its context): the mean of the seven dimensions "
                            "x 25 per round over a fixed cohort (the dialogues that reached the cohort's round) and "
                            "over the survivors of each round, and where the cohort's curve changes, with bootstrap "
                            "95% intervals over cards. " + RULES_NOTE + " This folder's other tables pool the cuts of "
                            "every round as dialogues: read Table 2 from the run they were cut from."))
    if values.empty:
        s["blocks"].append(text("No scores by round."))
        return s
    by_round, change = round_table(values, n_boot, seed), round_change_point(values, n_boot, seed)
    s["blocks"].append(table(CHANGE_HEAD, [change_cells(r) for _, r in change.iterrows()], {0, 1, 2, 3, 4, 6, 9, 11, 12},
                             caption="Where the score changes (the cohort's curve)", id="rounds-change"))
    s["blocks"].append(table(ROUND_HEAD, [round_cells(r) for _, r in by_round.iterrows()], {0, 1, 2, 3, 6, 8},
                             caption="Score by round: the cohort and the survivors", id="rounds"))
    s["data"] = {"change": json.loads(change.to_json(orient="records")), "by_round": json.loads(by_round.to_json(orient="records"))}
    return s


def has_rounds(ctx: ReportContext) -> bool:
    d = ctx.dialogues
    return bool(not d.empty and "termination_reason" in d.columns and (d["termination_reason"] == ROUND_PREFIX).any())


# beyond the paper: scores by round (analysis/results/section_registry.py)
register_section("rounds", 960, lambda c: rounds_section(c.scores, c.n_boot, c.seed), when=has_rounds)


def _planted_check(r):
    """One planted replicate (analysis/checks): target A's replies, each judged in its context
    (`score --by-reply`), through round_change_point. No change planted: any verdict ("degrades" or
    "improves") is false; a quarter point lost from round 4 on: "degrades" is the flag, and the round's
    interval should hold round 4."""
    from esc_eval.analysis.checks.registry import PLANTED, Outcome

    row = round_change_point(round_values(load_scores(r.path("rounds"))), n_boot=r.n_boot, seed=r.seed).iloc[0]
    at = r.truth["change_round"]["A"]
    covered = located = None
    if at is not None and row["round_low"] == row["round_low"]:
        covered = bool(row["round_low"] <= at <= row["round_high"])
    if at is not None and r.variant == PLANTED:  # issue 53: a failure planted at round 4 found at round 4 +-1
        located = bool(row["verdict"] == "degrades" and abs(row["change_round"] - at) <= 1)
    if row["verdict"] == "n/a":
        return Outcome(covered=covered, located=located)
    return Outcome(flag=row["verdict"] == "degrades" if r.variant == PLANTED else row["verdict"] != "holds",
                   covered=covered, located=located)


register_check(VerdictCheck(
    "rounds-change", "Change by round (analysis rounds)", "esc_eval.analysis.rounds.change_point.round_change_point",
    ("section:rounds", "command:analysis rounds"), "rounds", "round_drop", _planted_check,
    flag="degrades / improves (the cohort's curve changes: weighted CUSUM, cluster bootstrap p < 0.05)",
    interval="the round where it changes, 95% bootstrap interval (holding the planted round 4)",
    locate="'degrades' at round 4 +-1"))
