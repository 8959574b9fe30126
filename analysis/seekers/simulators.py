"""Does the ranking depend on the simulator? Runs where the same targets met the same cards under
two or more simulators (role models, or role-play strategies) give each target's score under each
simulator, the ranking under each, Kendall's tau between every two rankings, and the pooled
ranking: the mean over simulators of each target's score (VERA-MH pools its two simulators so).

Per (language, judge), on the cards every compared target met under every simulator (the models
are compared on the same seekers): a target's score under a simulator is the mean over those cards
of each card's mean dialogue value (the seven dimensions' mean, or safety), x25. Intervals are
bootstrap percentiles over cards, one resample of the cards for every simulator (rankings.py).
"""
from __future__ import annotations

import json
import os
from itertools import combinations
from typing import Iterable

import numpy as np
import pandas as pd

from esc_eval.analysis.results.blocks import notice, section, table, text
from esc_eval.analysis.results.loaders import AnalysisInputError, load_dialogues, load_scores
from esc_eval.analysis.results.outputs import report_folder
from esc_eval.analysis.results.section_registry import register_section
from esc_eval.analysis.seekers.rankings import bootstrap_rankings, card_matrix, dialogue_scores, interval
from esc_eval.analysis.seekers.seeker_kinds import markdown_table, write_analysis
from esc_eval.sim.judging.dimensions import SAFETY, TABLE_SCALE

POOLED = "pooled"
BY = ("auto", "role_model", "strategy")
SCORE_COLUMNS = ["language", "judge", "simulator", "model", "n_cards", "score", "score_lo", "score_hi", "rank",
                 "rank_lo", "rank_hi", "note"]
TAU_COLUMNS = ["language", "judge", "simulator_a", "simulator_b", "n_cards", "n_models", "kendall_tau",
               "kendall_tau_lo", "kendall_tau_hi", "note"]


def simulator_values(values: pd.DataFrame, by: str = "auto") -> pd.DataFrame:
    """dialogue_scores rows with a `simulator` label: the role model, the strategy, or both
    ("role / strategy"); "auto" labels by what varies in the runs (the role model first)."""
    if by not in BY:
        raise AnalysisInputError(f"--by {by!r}: expected one of {', '.join(BY)}")
    if values.empty:
        return values.assign(simulator=pd.Series(dtype=str))
    v = values.assign(role_model=values["role_model"].fillna("unknown"), strategy=values["strategy"].fillna("unknown"))
    cols = [by] if by != "auto" else [c for c in ("role_model", "strategy") if v[c].nunique() > 1] or ["role_model"]
    label = v[cols[0]].astype(str) if len(cols) == 1 else v["role_model"].astype(str) + " / " + v["strategy"].astype(str)
    return v.assign(simulator=label)


def _score_row(language, judge, simulator, model, n_cards, mean, draws, rank, rank_draws, alpha, note="") -> dict:
    lo, hi = interval(np.asarray(draws) * TABLE_SCALE, alpha)
    r_lo, r_hi = interval(rank_draws, alpha)
    return {"language": language, "judge": judge, "simulator": simulator, "model": model, "n_cards": n_cards,
            "score": float(mean) * TABLE_SCALE, "score_lo": lo, "score_hi": hi, "rank": float(rank), "rank_lo": r_lo,
            "rank_hi": r_hi, "note": note}


