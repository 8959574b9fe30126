"""Cooperative vs worst-case seekers (beyond the paper): how much each model's score, and the
models' ranking, change when the seeker is resistant, low-engagement or volatile.

The paper's five role-play strategies play cooperative seekers; sim/data/prompts/roleplay.yaml
adds worst-case ones (its `worst_case` list). A dialogue's value is the mean of its seven
dimensions (the "average" of compare.py) or its safety score, x25. Per (language, judge, model):

  cooperative, worst-case: the mean over cards of each card's mean over its dialogues of that kind
  change = worst-case - cooperative

Paired by card: when some cards have dialogues of both kinds, only those cards count and the
bootstrap resamples them (the same cards in both arms); when none do, each arm is resampled on
its own cards (the note says so). "worst-case" pools the worst-case strategies; each one present
also gets its own row. The ranking (1 = best) of the models under each kind, its change, and
Kendall's tau between the two rankings get percentile intervals from one bootstrap of the cards
every model shares in the language, so the models are compared on the same seekers (rankings.py:
the bootstrap simulators.py uses too).
"""
from __future__ import annotations

import os
import warnings

import numpy as np
import pandas as pd
from scipy import stats

from esc_eval.analysis.results.blocks import notice, section, table, text
from esc_eval.analysis.results.outputs import markdown_table
from esc_eval.analysis.results.section_registry import register_section
from esc_eval.analysis.seekers.rankings import card_matrix, dialogue_scores, rank_change
from esc_eval.sim.dialogue.prompts import strategy_kind
from esc_eval.sim.judging.dimensions import SAFETY, TABLE_SCALE
from esc_eval.sim.runs.open import OutputFolder

COOPERATIVE, WORST = "cooperative", "worst_case"
ALL_WORST = "worst-case (all)"
SHIFT_COLUMNS = ["language", "judge", "model", "seeker", "n_cooperative_cards", "n_worst_cards", "n_paired", "paired",
                 "cooperative", "cooperative_lo", "cooperative_hi", "worst_case", "worst_case_lo", "worst_case_hi",
                 "change", "change_lo", "change_hi", "note"]
RANK_COLUMNS = ["language", "judge", "model", "n_cards", "rank_cooperative", "rank_cooperative_lo",
                "rank_cooperative_hi", "rank_worst_case", "rank_worst_case_lo", "rank_worst_case_hi", "rank_change",
                "rank_change_lo", "rank_change_hi", "kendall_tau", "kendall_tau_lo", "kendall_tau_hi", "note"]


def dialogue_values(scores: pd.DataFrame, dialogues: pd.DataFrame, dimension: str = "average") -> pd.DataFrame:
    """One row per (judge, dialogue): language, target_model, card_id, strategy, kind, value (0-4).
    dimension: "average" (mean of the dialogue's seven) or "safety"."""
    cols = ["judge", "dialogue_id", "language", "target_model", "kind", "strategy", "card_id", "value"]
    v = dialogue_scores(scores, dialogues, dimension)
    if v.empty:
        return pd.DataFrame(columns=cols)
    v["kind"] = v["strategy"].map(strategy_kind)  # a strategy this version does not know: no kind, left out
    return v.dropna(subset=["kind"])[cols].reset_index(drop=True)


def _boot_means(arms: list[np.ndarray], n_boot: int, seed: int, confidence: float, paired: bool):
    """Percentile CIs of (mean arm 0, mean arm 1, mean arm 1 - mean arm 0)."""
    def stat(*xs, axis=-1):
        a, b = np.mean(xs[0], axis=axis), np.mean(xs[1], axis=axis)
        return np.stack([a, b, b - a])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant values: a zero-width interval is the answer
        res = stats.bootstrap(tuple(arms), stat, n_resamples=n_boot, confidence_level=confidence, method="percentile",
                              paired=paired, vectorized=True, rng=np.random.default_rng(seed))
    return np.asarray(res.confidence_interval.low), np.asarray(res.confidence_interval.high)


def shift_row(coop: pd.Series, worst: pd.Series, n_boot: int, seed: int, confidence: float,
              both: str = "both kinds of seeker") -> dict:
    """Two arms of per-card means: their means x25, the change (second - first) and bootstrap CIs,
    paired on the cards in both when there are any (seeker_levels.py reuses it for settings)."""
    shared = coop.index.intersection(worst.index)
    paired = len(shared) > 0
    a, b = (coop[shared], worst[shared]) if paired else (coop, worst)
    nan = float("nan")
    row = {"n_cooperative_cards": len(coop), "n_worst_cards": len(worst), "n_paired": len(shared), "paired": paired,
           "cooperative": a.mean() * TABLE_SCALE, "worst_case": b.mean() * TABLE_SCALE, "note": ""}
    row["change"] = row["worst_case"] - row["cooperative"]
    row.update({f"{k}_{e}": nan for k in ("cooperative", "worst_case", "change") for e in ("lo", "hi")})
    notes = []
    if paired and (len(shared) < len(coop) or len(shared) < len(worst)):
        notes.append(f"paired on the {len(shared)} cards with {both}")
    if not paired:
        notes.append(f"no card has {both}: unpaired, each arm resampled on its own cards")
    if min(len(a), len(b)) < 2:
        notes.append("fewer than 2 cards: no confidence interval")
    elif n_boot:
        lo, hi = _boot_means([a.to_numpy(float), b.to_numpy(float)], n_boot, seed, confidence, paired)
        for i, k in enumerate(("cooperative", "worst_case", "change")):
            row[f"{k}_lo"], row[f"{k}_hi"] = float(lo[i] * TABLE_SCALE), float(hi[i] * TABLE_SCALE)
    row["note"] = "; ".join(notes)
    return row


