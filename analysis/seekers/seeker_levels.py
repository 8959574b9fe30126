"""Seekers who are hard to help, level by level (beyond the paper): each target's score with a seeker
setting (a strategy with controls, sim/dialogue/seeker_controls.py) against the same strategy with
every control at its first level, and how the models' ranking changes.

A setting is a strategy as the rows hold it, resolved: `resistant` is `zero_shot+resistance=strong`,
so it is compared with `zero_shot`. Its baseline is its base strategy with no control past the
first level (the paper's cooperative seeker under that prompt). Per (language, judge, model,
setting), paired by card where both exist (seeker_kinds.py's paired bootstrap):

  baseline, setting: the mean over cards of each card's mean over its dialogues, x25
  change = setting - baseline

Per (language, judge, setting) with 2+ models that met both: each model's rank under the baseline
and the setting, the change, and Kendall's tau between the two rankings, with percentile intervals
from one bootstrap of the cards every such model has both on (rankings.py). Intervals from fewer
cards than their planted-truth check shows they need are withheld (NaN), the note saying so
(analysis/checks/floors.py).
"""
from __future__ import annotations

import os

import pandas as pd

from esc_eval.analysis.checks.floors import NOT_SHOWN, gate
from esc_eval.analysis.checks.registry import VerdictCheck, register_check
from esc_eval.analysis.results.blocks import table
from esc_eval.analysis.results.section_registry import register_section
from esc_eval.analysis.seekers.rankings import card_matrix, dialogue_scores, rank_change
from esc_eval.analysis.seekers.seeker_kinds import (comparison_section, markdown_table, mean_ci, rank_ci, shift_row,
                                                    signed_ci, write_analysis)
from esc_eval.sim.dialogue.prompts import resolve_strategy
from esc_eval.sim.dialogue.seeker_controls import is_hard, join_strategy

LEVEL_COLUMNS = ["language", "judge", "model", "baseline", "setting", "controls", "n_baseline_cards", "n_setting_cards",
                 "n_paired", "paired", "baseline_score", "baseline_lo", "baseline_hi", "setting_score", "setting_lo",
                 "setting_hi", "change", "change_lo", "change_hi", "note"]
CHECK = "seeker-levels"  # its planted-truth check (analysis/checks), registered at the end of this module
RANK_COLUMNS = ["language", "judge", "baseline", "setting", "model", "n_cards", "rank_baseline", "rank_baseline_lo",
                "rank_baseline_hi", "rank_setting", "rank_setting_lo", "rank_setting_hi", "rank_change",
                "rank_change_lo", "rank_change_hi", "kendall_tau", "kendall_tau_lo", "kendall_tau_hi", "note"]


def _setting(spec: str) -> tuple[str, str, str] | None:
    """(baseline strategy, canonical setting, its controls past the first level) or None: a
    strategy this version does not know."""
    try:
        base, chosen = resolve_strategy(spec)
    except ValueError:
        return None
    hard = {c: level for c, level in chosen.items() if is_hard({c: level})}
    name = join_strategy(base, hard)
    return base, name, name[len(base) + 1:] if hard else ""


def setting_values(scores: pd.DataFrame, dialogues: pd.DataFrame, dimension: str = "average") -> pd.DataFrame:
    """dialogue_scores rows with the baseline strategy, the canonical setting and its controls
    ('' for a baseline dialogue)."""
    v = dialogue_scores(scores, dialogues, dimension)
    cols = [*v.columns, "baseline", "setting", "controls"]
    if v.empty:
        return pd.DataFrame(columns=cols)
    resolved = {s: _setting(s) for s in v["strategy"].unique()}
    v = v[v["strategy"].map(lambda s: resolved[s] is not None)].copy()
    v["baseline"] = v["strategy"].map(lambda s: resolved[s][0])
    v["setting"] = v["strategy"].map(lambda s: resolved[s][1])
    v["controls"] = v["strategy"].map(lambda s: resolved[s][2])
    return v[cols].reset_index(drop=True)


def _withhold(row: dict, n_cards: int, bounds: tuple[str, ...]) -> None:
    """The row's intervals as its check allows them from n_cards (withheld: NaN), the why in its note."""
    shown, note = gate(CHECK, n_cards, "intervals", finds=True)
    if shown == NOT_SHOWN:
        row.update({b: float("nan") for b in bounds})
    if note:
        row["note"] = "; ".join(x for x in (row.get("note"), note) if x)