def simulator_rankings(values: pd.DataFrame, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95
                       ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(scores, taus) from simulator_values rows: SCORE_COLUMNS per (language, judge, simulator or
    "pooled", model); TAU_COLUMNS per (language, judge) and pair of simulators. A (language, judge)
    with one simulator gives no row; a target missing under some simulator is left out (noted)."""
    alpha = (1 - confidence) / 2
    scores, taus = [], []
    for (language, judge), g in values.groupby(["language", "judge"], sort=True):
        sims = sorted(g["simulator"].unique())
        if len(sims) < 2:
            continue
        met = g.groupby("target_model")["simulator"].nunique()
        models = sorted(met[met == len(sims)].index)
        notes = [f"left out (not met under every simulator): {', '.join(sorted(set(met.index) - set(models)))}"] \
            if len(models) < len(met) else []
        g = g[g["target_model"].isin(models)]
        cells = g.groupby("card_id")[["simulator", "target_model"]].apply(lambda c: len(c.drop_duplicates()))
        cards = sorted(cells.index[cells == len(sims) * len(models)])
        if not models or len(cards) < 2:
            notes.append(f"{len(cards)} card(s) every target met under every simulator: no ranking")
            taus += [{"language": language, "judge": judge, "simulator_a": a, "simulator_b": b, "n_cards": len(cards),
                      "n_models": len(models), "note": "; ".join(notes)} for a, b in combinations(sims, 2)]
            continue
        if len(models) < 2:
            notes.append("one target: nothing to rank")
        note = "; ".join(notes)
        boot = bootstrap_rankings([card_matrix(g[g["simulator"] == s], models, cards) for s in sims], n_boot, seed)
        for a, s in enumerate(sims):
            scores += [_score_row(language, judge, s, m, len(cards), boot.means[a, i], boot.boot_means[:, a, i],
                                  boot.ranks[a, i], boot.boot_ranks[:, a, i], alpha, note) for i, m in enumerate(models)]
        scores += [_score_row(language, judge, POOLED, m, len(cards), boot.pooled[i], boot.boot_pooled[:, i],
                              boot.pooled_ranks[i], boot.boot_pooled_ranks[:, i], alpha, note) for i, m in enumerate(models)]
        for a, b in combinations(range(len(sims)), 2):
            tau, draws = boot.tau(a, b)
            lo, hi = interval(draws, alpha)
            taus.append({"language": language, "judge": judge, "simulator_a": sims[a], "simulator_b": sims[b],
                         "n_cards": len(cards), "n_models": len(models), "kendall_tau": tau, "kendall_tau_lo": lo,
                         "kendall_tau_hi": hi, "note": note})
    return pd.DataFrame(scores, columns=SCORE_COLUMNS), pd.DataFrame(taus, columns=TAU_COLUMNS)


def _one_simulator_line(values: pd.DataFrame, by: str) -> str:
    roles = ", ".join(sorted(values["role_model"].fillna("unknown").astype(str).unique()))
    strategies = ", ".join(sorted(values["strategy"].fillna("unknown").astype(str).unique()))
    what = {"role_model": f"one role model ({roles})", "strategy": f"one strategy ({strategies})"}.get(
        by, f"one role model ({roles}) and one strategy ({strategies})")
    return f"{what}: no second simulator to rank the targets under"


def _cell(v, lo, hi, fmt: str = ".1f") -> str:
    if pd.isna(v):
        return "n/a"
    return f"{v:{fmt}}" if pd.isna(lo) else f"{v:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"


EXPLAIN = ("Each target's {what} x25 under each simulator, on the cards every target met under every simulator; "
           "in brackets bootstrap 95% intervals over cards (the same resampled cards for every simulator); rank 1 = "
           "best. Pooled: the mean over simulators of each target's score (as VERA-MH pools two simulators). Kendall's "
           "tau compares two simulators' rankings: 1 = the same order, 0 = unrelated, -1 = reversed; an interval "
           "reaching well below 1 means the ranking depends on the simulator.")
TAU_HEADERS = ["Language", "Judge", "Simulator A", "Simulator B", "Cards", "Targets", "Kendall tau [95% CI]", "Note"]


def score_tables(scores: pd.DataFrame) -> list[tuple[str, list[str], list[list]]]:
    """Per (language, judge): a caption, headers (Model, each simulator, Pooled) and rows of
    'score [CI] (rank r [CI])' cells."""
    out = []
    for (language, judge), g in scores.groupby(["language", "judge"], sort=True):
        sims = [s for s in dict.fromkeys(g["simulator"]) if s != POOLED] + [POOLED]
        idx = g.set_index(["model", "simulator"])
        rows = [[m] + [f"{_cell(r['score'], r['score_lo'], r['score_hi'])} (rank {_cell(r['rank'], r['rank_lo'], r['rank_hi'], 'g')})"
                       for r in (idx.loc[(m, s)] for s in sims)] for m in dict.fromkeys(g["model"])]
        out.append((f"{language}, judge {judge}", ["Model", *sims[:-1], "Pooled"], rows))
    return out


def tau_rows(taus: pd.DataFrame) -> list[list]:
    return [[r["language"], r["judge"], r["simulator_a"], r["simulator_b"], r["n_cards"], r["n_models"],
             "n/a" if pd.isna(r["kendall_tau"]) else _cell(r["kendall_tau"], r["kendall_tau_lo"], r["kendall_tau_hi"], "+.2f"),
             r["note"]] for _, r in taus.iterrows()]


def _what(dimension: str) -> str:
    return "mean of the seven dimensions" if dimension == "average" else "safety score"


def simulators_markdown(scores: pd.DataFrame, taus: pd.DataFrame, dimension: str = "average") -> str:
    parts = [EXPLAIN.format(what=_what(dimension)), "", "## Scores and ranks per simulator", ""]
    for caption, headers, rows in score_tables(scores):
        parts += [f"### {caption}", "", markdown_table(headers, rows)]
    parts += ["## Kendall's tau between the rankings", "", markdown_table(TAU_HEADERS, tau_rows(taus))]
    return "\n".join(parts)


def write_simulators(scores: pd.DataFrame, taus: pd.DataFrame, out_dir: str | os.PathLike[str],
                     dimension: str = "average") -> dict[str, str]:
    """simulators.md, simulators.csv (scores and ranks, pooled included) and simulators_tau.csv in out_dir."""
    return write_analysis(out_dir, "simulators", "Does the ranking depend on the simulator?",
                          simulators_markdown(scores, taus, dimension),
                          {"csv": ("simulators.csv", scores), "tau_csv": ("simulators_tau.csv", taus)})


def simulators_section(scores: pd.DataFrame, dialogues: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> dict:
    """The report's section, on the mean of the seven dimensions (`scores` may hold safety rows)."""
    s = section("simulators", "Does the ranking depend on the simulator? (beyond the paper)")
    values = simulator_values(dialogue_scores(scores, dialogues), "auto")
    if values.empty or values["simulator"].nunique() < 2:
        line = _one_simulator_line(values, "auto") if not values.empty else "no scored dialogue"
        s["notices"].append(notice(f"{line[0].upper()}{line[1:]}: run the same cards and targets under a second role "
                                   "model (or strategy) to see whether the ranking depends on the simulator.", "info"))
        return s
    ranked, taus = simulator_rankings(values, n_boot=n_boot, seed=seed)
    s["blocks"].append(text(EXPLAIN.format(what=_what("average"))))
    for caption, headers, rows in score_tables(ranked):
        s["blocks"].append(table(headers, rows, {0}, caption=f"Scores and ranks: {caption}"))
    s["blocks"].append(table(TAU_HEADERS, tau_rows(taus), {0, 1, 2, 3, 7}, caption="Kendall's tau between the rankings",
                             id="simulators-tau"))
    s["data"] = {"scores": json.loads(ranked.to_json(orient="records")), "tau": json.loads(taus.to_json(orient="records"))}
    return s


def write_seeker_analyses(run_dirs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
                          out_dir: str | os.PathLike[str] | None = None, dimension: str = "average", by: str = "auto",
                          n_boot: int = 1000, seed: int = 0, windowed: str = "include") -> tuple[dict[str, str], str]:
    """`esc-eval analysis seekers`: the simulators' rankings where the runs hold 2+ simulators, and
    cooperative vs worst-case seekers where some target met both; (paths, markdown) in out_dir (default
    <first run>/report). Neither: a one-line error, nothing written. windowed: include | exclude | only
    the judgments made on a window."""
    from esc_eval.analysis.judgments.windowed import windowed_line
    from esc_eval.analysis.seekers.seeker_levels import (has_settings, level_rankings, level_shift, levels_markdown,
                                                         setting_values, write_levels)
    from esc_eval.analysis.seekers.seeker_kinds import (dialogue_values, ranking_shift, seeker_shift, seekers_markdown,
                                                        write_seekers)

    out_dir = report_folder(run_dirs, out_dir)
    scores = load_scores(run_dirs, extra_dimensions=dimension == SAFETY, windowed=windowed)
    said = windowed_line(scores)
    dialogues = load_dialogues(run_dirs)
    where = run_dirs if isinstance(run_dirs, (str, os.PathLike)) else ", ".join(map(str, run_dirs))
    sims = simulator_values(dialogue_scores(scores, dialogues, dimension), by)
    if sims.empty:
        raise AnalysisInputError(f"no {dimension} scores of dialogues in {where}")
    kinds = dialogue_values(scores, dialogues, dimension)
    has_kinds = not kinds.empty and bool((kinds.groupby(["judge", "target_model"])["kind"].nunique() == 2).any())
    settings = setting_values(scores, dialogues, dimension)
    if sims["simulator"].nunique() < 2 and not has_kinds:
        raise AnalysisInputError(f"{where}: {_one_simulator_line(sims, by)}, and no target met both cooperative and "
                                 "worst-case seekers; simulate the same cards and targets with a second role model, or "
                                 "with strategies: [official, resistant, low_engagement, volatile]")
    paths, parts = {}, [said + "\n"] if said else []
    if sims["simulator"].nunique() >= 2:
        ranked, taus = simulator_rankings(sims, n_boot=n_boot, seed=seed)
        paths.update({f"simulators_{k}": v for k, v in write_simulators(ranked, taus, out_dir, dimension).items()})
        parts.append("# Does the ranking depend on the simulator?\n\n" + simulators_markdown(ranked, taus, dimension))
    if has_kinds:
        shift, ranks = seeker_shift(kinds, n_boot=n_boot, seed=seed), ranking_shift(kinds, n_boot=n_boot, seed=seed)
        paths.update(write_seekers(shift, ranks, out_dir, dimension))
        parts.append("# Cooperative vs worst-case seekers\n\n" + seekers_markdown(shift, ranks, dimension))
    if has_settings(settings):
        shift, ranks = level_shift(settings, n_boot=n_boot, seed=seed), level_rankings(settings, n_boot=n_boot, seed=seed)
        paths.update(write_levels(shift, ranks, out_dir, dimension))
        parts.append("# Seekers who are hard to help, by level\n\n" + levels_markdown(shift, ranks, dimension))
    return paths, "\n".join(parts)


# beyond the paper: does the ranking depend on the simulator (analysis/results/section_registry.py)
register_section("simulators", 800, lambda c: simulators_section(c.all_scores, c.dialogues, c.n_boot, c.seed))
