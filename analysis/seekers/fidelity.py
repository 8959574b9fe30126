"""Is the simulated seeker like a person? The simulated seekers' features (fidelity_features.py) next
to real help-seekers', per role model x strategy x language, with distances, bootstrap intervals
over dialogues, the direction in words, and one fidelity figure per role model.

Per feature and group (the humans of the group's language; a group without them gets a note):
  both distributions    10/25/50/75/90th percentiles and the means
  distance              the Wasserstein-1 distance between the two distributions (scipy.stats),
                        divided by the people's standard deviation: 0 = the same distribution,
                        1 = a whole human spread apart on average
  shift                 (simulated mean - people's mean) / people's standard deviation
  spread                simulated standard deviation / people's
  ks                    the Kolmogorov-Smirnov statistic: the largest gap between the two
                        distributions' cumulative shares, 0 (the same) to 1 (no overlap)
  floor, ks_floor       the same between two samples drawn (with replacement) from the people's own
                        values at the comparison's sizes, n simulated and n human (mean of 50
                        draws): what sampling alone puts between a simulator that writes like these
                        people and the people, at this comparison's sizes (halves of the people, n/2
                        against n/2, was no comparison's noise: too low beside 16 simulated
                        dialogues, too high beside 8,500)
Intervals are percentile bootstraps over dialogues (both sides resampled, one set of resamples
shared by every feature of a group, so the fidelity figure gets its interval from the same draws),
but the shift's, which is Welch's t interval of the mean difference (_shift_interval says why);
a distance's interval is moved by the bootstrap's estimate of its bias (a distance between samples
is never below 0 and noise only adds to it) and clipped at 0.
A direction is named only when the evidence is clear: the shift's interval lies wholly beyond
+-0.2 (a small effect) -> "too long", "resolves too fast", ...; the spread's interval wholly
below 2/3 -> "too uniform across dialogues" (wholly above 3/2 -> "spread wider ..."; a resample
where both sides are constant counts as alike; no spread is named where the people's values are all
one). Otherwise "no clear difference", which is not a
proof of likeness. A direction from fewer simulated dialogues than its planted-truth check shows it
needs is withheld ("n/a"), and "no clear difference" from too few to find a 12-word shift says so
(analysis/checks/floors.py, in the feature's note). The shift's and the spread's intervals are simultaneous over the group's
features (Bonferroni: each at 1 - 0.05 / (2 x features), 99.8% for 12 features): 24 intervals at
95% each gave up to 1 - 0.95^24, about 0.7, of naming something between people and other people (8
against 8 of the shipped sample: "spread wider" on one feature).
Fidelity (per group): the mean KS over the features both sides have, 0 (indistinguishable) to 1
(no overlap on any feature); lower is closer to people. KS rather than the standardized distance
because it is bounded: a feature the people barely vary on (distinct-2 is 100 for most of them)
puts the simulator dozens of human spreads away and would carry a mean of distances alone.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from esc_eval.analysis.checks.floors import gate
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.seekers.fidelity_features import DISTRESS, FEATURES

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
SHIFT_MIN = 0.2  # |shift| the whole interval must exceed for a direction to be named (Cohen's "small")
CHECK = "fidelity"  # its planted-truth check (analysis/checks; registered in fidelity_report.py)
SPREAD_LOW, SPREAD_HIGH = 2 / 3, 3 / 2
FLOOR_DRAWS = 50
POOLED = "all"
UNIFORM, WIDER = "too uniform across dialogues", "spread wider across dialogues than people"
# feature -> (label, word when the simulator is higher, word when lower)
FEATURE_INFO: dict[str, tuple[str, str, str]] = {
    "words_per_turn": ("Words per seeker turn", "too long", "too short"),
    "question_share": ("Turns with a question", "asks too many questions", "asks too few questions"),
    "first_person_share": ("First-person words (share)", "talks about itself more than people",
                           "discloses less about itself than people"),
    "distinct_1": ("Distinct-1 of its turns", "more varied wording than people", "too repetitive in its wording"),
    "distinct_2": ("Distinct-2 of its turns", "more varied phrasing than people", "too repetitive in its phrasing"),
    "repetition": ("Bigram overlap between its turns (max)", "too repetitive across turns",
                   "repeats itself less than people"),
    "thanks_early": ("Thanks or closure before the last round", "too cooperative: thanks too early",
                     "thanks less than people before the end"),
    "thanks_last": ("Thanks or closure in the last round", "closes with thanks more than people",
                    "closes with thanks less than people"),
    "negativity_start": ("Negativity in round 1 (lexicon)", "opens more negative than people",
                         "opens less negative than people"),
    "negativity_end": ("Negativity in the last round (lexicon)", "ends more negative than people",
                       "ends too positive"),
    "negativity_slope": ("Negativity slope per round (lexicon)", "cheers up less than people",
                         "cheers up faster than people"),
    "resolved_round": ("Round its negativity turns positive", "resolves slower than people", "resolves too fast"),
    "distress_start": ("Judge's distress in round 1 (0-4)", "opens more distressed than people",
                       "opens less distressed than people"),
    "distress_end": ("Judge's distress in the last round (0-4)", "ends more distressed than people",
                     "ends less distressed than people (resolves too far)"),
    "distress_slope": ("Judge's distress slope per round", "calms down slower than people",
                       "calms down faster than people"),
}
FEATURE_COLUMNS = ["role_model", "strategy", "language", "feature", "n_sim", "n_human", "sim_mean", "human_mean",
                   *[f"sim_q{int(q * 100)}" for q in QUANTILES], *[f"human_q{int(q * 100)}" for q in QUANTILES],
                   "distance", "distance_lo", "distance_hi", "floor", "ks", "ks_lo", "ks_hi", "ks_floor", "shift",
                   "shift_lo", "shift_hi", "spread", "spread_lo", "spread_hi", "direction", "note"]
SUMMARY_COLUMNS = ["role_model", "strategy", "language", "n_sim", "n_human", "n_features", "fidelity", "fidelity_lo",
                   "fidelity_hi", "floor", "directions", "note"]


@dataclass
class FidelityResult:
    """What `compare_seekers` found: per-feature rows, one summary row per group, the by-round
    course of both sides, the judge's check against the survey (judge mode), how it was run, and the
    comparison by embedding where asked (analysis.realism.EmbeddingResult)."""

    features: pd.DataFrame
    summary: pd.DataFrame
    rounds: pd.DataFrame
    judge_check: pd.DataFrame | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    embedding: Any = None


def _scale(y: np.ndarray, x: np.ndarray) -> float:
    """The people's standard deviation; the pooled one when theirs is 0; 1 when both are constant."""
    for v in (y, np.concatenate([x, y])):
        s = float(np.std(v, ddof=1)) if len(v) > 1 else 0.0
        if s > 0:
            return s
    return 1.0