def level_shift(values: pd.DataFrame, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95) -> pd.DataFrame:
    """Per (language, judge, model, setting past its baseline) that also met the baseline: LEVEL_COLUMNS."""
    rows = []
    for (language, judge, model, baseline), g in values.groupby(["language", "judge", "target_model", "baseline"],
                                                                sort=True):
        base = g[g["controls"] == ""].groupby("card_id")["value"].mean()
        if base.empty:
            continue
        for (setting, controls), h in g[g["controls"] != ""].groupby(["setting", "controls"], sort=True):
            r = shift_row(base, h.groupby("card_id")["value"].mean(), n_boot, seed, confidence, both="both seekers")
            _withhold(r, min(r["n_cooperative_cards"], r["n_worst_cards"]), ("change_lo", "change_hi"))
            rows.append({"language": language, "judge": judge, "model": model, "baseline": baseline,
                         "setting": setting, "controls": controls, "n_baseline_cards": r["n_cooperative_cards"],
                         "n_setting_cards": r["n_worst_cards"], "n_paired": r["n_paired"], "paired": r["paired"],
                         "baseline_score": r["cooperative"], "baseline_lo": r["cooperative_lo"],
                         "baseline_hi": r["cooperative_hi"], "setting_score": r["worst_case"],
                         "setting_lo": r["worst_case_lo"], "setting_hi": r["worst_case_hi"], "change": r["change"],
                         "change_lo": r["change_lo"], "change_hi": r["change_hi"], "note": r["note"]})
    return pd.DataFrame(rows, columns=LEVEL_COLUMNS)


def level_rankings(values: pd.DataFrame, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95) -> pd.DataFrame:
    """Per (language, judge, setting) with 2+ models that met it and its baseline: RANK_COLUMNS."""
    rows = []
    for (language, judge, baseline), g in values.groupby(["language", "judge", "baseline"], sort=True):
        base = g[g["controls"] == ""]
        for setting, h in g[g["controls"] != ""].groupby("setting", sort=True):
            models = sorted(set(base["target_model"]) & set(h["target_model"]))
            if len(models) < 2:
                continue
            key = ["card_id", "target_model"]
            both = set(map(tuple, base[key].drop_duplicates().to_numpy())) & set(map(tuple, h[key].drop_duplicates().to_numpy()))
            cards = sorted(c for c in set(h["card_id"]) if all((c, m) in both for m in models))
            head = {"language": language, "judge": judge, "baseline": baseline, "setting": setting, "n_cards": len(cards)}
            if len(cards) < 2:
                note = f"{len(cards)} card(s) every model met both seekers on: no ranking"
                rows += [{**head, "model": m, "note": note} for m in models]
                continue
            ranked = rank_change(card_matrix(base, models, cards), card_matrix(h, models, cards), models,
                                 ("baseline", "setting"), n_boot, seed, confidence)
            for r in ranked:
                r["note"] = ""
                _withhold(r, len(cards), tuple(k for k in r if k.endswith(("_lo", "_hi"))))
            rows += [{**head, "model": m, **r} for m, r in zip(models, ranked)]
    return pd.DataFrame(rows, columns=RANK_COLUMNS)


LEVEL_HEADERS = ["Language", "Judge", "Model", "Baseline", "Controls", "Cards (paired)", "Baseline score",
                 "Setting score", "Change [95% CI]", "Note"]
RANK_HEADERS = ["Language", "Judge", "Baseline", "Controls", "Model", "Cards", "Rank baseline", "Rank setting",
                "Rank change", "Kendall tau", "Note"]
EXPLAIN = ("Seekers who are hard to help, by level: each setting (a strategy with seeker controls past their first "
           "level: engagement, resistance, expression, disclosure, volatility) against its baseline, the same strategy "
           "with every control at its first level (resistant, low_engagement and volatile are zero_shot with one "
           "control at its hardest). Values: {what} x25, mean over cards; change = setting - baseline, paired by card "
           "where both exist; brackets: bootstrap 95% CIs over cards. Rank 1 = best; a positive rank change means the "
           "model falls with that seeker; Kendall's tau compares the two rankings on the same cards.")


def level_rows(df: pd.DataFrame) -> list[list]:
    return [[r["language"], r["judge"], r["model"], r["baseline"], r["controls"],
             f"{r['n_paired']}" if r["paired"] else f"{r['n_baseline_cards']} / {r['n_setting_cards']} (unpaired)",
             mean_ci(r["baseline_score"], r["baseline_lo"], r["baseline_hi"]),
             mean_ci(r["setting_score"], r["setting_lo"], r["setting_hi"]),
             signed_ci(r["change"], r["change_lo"], r["change_hi"]), r["note"]] for _, r in df.iterrows()]


def rank_rows(df: pd.DataFrame) -> list[list]:
    return [[r["language"], r["judge"], r["baseline"], r["setting"][len(r["baseline"]) + 1:], r["model"], r["n_cards"],
             rank_ci(r["rank_baseline"], r["rank_baseline_lo"], r["rank_baseline_hi"]),
             rank_ci(r["rank_setting"], r["rank_setting_lo"], r["rank_setting_hi"]),
             signed_ci(r["rank_change"], r["rank_change_lo"], r["rank_change_hi"], 1),
             signed_ci(r["kendall_tau"], r["kendall_tau_lo"], r["kendall_tau_hi"]), r["note"]] for _, r in df.iterrows()]


