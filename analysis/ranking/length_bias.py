"""The length-bias audit: does a judge reward long answers, and does the ranking survive holding
length fixed?

Per dialogue: the target's words per turn (the mean word count of its turns; a Han, kana or
hangul character counts as one word, since those scripts put no spaces between words) and the
judge's score (one dimension, or the mean of the seven: "average"). Per (language, judge,
dimension):
- Spearman's rho of score and length, pooled over the models (scipy's definition: Pearson on
  average ranks);
- the OLS slope of score (x25) per 100 words, pooled (longer answers score higher, for any reason);
- the within-model slope of `score ~ model + words_per_turn` (the length effect with each model's
  level held apart: how much the judge rewards length itself);
- per model, the leaderboard with length held fixed: the fit's mean at the overall mean length,
  adjusted_m = mean_m - slope_within x (length_m - length_all), x25, beside its raw mean, with
  both ranks and the rank change.
Intervals: one percentile bootstrap over dialogues (scipy.stats.bootstrap), resampled within each
model so every resample keeps each model's number of dialogues. The fit is written in closed form
(within-model demeaning, Frisch-Waugh) so that one vectorised pass computes it for every resample;
the tests hold it to numpy's least squares with model dummies.
"""
from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
from scipy import stats

from esc_eval.analysis.checks.floors import gate
from esc_eval.analysis.checks.registry import (DUO_JUDGE, Outcome, PlantedRuns, VerdictCheck, register_check,
                                               within)
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.results.outputs import markdown_table
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, DIMENSION_TITLES, TABLE_SCALE

AVERAGE = "average"
CHECK = "length-bias"  # its planted-truth check (registered at the end of this module)
TITLES = {**DIMENSION_TITLES, AVERAGE: "Average"}
# A CJK character is a word; elsewhere a run of letters/digits (with inner ' or -) is one.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WORD = re.compile(rf"[{_CJK}]|(?:(?![{_CJK}])[^\W_])+(?:['’-](?:(?![{_CJK}])[^\W_])+)*")
ASSOCIATION_COLUMNS = ["language", "judge", "dimension", "n_dialogues", "n_models", "words_per_turn", "rho", "rho_lo",
                       "rho_hi", "slope", "slope_lo", "slope_hi", "slope_within", "slope_within_lo",
                       "slope_within_hi", "detected", "verdict", "note"]
ADJUSTED_COLUMNS = ["language", "judge", "dimension", "model", "n_dialogues", "words_per_turn", "raw", "raw_lo",
                    "raw_hi", "raw_rank", "adjusted", "adjusted_lo", "adjusted_hi", "adjusted_rank", "rank_change"]


def count_words(text: str | None) -> int:
    return len(_WORD.findall(text or ""))


def words_per_turn(dialogues: pd.DataFrame) -> pd.Series:
    """dialogue_id -> the mean words of the target's (assistant) turns; dialogues without one left out."""
    out = {}
    for did, turns in zip(dialogues["dialogue_id"], dialogues["turns"]):
        counts = [count_words(t.get("text")) for t in (turns if turns is not None else [])
                  if t.get("speaker") == "assistant"]
        if counts:
            out[did] = float(np.mean(counts))
    return pd.Series(out, dtype=float, name="words_per_turn")


def length_frame(scores: pd.DataFrame, dialogues: pd.DataFrame) -> pd.DataFrame:
    """One row per (judge, dialogue, dimension incl. 'average'): language, judge, model, dialogue_id,
    dimension, score (0-4), words_per_turn, card_id (None where the scores carry none). Scores of dialogues without turns are left out; none
    left: AnalysisInputError."""
    cols = ["language", "judge", "model", "dialogue_id", "dimension", "score", "words_per_turn", "card_id"]
    s = scores[scores["dimension"].isin(DIMENSION_NAMES) & scores["score"].notna()]
    if s.empty:
        raise AnalysisInputError("no usable score of the seven dimensions in the runs")
    s = s.assign(judge=s["judge"].fillna("unknown"), language=s["language"].fillna("unknown"))
    s = s.groupby(["language", "judge", "target_model", "dialogue_id", "dimension"], as_index=False)["score"].mean()
    avg = s.groupby(["language", "judge", "target_model", "dialogue_id"], as_index=False)["score"].mean()
    both = pd.concat([s, avg.assign(dimension=AVERAGE)], ignore_index=True).rename(columns={"target_model": "model"})
    wpt = words_per_turn(dialogues) if not dialogues.empty else pd.Series(dtype=float)
    both["words_per_turn"] = both["dialogue_id"].map(wpt)
    # each dialogue's card (None where the scores have none): the intervals resample cards (_card_intervals)
    card = scores.drop_duplicates("dialogue_id").set_index("dialogue_id")["card_id"] if "card_id" in scores.columns \
        else pd.Series(dtype=object)
    both["card_id"] = both["dialogue_id"].map(card)
    both = both.dropna(subset=["words_per_turn"])
    if both.empty:
        raise AnalysisInputError("none of the scored dialogues has the target's turns (run folders with their "
                                 "dialogues are needed; official score JSON has none)")
    return both[cols].reset_index(drop=True)