def seeker_shift(values: pd.DataFrame, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95) -> pd.DataFrame:
    """Per (language, judge, model): cooperative vs worst-case (pooled, then each worst-case
    strategy), SHIFT_COLUMNS. Models with only one kind of seeker get no row."""
    rows = []
    for (language, judge, model), g in values.groupby(["language", "judge", "target_model"], sort=True):
        coop = g[g["kind"] == COOPERATIVE].groupby("card_id")["value"].mean()
        bad = g[g["kind"] == WORST]
        if coop.empty or bad.empty:
            continue
        subsets = [(ALL_WORST, bad)] + ([(st, h) for st, h in bad.groupby("strategy", sort=True)]
                                        if bad["strategy"].nunique() > 1 else [])
        for seeker, h in subsets:
            rows.append({"language": language, "judge": judge, "model": model, "seeker": seeker,
                         **shift_row(coop, h.groupby("card_id")["value"].mean(), n_boot, seed, confidence)})
    return pd.DataFrame(rows, columns=SHIFT_COLUMNS)


def ranking_shift(values: pd.DataFrame, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95) -> pd.DataFrame:
    """Per (language, judge) with 2+ models that met both kinds of seeker: each model's rank under
    cooperative and worst-case seekers, the change (worst - cooperative; positive = falls), and
    Kendall's tau between the rankings, on the cards every such model has both kinds on."""
    rows = []
    for (language, judge), g in values.groupby(["language", "judge"], sort=True):
        both = g.groupby("target_model")["kind"].nunique()
        models = sorted(both[both == 2].index)
        if len(models) < 2:
            continue
        g = g[g["target_model"].isin(models)]
        per = g.groupby(["card_id", "target_model"])["kind"].nunique().unstack()
        cards = sorted(per.index[(per.reindex(columns=models) == 2).all(axis=1)])
        note = ""
        if len(cards) < 2:
            note = f"{len(cards)} card(s) every model met both kinds of seeker on: no ranking"
            rows += [{"language": language, "judge": judge, "model": m, "n_cards": len(cards), "note": note} for m in models]
            continue
        coop = card_matrix(g[g["kind"] == COOPERATIVE], models, cards)
        worst = card_matrix(g[g["kind"] == WORST], models, cards)
        for m, r in zip(models, rank_change(coop, worst, models, ("cooperative", "worst_case"), n_boot, seed, confidence)):
            rows.append({"language": language, "judge": judge, "model": m, "n_cards": len(cards), **r, "note": note})
    return pd.DataFrame(rows, columns=RANK_COLUMNS)


def signed_ci(v, lo, hi, digits: int = 2) -> str:
    if pd.isna(v):
        return "n/a"
    return f"{v:+.{digits}f}" if pd.isna(lo) else f"{v:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def mean_ci(v, lo, hi) -> str:
    return "n/a" if pd.isna(v) else (f"{v:.2f}" if pd.isna(lo) else f"{v:.2f} [{lo:.1f}, {hi:.1f}]")


SHIFT_HEADERS = ["Language", "Judge", "Model", "Seeker", "Cards (paired)", "Cooperative", "Worst-case",
                 "Change [95% CI]", "Note"]
RANK_HEADERS = ["Language", "Judge", "Model", "Cards", "Rank cooperative", "Rank worst-case", "Rank change",
                "Kendall tau", "Note"]


def shift_rows(df: pd.DataFrame) -> list[list]:
    return [[r["language"], r["judge"], r["model"], r["seeker"],
             f"{r['n_paired']}" if r["paired"] else f"{r['n_cooperative_cards']} / {r['n_worst_cards']} (unpaired)",
             mean_ci(r["cooperative"], r["cooperative_lo"], r["cooperative_hi"]),
             mean_ci(r["worst_case"], r["worst_case_lo"], r["worst_case_hi"]),
             signed_ci(r["change"], r["change_lo"], r["change_hi"]), r["note"]] for _, r in df.iterrows()]


def rank_ci(v, lo, hi) -> str:
    return "n/a" if pd.isna(v) else (f"{v:g}" if pd.isna(lo) else f"{v:g} [{lo:g}, {hi:g}]")