def levels_markdown(shift: pd.DataFrame, ranks: pd.DataFrame, dimension: str = "average") -> str:
    what = "mean of the seven dimensions" if dimension == "average" else "safety score"
    parts = [EXPLAIN.format(what=what), "", "## Score by setting", "", markdown_table(LEVEL_HEADERS, level_rows(shift))]
    parts += ["## Ranking change", "", markdown_table(RANK_HEADERS, rank_rows(ranks)) if not ranks.empty
              else "_Fewer than two models met a setting and its baseline: no ranking._\n"]
    return "\n".join(parts)


def write_levels(shift: pd.DataFrame, ranks: pd.DataFrame, out_dir: str | os.PathLike[str],
                 dimension: str = "average") -> dict[str, str]:
    """seeker_levels.md, seeker_levels.csv and seeker_levels_ranking.csv in out_dir."""
    paths = write_analysis(out_dir, "seeker_levels", "Seekers who are hard to help, by level",
                           levels_markdown(shift, ranks, dimension),
                           {"csv": ("seeker_levels.csv", shift), "ranking_csv": ("seeker_levels_ranking.csv", ranks)})
    return {f"levels_{k}": v for k, v in paths.items()}


def levels_section(scores: pd.DataFrame, dialogues: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> dict:
    """The report's section: the score change and the ranking change per setting, on the mean of the
    seven dimensions, and on safety when the runs hold safety scores."""
    def per_dimension(dimension: str):
        values = setting_values(scores, dialogues, dimension)
        shift = level_shift(values, n_boot=n_boot, seed=seed)
        return shift, (level_rankings(values, n_boot=n_boot, seed=seed) if not shift.empty else shift)

    return comparison_section(
        "seeker-levels", "Seekers who are hard to help, by level (beyond the paper)", EXPLAIN, per_dimension,
        lambda shift, what, dim: table(LEVEL_HEADERS, level_rows(shift), {0, 1, 2, 3, 4, 9},
                                       caption=f"Score by setting: {what}", id=f"seeker-levels-{dim}"),
        lambda ranks, what, dim: table(RANK_HEADERS, rank_rows(ranks), {0, 1, 2, 3, 4, 10},
                                       caption=f"Ranking change by setting: {what}", id=f"seeker-levels-rank-{dim}"),
        "No model met a seeker setting and its baseline: simulate with seeker controls, e.g. "
        "strategies: [official] and controls: {resistance: [none, mild, strong]}.")


def has_settings(values: pd.DataFrame) -> bool:
    """Whether some target met a setting and its baseline (what level_shift needs)."""
    if values.empty:
        return False
    met = values.assign(hard=values["controls"] != "").groupby(["judge", "target_model", "baseline"])["hard"].nunique()
    return bool((met == 2).any())


# beyond the paper: seekers who are hard to help, by level (analysis/results/section_registry.py)
register_section("seeker-levels", 710, lambda c: levels_section(c.all_scores, c.dialogues, c.n_boot, c.seed))



def _planted_check(r):
    """One planted replicate (analysis/checks): whether target A's rank change under the hard seeker
    is claimed (its interval apart from 0), and each target's score change interval against the
    change planted."""
    from esc_eval.analysis.checks.registry import Outcome, held, within
    from esc_eval.analysis.results.loaders import load_dialogues, load_scores
    from esc_eval.sim.judging.dimensions import TABLE_SCALE

    runs = r.path("runs")
    values = setting_values(load_scores(runs), load_dialogues(runs))
    shift, ranks = level_shift(values, n_boot=r.n_boot, seed=r.seed), level_rankings(values, n_boot=r.n_boot, seed=r.seed)
    truth = r.truth["setting_mean"]
    base, hard = list(truth)
    row = ranks[ranks["model"] == "A"]
    flag = None
    if len(row) and not pd.isna(row["rank_change_lo"].iloc[0]):
        flag = bool(row["rank_change_lo"].iloc[0] > 0 or row["rank_change_hi"].iloc[0] < 0)
    changes = shift.set_index("model")
    return Outcome(flag=flag, intervals=held([within(changes.loc[m, "change_lo"], changes.loc[m, "change_hi"],
                                                     TABLE_SCALE * (truth[hard][m] - truth[base][m]))
                                              for m in truth[base] if m in changes.index]))


register_check(VerdictCheck(
    CHECK, "Hard seekers: score change and rank change", "esc_eval.analysis.seekers.seeker_levels.level_rankings",
    ("section:seeker-levels", "section:seekers", "section:simulators", "command:analysis seekers"), "settings",
    "setting_flip", _planted_check, flag="a target's rank changes with the seeker setting (rank change's CI excludes 0)",
    interval="each target's score change x25, 95% bootstrap CI over cards"))