def _fit(xs: list[np.ndarray], ys: list[np.ndarray]) -> np.ndarray:
    """Per model block (x_m, y_m along the last axis, any leading axes): the statistics stacked on
    axis 0: rho, pooled slope, within slope, then K adjusted means, then K raw means (all 0-4 scale)."""
    xbar = [x.mean(axis=-1) for x in xs]
    ybar = [y.mean(axis=-1) for y in ys]
    sxx = sum(((x - xb[..., None]) ** 2).sum(axis=-1) for x, xb in zip(xs, xbar))
    sxy = sum(((x - xb[..., None]) * (y - yb[..., None])).sum(axis=-1) for x, y, xb, yb in zip(xs, ys, xbar, ybar))
    x, y = np.concatenate(xs, axis=-1), np.concatenate(ys, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        within = sxy / sxx
        dx, dy = x - x.mean(axis=-1, keepdims=True), y - y.mean(axis=-1, keepdims=True)
        slope = (dx * dy).sum(axis=-1) / (dx ** 2).sum(axis=-1)
        rx, ry = stats.rankdata(x, axis=-1), stats.rankdata(y, axis=-1)
        rx, ry = rx - rx.mean(axis=-1, keepdims=True), ry - ry.mean(axis=-1, keepdims=True)
        rho = (rx * ry).sum(axis=-1) / np.sqrt((rx ** 2).sum(axis=-1) * (ry ** 2).sum(axis=-1))
    xall = x.mean(axis=-1)
    adjusted = [yb - within * (xb - xall) for xb, yb in zip(xbar, ybar)]
    return np.stack([rho, slope, within, *adjusted, *ybar])


def _intervals(xs, ys, n_boot: int, seed: int, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap bounds of _fit's statistics, resampling dialogues within each model."""
    nan = np.full(3 + 2 * len(xs), np.nan)
    if n_boot == 0 or any(len(x) < 2 for x in xs):
        return nan, nan

    def statistic(*idx, axis=-1):
        idx = [np.asarray(i, dtype=int) for i in idx]
        return _fit([x[i] for x, i in zip(xs, idx)], [y[i] for y, i in zip(ys, idx)])

    n = sum(len(x) for x in xs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a constant statistic gives a degenerate interval: that is the answer
        res = stats.bootstrap(tuple(np.arange(len(x)) for x in xs), statistic, n_resamples=n_boot,
                              confidence_level=confidence, method="percentile", vectorized=True,
                              batch=max(1, min(n_boot, 400_000 // max(n, 1))), rng=np.random.default_rng(seed))
    return np.asarray(res.confidence_interval.low), np.asarray(res.confidence_interval.high)


def _card_intervals(xs, ys, cards, n_boot: int, seed: int, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap bounds of _fit's statistics, resampling cards with all their dialogues, with
    every model at once: a card's dialogues share its seeker, so their lengths and what the judge makes
    of the card move together (a planted target's reply length is drawn per card). Resampling dialogues
    within each model as if independent, the slope's interval was too narrow: with no length bias
    planted, "rewards length" in 20-22% of replicates at 400-655 cards (issue 53). Hand-written: the
    draw is of cards, shared across the models' samples, which scipy's bootstrap does not take."""
    nan = np.full(3 + 2 * len(xs), np.nan)
    codes, uniq = pd.factorize(pd.Series(np.concatenate(cards)))
    if n_boot == 0 or len(uniq) < 2 or any(len(x) < 2 for x in xs):
        return nan, nan
    parts = np.split(codes, np.cumsum([len(c) for c in cards])[:-1])
    rng = np.random.default_rng(seed)
    reps = np.full((n_boot, len(nan)), np.nan)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for b in range(n_boot):
            times = np.bincount(rng.integers(0, len(uniq), len(uniq)), minlength=len(uniq))
            idx = [np.repeat(np.arange(len(p)), times[p]) for p in parts]  # each dialogue as often as its card
            if all(len(i) >= 2 for i in idx):
                reps[b] = _fit([x[i] for x, i in zip(xs, idx)], [y[i] for y, i in zip(ys, idx)])
        tail = 100 * (1 - confidence) / 2
        return np.nanpercentile(reps, tail, axis=0), np.nanpercentile(reps, 100 - tail, axis=0)


def _ranks(v: np.ndarray) -> np.ndarray:
    r = stats.rankdata(-np.nan_to_num(v, nan=-np.inf), method="average").astype(float)
    r[np.isnan(v)] = np.nan
    return r


def length_audit(frame: pd.DataFrame, n_boot: int = 1000, seed: int = 0,
                confidence: float = 0.95) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(association: ASSOCIATION_COLUMNS per language, judge, dimension; adjusted: ADJUSTED_COLUMNS
    per language, judge, dimension, model). Slopes: x25 points per 100 words per turn; means x25."""
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0, got {n_boot}")
    assoc, adjusted = [], []
    for (language, judge, dimension), g in frame.groupby(["language", "judge", "dimension"], sort=True):
        models = sorted(g["model"].unique())
        parts = [g[g["model"] == m] for m in models]
        xs = [p["words_per_turn"].to_numpy(dtype=float) for p in parts]
        ys = [p["score"].to_numpy(dtype=float) for p in parts]
        est = _fit(xs, ys)
        k, note = len(models), []
        cards = [p["card_id"].to_numpy() for p in parts] if "card_id" in g.columns and g["card_id"].notna().all() else None
        if cards is not None and g["card_id"].nunique() < len(g):  # cards shared by models (or seeds): resample cards
            lo, hi = _card_intervals(xs, ys, cards, n_boot, seed, confidence)
            note.append(f"intervals resample {g['card_id'].nunique()} cards")
        else:
            lo, hi = _intervals(xs, ys, n_boot, seed, confidence)
        if not np.isfinite(est[1]):
            note.append("the target's words per turn do not vary: nothing to relate the score to")
        elif not np.isfinite(est[2]):
            note.append("words per turn do not vary within any model: no within-model slope, no adjusted means")
        if n_boot == 0:
            note.append("bootstrap disabled (n_boot=0): no interval")
        elif any(len(x) < 2 for x in xs):
            note.append("a model has fewer than 2 dialogues: no interval")
        per100 = 100 * TABLE_SCALE
        detected = bool(np.isfinite(lo[2]) and (lo[2] > 0 or hi[2] < 0))
        verdict = "yes" if detected else ("no" if np.isfinite(lo[2]) else "n/a")
        # below the size its planted-truth check holds from: withheld (n/a), and "no" from too few says so
        verdict, why = gate(CHECK, min(len(x) for x in xs), verdict, finds=detected)
        detected = verdict == "yes"
        if why:
            note.append(why)
        assoc.append({"language": language, "judge": judge, "dimension": dimension,
                      "n_dialogues": int(len(g)), "n_models": k,
                      "words_per_turn": float(np.mean(np.concatenate(xs))),
                      "rho": est[0], "rho_lo": lo[0], "rho_hi": hi[0], "slope": est[1] * per100,
                      "slope_lo": lo[1] * per100, "slope_hi": hi[1] * per100, "slope_within": est[2] * per100,
                      "slope_within_lo": lo[2] * per100, "slope_within_hi": hi[2] * per100,
                      "detected": detected, "verdict": verdict, "note": "; ".join(note)})
        adj, raw = est[3:3 + k], est[3 + k:]
        raw_rank, adj_rank = _ranks(raw), _ranks(adj)
        for i, m in enumerate(models):
            adjusted.append({"language": language, "judge": judge, "dimension": dimension, "model": m,
                             "n_dialogues": int(len(xs[i])), "words_per_turn": float(xs[i].mean()),
                             "raw": raw[i] * TABLE_SCALE, "raw_lo": lo[3 + k + i] * TABLE_SCALE,
                             "raw_hi": hi[3 + k + i] * TABLE_SCALE, "raw_rank": raw_rank[i],
                             "adjusted": adj[i] * TABLE_SCALE, "adjusted_lo": lo[3 + i] * TABLE_SCALE,
                             "adjusted_hi": hi[3 + i] * TABLE_SCALE, "adjusted_rank": adj_rank[i],
                             "rank_change": raw_rank[i] - adj_rank[i]})
    order = {d: i for i, d in enumerate([*DIMENSION_NAMES, AVERAGE])}  # the paper's column order
    a = pd.DataFrame(assoc, columns=ASSOCIATION_COLUMNS)
    a = a.sort_values(["language", "judge", "dimension"], key=lambda c: c.map(order) if c.name == "dimension" else c,
                      kind="stable").reset_index(drop=True)
    b = pd.DataFrame(adjusted, columns=ADJUSTED_COLUMNS)
    return a, b.sort_values(["language", "judge", "dimension", "raw_rank", "model"], kind="stable").reset_index(drop=True)


def _ci(v: float, lo: float, hi: float, fmt: str = ".2f") -> str:
    if v is None or not np.isfinite(v):
        return "n/a"
    return f"{v:{fmt}}" if not np.isfinite(lo) else f"{v:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"


def _rank(r: float) -> str:
    return "n/a" if not np.isfinite(r) else f"{r:g}"


EXPLAIN = ("Length bias: per dialogue, the target's words per turn against the judge's score. rho = Spearman's "
           "rank correlation; slope = the OLS change of the score (x25) per 100 more words per turn, pooled over "
           "the models; within-model slope = the same from score ~ model + words per turn, each model's level held "
           "apart: what the judge gives for length itself. 'Length bias' = the within-model slope's 95% interval "
           "excludes 0. Intervals: bootstrap over dialogues, within each model. Words: whitespace-separated; a "
           "Chinese, Japanese or Korean character counts as one.")
EXPLAIN_ADJUSTED = ("With length held fixed: each model's mean at the overall mean length (its raw mean minus the "
                    "within-model slope x its distance from that length), x25, next to its raw mean; change = raw "
                    "rank - rank with length held fixed (positive: the model moves up once length is discounted).")
ASSOCIATION_HEADERS = ["Language", "Judge", "Dimension", "Dialogues", "Words/turn", "Spearman rho [95% CI]",
                       "Slope /100 words [95% CI]", "Within-model slope [95% CI]", "Length bias", "Note"]
ADJUSTED_HEADERS = ["Language", "Judge", "Model", "Dialogues", "Words/turn", "Raw [95% CI]", "Raw rank",
                    "Length fixed [95% CI]", "Rank", "Change"]


def association_rows(assoc: pd.DataFrame) -> list[list[str]]:
    return [[r["language"], r["judge"], TITLES.get(r["dimension"], r["dimension"]), str(r["n_dialogues"]),
             f"{r['words_per_turn']:.1f}", _ci(r["rho"], r["rho_lo"], r["rho_hi"]),
             _ci(r["slope"], r["slope_lo"], r["slope_hi"]),
             _ci(r["slope_within"], r["slope_within_lo"], r["slope_within_hi"]),
             r["verdict"], r["note"]]
            for _, r in assoc.iterrows()]


def adjusted_rows(adjusted: pd.DataFrame, dimension: str = AVERAGE) -> list[list[str]]:
    return [[r["language"], r["judge"], r["model"], str(r["n_dialogues"]), f"{r['words_per_turn']:.1f}",
             _ci(r["raw"], r["raw_lo"], r["raw_hi"]), _rank(r["raw_rank"]),
             _ci(r["adjusted"], r["adjusted_lo"], r["adjusted_hi"]), _rank(r["adjusted_rank"]),
             "n/a" if not np.isfinite(r["rank_change"]) else f"{r['rank_change']:+g}"]
            for _, r in adjusted[adjusted["dimension"] == dimension].iterrows()]


def length_bias_markdown(assoc: pd.DataFrame, adjusted: pd.DataFrame) -> str:
    return "\n".join([EXPLAIN, "", "## Score against length", "", markdown_table(ASSOCIATION_HEADERS, association_rows(assoc)),
                      "## Leaderboard with length held fixed (Average)", "", EXPLAIN_ADJUSTED, "",
                      markdown_table(ADJUSTED_HEADERS, adjusted_rows(adjusted))])


def length_bias_of_runs(run_dirs: list[str], out: str | None = None, judge: str | None = None, n_boot: int = 1000,
                        seed: int = 0, windowed: str = "include") -> tuple[dict[str, str], str]:
    """length_bias.md and .json in out (a folder or a storage URI; default <first run>/report); the paths
    and the Markdown. judge: only that judge's scores (an unknown one: AnalysisInputError, nothing
    written); windowed: include | exclude | only the judgments made on a window (analysis/judgments/windowed.py)."""
    from esc_eval.analysis.judgments.windowed import windowed_line

    from esc_eval.analysis.results.loaders import load_dialogues, load_scores
    from esc_eval.analysis.results.outputs import records, report_folder, write_markdown_json

    scores = load_scores(run_dirs, windowed=windowed)
    said = windowed_line(scores)
    if judge is not None:
        judges = sorted(scores["judge"].dropna().unique())
        if judge not in judges:
            raise AnalysisInputError(f"--judge {judge}: the runs hold scores of {judges or 'no judge'}")
        scores = scores[scores["judge"] == judge]
    assoc, adjusted = length_audit(length_frame(scores, load_dialogues(run_dirs)), n_boot=n_boot, seed=seed)
    markdown = (said + "\n\n" if said else "") + length_bias_markdown(assoc, adjusted)
    paths = write_markdown_json(report_folder(run_dirs, out), "length_bias", "# Length bias of the judge\n\n" + markdown,
                                {"association": records(assoc), "adjusted": records(adjusted),
                                 "windowed": scores.attrs["windowed"]})
    return paths, markdown


# --- its planted-truth check (analysis/checks; `esc-eval bench validity`) ---------------------------
def _planted_check(r: PlantedRuns) -> Outcome:
    from esc_eval.analysis.results.leaderboard import planted_scores
    from esc_eval.analysis.results.loaders import load_dialogues

    dialogues = load_dialogues(r.path("runs"))
    frame = length_frame(planted_scores(r), dialogues)
    assoc, _ = length_audit(frame[frame["dimension"] == "average"], n_boot=r.n_boot, seed=r.seed)  # the row it flags on
    row = assoc[assoc["dimension"] == "average"].iloc[0]
    # The truth per 100 of the analysis's words per turn: the planted slope per word of a reply, times
    # how a reply's words move words per turn in these dialogues (the opener counts as a turn).
    words = pd.Series(r.truth["reply_words"], dtype=float)
    wpt = words_per_turn(dialogues).reindex(words.index)
    by = dialogues.drop_duplicates("dialogue_id").set_index("dialogue_id")["target_model"].reindex(words.index)
    frame = pd.DataFrame({"w": words, "wpt": wpt, "model": by}).dropna()
    dev = frame.groupby("model")[["w", "wpt"]].transform(lambda x: x - x.mean())
    per_wpt = float((dev["w"] * dev["wpt"]).sum() / (dev["wpt"] ** 2).sum())
    truth = r.truth["length_slope"][DUO_JUDGE] * per_wpt * 100 * TABLE_SCALE
    covered = within(row["slope_within_lo"], row["slope_within_hi"], truth)
    return Outcome(flag=bool(row["detected"]) if np.isfinite(row["slope_within_lo"]) else None, covered=covered)


register_check(VerdictCheck(
    "length-bias", "Length bias of the judge", "esc_eval.analysis.ranking.length_bias.length_audit",
    ("section:judge-length", "command:analysis length-bias"), "duo", "length", _planted_check,
    flag="the judge rewards length (Average: within-model slope's CI excludes 0)",
    interval="the within-model slope per 100 words x25, 95% CI"))