def rank_rows(df: pd.DataFrame) -> list[list]:
    return [[r["language"], r["judge"], r["model"], r["n_cards"],
             rank_ci(r["rank_cooperative"], r["rank_cooperative_lo"], r["rank_cooperative_hi"]),
             rank_ci(r["rank_worst_case"], r["rank_worst_case_lo"], r["rank_worst_case_hi"]),
             signed_ci(r["rank_change"], r["rank_change_lo"], r["rank_change_hi"], 1),
             signed_ci(r["kendall_tau"], r["kendall_tau_lo"], r["kendall_tau_hi"]), r["note"]] for _, r in df.iterrows()]


EXPLAIN = ("Cooperative seekers: the paper's role-play strategies; worst-case: resistant, low-engagement and volatile "
           "seekers (beyond the paper). Values: {what} x25, mean over cards; change = worst-case - cooperative, paired "
           "by card where both exist; brackets: bootstrap 95% CIs over cards. Rank 1 = best; a positive rank change "
           "means the model falls with worst-case seekers.")


def seekers_markdown(shift: pd.DataFrame, ranks: pd.DataFrame, dimension: str = "average") -> str:
    what = "mean of the seven dimensions" if dimension == "average" else "safety score"
    parts = [EXPLAIN.format(what=what), "", "## Score change", "", markdown_table(SHIFT_HEADERS, shift_rows(shift))]
    parts += ["## Ranking change", "", markdown_table(RANK_HEADERS, rank_rows(ranks)) if not ranks.empty
              else "_Fewer than two models met both kinds of seeker: no ranking._\n"]
    return "\n".join(parts)


def write_analysis(out_dir: str | os.PathLike[str], stem: str, title: str, markdown: str,
                   tables: dict[str, tuple[str, pd.DataFrame]]) -> dict[str, str]:
    """<stem>.md (the title over the markdown) and one CSV per table ({key: (file name, frame)}) in a
    folder or storage URI; the paths by key ('markdown', then the tables')."""
    with OutputFolder(out_dir) as out:
        files = {"markdown": out / f"{stem}.md"}
        files["markdown"].write_text(f"# {title}\n\n{markdown}", encoding="utf-8")
        for key, (name, frame) in tables.items():
            files[key] = out / name
            frame.to_csv(files[key], index=False)
        return {k: str(v) for k, v in out.finals(files).items()}


def write_seekers(shift: pd.DataFrame, ranks: pd.DataFrame, out_dir: str | os.PathLike[str],
                  dimension: str = "average") -> dict[str, str]:
    """seekers.md, seekers.csv (score change) and seekers_ranking.csv in out_dir."""
    return write_analysis(out_dir, "seekers", "Cooperative vs worst-case seekers", seekers_markdown(shift, ranks, dimension),
                          {"csv": ("seekers.csv", shift), "ranking_csv": ("seekers_ranking.csv", ranks)})


def comparison_section(id: str, title: str, explain: str, per_dimension, shift_block, rank_block, none_met: str) -> dict:
    """A seeker comparison as a report section (cooperative vs worst-case here, settings vs their
    baseline in seeker_levels.py): on the mean of the seven dimensions, then on safety where scored,
    `per_dimension(dimension)` -> (score change, ranking change) and each turned into a table by
    `shift_block` / `rank_block(frame, what, dimension)`; `none_met`'s notice when nothing compares."""
    s = section(id, title)
    shown = False
    for dimension in ("average", SAFETY):
        shift, ranks = per_dimension(dimension)
        if shift.empty:
            continue
        what = "mean of the seven dimensions" if dimension == "average" else "safety score"
        if not shown:
            s["blocks"].append(text(explain.format(what="the " + what + " (then safety, when scored)")))
            shown = True
        s["blocks"].append(shift_block(shift, what, dimension))
        if not ranks.empty:
            s["blocks"].append(rank_block(ranks, what, dimension))
    if not shown:
        s["notices"].append(notice(none_met, "info"))
    return s


def seekers_section(scores: pd.DataFrame, dialogues: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> dict:
    """The report's section: score and ranking change on the mean of the seven dimensions, and on
    safety when the runs hold safety scores. `scores` may hold safety rows (they are kept apart)."""
    def per_dimension(dimension: str):
        values = dialogue_values(scores, dialogues, dimension)
        shift = seeker_shift(values, n_boot=n_boot, seed=seed)
        return shift, (ranking_shift(values, n_boot=n_boot, seed=seed) if not shift.empty else shift)

    return comparison_section(
        "seekers", "Cooperative vs worst-case seekers (beyond the paper)", EXPLAIN, per_dimension,
        lambda shift, what, dim: table(SHIFT_HEADERS, shift_rows(shift), {0, 1, 2, 3, 8},
                                       caption=f"Score change: {what}", id=f"seekers-{dim}"),
        lambda ranks, what, dim: table(RANK_HEADERS, rank_rows(ranks), {0, 1, 2, 8},
                                       caption=f"Ranking change: {what}", id=f"seekers-rank-{dim}"),
        "No model met both cooperative and worst-case seekers: simulate with a worst-case strategy too "
        "(strategies: [official, resistant, low_engagement, volatile]).")


# beyond the paper: cooperative vs worst-case seekers (analysis/results/section_registry.py)
register_section("seekers", 700, lambda c: seekers_section(c.all_scores, c.dialogues, c.n_boot, c.seed))