def _counts(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n) resample counts: how often each dialogue is drawn in each bootstrap resample."""
    idx = rng.integers(0, n, size=(n_boot, n)) + (np.arange(n_boot) * n)[:, None]
    return np.bincount(idx.ravel(), minlength=n_boot * n).reshape(n_boot, n).astype(np.float64)


def _cdf_at(values: np.ndarray, counts: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Each resample's empirical CDF at `points` (n_boot, len(points))."""
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(counts[:, order], axis=1)
    total = cum[:, -1:].copy()
    cum = np.concatenate([np.zeros((len(cum), 1)), cum], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return cum[:, np.searchsorted(values[order], points, side="right")] / total


def _boot_distances(x, cx, y, cy) -> tuple[np.ndarray, np.ndarray]:
    """Wasserstein-1 (the integral of |F - G| over the joint support) and Kolmogorov-Smirnov (its
    largest value) of every resample pair."""
    t = np.unique(np.concatenate([x, y]))
    if len(t) < 2:
        return np.zeros(len(cx)), np.zeros(len(cx))
    gap = np.abs(_cdf_at(x, cx, t[:-1]) - _cdf_at(y, cy, t[:-1]))
    return gap @ np.diff(t), gap.max(axis=1)


def _boot_moments(v: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(invalid="ignore", divide="ignore"):
        n = c.sum(axis=1)
        mean = c @ v / n
        var = c @ (v * v) / n - mean ** 2
        return mean, np.sqrt(np.clip(var * n / np.maximum(n - 1, 1), 0, None))


def _interval(reps: np.ndarray, confidence: float, finite: bool = True) -> tuple[float, float]:
    """Percentile interval of the resamples that have a value (finite ones, or any but NaN)."""
    reps = reps[np.isfinite(reps)] if finite else reps[~np.isnan(reps)]
    if len(reps) < 2:
        return float("nan"), float("nan")
    a = (1 - confidence) / 2
    # no interpolation where a resample is infinite (a spread ratio over a constant people's side)
    lo, hi = np.quantile(reps, [a, 1 - a], method="linear" if finite else "inverted_cdf")
    return float(lo), float(hi)


def _shift_interval(x: np.ndarray, y: np.ndarray, scale: float, confidence: float) -> tuple[float, float]:
    """Welch's t interval of the mean difference, in people's standard deviations. Not the bootstrap's
    percentiles: at the Bonferroni level (99.8% for 12 features) they are the resamples' extremes, which
    200 or even 1,000 resamples place too close in (people against other people: the 12 shifts held 0
    together in 67-83% of planted replicates, issue 53); Welch's interval needs no resamples."""
    if len(x) < 2 or len(y) < 2:
        return float("nan"), float("nan")
    if np.var(x) == 0 and np.var(y) == 0:  # both constant: the shift is known exactly
        d = float((x.mean() - y.mean()) / scale)
        return d, d
    with warnings.catch_warnings():  # a side of nearly equal values: scipy's precision note, not the user's concern
        warnings.simplefilter("ignore", RuntimeWarning)
        ci = stats.ttest_ind(x, y, equal_var=False).confidence_interval(confidence_level=confidence)
    return float(ci.low / scale), float(ci.high / scale)


def _shifted_interval(reps: np.ndarray, estimate: float, confidence: float) -> tuple[float, float]:
    """The percentile interval of a distance moved by the bootstrap's bias (mean of the resamples minus
    the estimate), clipped at 0: a sample distance is biased upward (sampling noise only adds to it), so
    the plain percentile interval of a small one can lie wholly above the estimate."""
    lo, hi = _interval(reps, confidence)
    finite = reps[np.isfinite(reps)]
    if not np.isfinite(lo) or not len(finite):
        return lo, hi
    bias = float(finite.mean()) - estimate
    return max(0.0, lo - bias), max(0.0, hi - bias)


def _direction(feature: str, shift: tuple[float, float], spread: tuple[float, float]) -> str:
    _, up, down = FEATURE_INFO[feature]
    words = []
    if shift[0] > SHIFT_MIN:
        words.append(up)
    elif shift[1] < -SHIFT_MIN:
        words.append(down)
    if spread[1] < SPREAD_LOW:
        words.append(UNIFORM)
    elif spread[0] > SPREAD_HIGH:
        words.append(WIDER)
    return "; ".join(words) or "no clear difference"


def _floor(y: np.ndarray, n_sim: int, n_human: int, rng: np.random.Generator) -> tuple[float, float]:
    """Mean standardized W1 and mean KS between n_sim and n_human values drawn from the people's."""
    if len(y) < 2 or n_sim < 1 or n_human < 1:
        return float("nan"), float("nan")
    s = _scale(y, y)
    w, k = [], []
    for _ in range(FLOOR_DRAWS):
        a, b = rng.choice(y, n_sim), rng.choice(y, n_human)
        w.append(stats.wasserstein_distance(a, b) / s)
        k.append(stats.ks_2samp(a, b, method="asymp").statistic)  # the statistic; no exact p
    return float(np.mean(w)), float(np.mean(k))


def _spread_ratio(sx: np.ndarray, sy: np.ndarray) -> np.ndarray:
    """sx / sy per resample; both constant: 1 (alike), only the people constant: inf."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sy > 0, sx / np.where(sy > 0, sy, 1), np.where(sx > 0, np.inf, 1.0))


def _compare_group(sim: pd.DataFrame, hum: pd.DataFrame, features: list[str], n_boot: int, confidence: float,
                   rng: np.random.Generator) -> tuple[list[dict], dict]:
    """Feature rows and the summary row of one group (sim vs the people of its language)."""
    X, Y = sim[features].to_numpy(float), hum[features].to_numpy(float)
    named_at = 1 - (1 - confidence) / (2 * len(features))  # a shift and a spread per feature (module doc)
    cx = _counts(len(X), n_boot, rng) if n_boot else None
    cy = _counts(len(Y), n_boot, rng) if n_boot else None
    rows, dist_reps, dists = [], [], []
    for j, f in enumerate(features):
        vx, vy = np.isfinite(X[:, j]), np.isfinite(Y[:, j])
        x, y = X[vx, j], Y[vy, j]
        floor, ks_floor = _floor(y, len(x), len(y), rng)
        row: dict[str, Any] = {"feature": f, "n_sim": int(len(x)), "n_human": int(len(y)), "floor": floor,
                               "ks_floor": ks_floor}
        if len(x) == 0 or len(y) < 2:
            row.update(direction="n/a", note="no simulated values" if len(x) == 0 else "fewer than 2 human values")
            rows.append(row)
            continue
        s = _scale(y, x)
        row.update(sim_mean=float(x.mean()), human_mean=float(y.mean()),
                   distance=float(stats.wasserstein_distance(x, y) / s),
                   ks=float(stats.ks_2samp(x, y, method="asymp").statistic),
                   shift=float((x.mean() - y.mean()) / s),
                   spread=float(_spread_ratio(np.std(x, ddof=1, keepdims=True), np.std(y, ddof=1, keepdims=True))[0])
                   if len(x) > 1 else float("nan"), note="")
        row.update({f"sim_q{int(q * 100)}": v for q, v in zip(QUANTILES, np.quantile(x, QUANTILES))})
        row.update({f"human_q{int(q * 100)}": v for q, v in zip(QUANTILES, np.quantile(y, QUANTILES))})
        dists.append(row["ks"])
        if n_boot:
            bx, by = cx[:, vx], cy[:, vy]
            w1, ks = _boot_distances(x, bx, y, by)
            (_, sx), (_, sy) = _boot_moments(x, bx), _boot_moments(y, by)
            dist_reps.append(ks)
            (row["distance_lo"], row["distance_hi"]), (row["ks_lo"], row["ks_hi"]) = (
                _shifted_interval(w1 / s, row["distance"], confidence), _shifted_interval(ks, row["ks"], confidence))
            sh_ci, sp_ci = _shift_interval(x, y, s, named_at), _interval(_spread_ratio(sx, sy), named_at, finite=False)
            if not np.isfinite(row["spread"]):  # these people do not vary on it: no spread to be wider than
                sp_ci = (float("nan"), float("nan"))
            elif set(np.unique(x)) | set(np.unique(y)) <= {0.0, 1.0}:
                # a yes/no feature's spread is its share's (sqrt(p(1 - p))): the shift says all there is, and
                # the spread's percentile interval of a rare share named people "too uniform" against people
                sp_ci = (float("nan"), float("nan"))
            row.update(shift_lo=sh_ci[0], shift_hi=sh_ci[1], spread_lo=sp_ci[0], spread_hi=sp_ci[1])
            found = _direction(f, sh_ci, sp_ci)
            row["direction"], row["note"] = gate(CHECK, len(x), found, finds=found != "no clear difference")
        else:
            row.update(direction="n/a", note="no bootstrap (n_boot=0): no interval, no direction")
        rows.append(row)
    said = [w for r in rows for w in str(r.get("direction", "")).split("; ")]
    named = [w for w in said if w not in (UNIFORM, WIDER, "n/a", "no clear difference", "")]
    for word in (UNIFORM, WIDER):  # the spread's words once, with how many features
        if said.count(word):
            named.append(f"{word} on {said.count(word)} feature{'s' if said.count(word) > 1 else ''}")
    fl = [r["ks_floor"] for r in rows if r.get("ks") is not None and np.isfinite(r["ks_floor"])]
    summary = {"n_sim": len(X), "n_human": len(Y), "n_features": len(dists),
               "fidelity": float(np.mean(dists)) if dists else float("nan"),
               "floor": float(np.nanmean(fl)) if fl else float("nan"), "directions": "; ".join(named),
               "note": "" if dists else "no feature with values on both sides"}
    lo_hi = (_shifted_interval(np.nanmean(np.vstack(dist_reps), axis=0), summary["fidelity"], confidence)
             if dist_reps else (np.nan, np.nan))
    summary["fidelity_lo"], summary["fidelity_hi"] = lo_hi
    return rows, summary


def fidelity_groups(sim: pd.DataFrame) -> list[tuple[tuple[str, str, str], pd.DataFrame]]:
    """(role_model, strategy, language) groups, plus (role_model, 'all', language) where a role model
    played several strategies in a language: its one figure."""
    out = [(k, g) for k, g in sim.groupby(["role_model", "strategy", "language"], sort=True)]
    for (role, lang), g in sim.groupby(["role_model", "language"], sort=True):
        if g["strategy"].nunique() > 1:
            out.append(((role, POOLED, lang), g))
    return sorted(out, key=lambda kg: (kg[0][0], kg[0][2], kg[0][1] == POOLED, kg[0][1]))


def compare_features(sim: pd.DataFrame, humans: pd.DataFrame, n_boot: int = 1000, seed: int = 0,
                     confidence: float = 0.95) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(feature rows, summary rows) of simulated vs human per-dialogue features (see the module docstring)."""
    if sim.empty:
        raise AnalysisInputError("no simulated dialogue with a seeker turn to compare")
    if humans.empty:
        raise AnalysisInputError("no human dialogue with a seeker turn to compare with")
    features = [f for f in FEATURES + DISTRESS if f in sim.columns and f in humans.columns]
    rng = np.random.default_rng(seed)
    feat_rows, sum_rows = [], []
    for (role, strat, lang), g in fidelity_groups(sim):
        key = {"role_model": role, "strategy": strat, "language": lang}
        hum = humans[humans["language"] == lang]
        if hum.empty:
            have = ", ".join(sorted(humans["language"].unique()))
            sum_rows.append({**key, "n_sim": len(g), "n_human": 0, "n_features": 0,
                             "note": f"no human dialogues in {lang} (the human file holds {have})"})
            continue
        rows, summary = _compare_group(g, hum, features, n_boot, confidence, rng)
        feat_rows += [{**key, **r} for r in rows]
        sum_rows.append({**key, **summary})
    return (pd.DataFrame(feat_rows, columns=FEATURE_COLUMNS), pd.DataFrame(sum_rows, columns=SUMMARY_COLUMNS))


def judge_check(humans: pd.DataFrame, features: pd.DataFrame, n_boot: int = 1000, seed: int = 0,
                confidence: float = 0.95) -> pd.DataFrame:
    """The distress judge against ESConv's own survey: Spearman of its first-round rating with the
    seeker's initial intensity, of its last-round rating with the final one, and of its change with
    theirs, each with n, p and a bootstrap interval over dialogues."""
    j = humans[["dialogue_id", "initial_intensity", "final_intensity"]].merge(
        features[["dialogue_id", "distress_start", "distress_end"]], on="dialogue_id")
    pairs = [("first round vs initial intensity", "distress_start", "initial_intensity"),
             ("last round vs final intensity", "distress_end", "final_intensity"),
             ("change vs change", "distress_change", "intensity_change")]
    j = j.assign(distress_change=j["distress_end"] - j["distress_start"],
                 intensity_change=j["final_intensity"] - j["initial_intensity"])
    rows = []
    for name, a, b in pairs:
        v = j[[a, b]].dropna()
        row = {"check": name, "n": len(v), "spearman": np.nan, "p": np.nan, "lo": np.nan, "hi": np.nan, "note": ""}
        if len(v) < 3 or v[a].nunique() < 2 or v[b].nunique() < 2:
            row["note"] = "too few dialogues, or a constant side: no correlation"
        else:
            r = stats.spearmanr(v[a], v[b])
            row.update(spearman=float(r.statistic), p=float(r.pvalue))
            if n_boot:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # a resample with a constant side: NaN, dropped
                    res = stats.bootstrap((v[a].to_numpy(), v[b].to_numpy()),
                                          lambda x, y: stats.spearmanr(x, y).statistic, paired=True,
                                          vectorized=False, n_resamples=n_boot, method="percentile",
                                          confidence_level=confidence, rng=np.random.default_rng(seed))
                row.update(lo=float(res.confidence_interval.low), hi=float(res.confidence_interval.high))
        rows.append(row)
    return pd.DataFrame(rows, columns=["check", "n", "spearman", "p", "lo", "hi", "note"])
