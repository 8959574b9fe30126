"""Calibration of a judge's P(0..4) against human labels: the measures, the recalibrations, and
cross-fitting so that a recalibration is never scored on the dialogues it was fitted on.

Measures (per judge and dimension, one item per dialogue: the stored probability vector and the
human label):
- ECE, top-label (Guo et al. 2017): items binned by their confidence max_k P(k) into 10 equal
  bins over [0, 1]; the share-weighted mean of |accuracy - confidence| per bin. 0 = calibrated.
- Brier score, multi-class: mean over items of sum_k (P(k) - [label = k])^2, 0 (perfect) to 2.
- The reliability diagram: per bin, mean confidence, accuracy and count.
Bootstrap CIs resample dialogues (the rows), the same resamples for every measure so that a
difference (raw - recalibrated) has a paired interval. ECE is biased upwards (noise only adds to
|accuracy - confidence|), and so is each resample's: its interval is the percentile interval moved
by the bootstrap's estimate of that bias and clipped at 0, as the seeker fidelity's distances are
(with the plain percentile interval a calibrated judge's held 0.005 in about half of esc-eval's
planted replicates; docs/guides/validity.md). The bootstrap under-estimates that bias near 0 (its
resamples start from gaps the sample already inflated: at 48 items a calibrated judge's ECE is about
0.08 and the moved interval still missed its 0.002 in 41% of the planted replicates), so the lower
bound is 0 wherever the ECE is no larger than a calibrated judge's would be: the interval inverts
the consistency-resampling test (Broecker & Smith 2007: each item right with probability its own
confidence, the same confidences and bins) at the interval's level.

Recalibrations of stored probabilities (no judge call):
- temperature: P'(k) proportional to P(k)^(1/T), one T per judge and dimension fitted by
  minimising the log loss (Guo et al. 2017); keeps the most likely label.
- isotonic: one-vs-rest isotonic regression of [label = k] on P(k) per label (Zadrozny & Elkan
  2002; scipy.optimize.isotonic_regression), then renormalised.
"""
from __future__ import annotations

import math
import warnings
from typing import Protocol

import numpy as np
from scipy import optimize, stats

N_LABELS = 5
N_BINS = 10
EPS = 1e-12


def check_probs(probs: np.ndarray, labels: np.ndarray | None = None) -> None:
    if probs.ndim != 2 or probs.shape[1] != N_LABELS:
        raise ValueError(f"probabilities must be an (n, {N_LABELS}) array, got shape {probs.shape}")
    if labels is not None and len(labels) != len(probs):
        raise ValueError(f"{len(labels)} labels for {len(probs)} probability vectors")


def _bins(conf: np.ndarray, n_bins: int) -> np.ndarray:
    return np.minimum((conf * n_bins).astype(int), n_bins - 1)


def ece(probs: np.ndarray, labels: np.ndarray, n_bins: int = N_BINS) -> float:
    """Top-label expected calibration error (equal-width bins over [0, 1])."""
    check_probs(probs, labels)
    if len(probs) == 0:
        return math.nan
    conf, pred = probs.max(axis=1), probs.argmax(axis=1)
    gap = (pred == labels).astype(float) - conf
    sums = np.bincount(_bins(conf, n_bins), weights=gap, minlength=n_bins)
    return float(np.abs(sums).sum() / len(probs))


def brier(probs: np.ndarray, labels: np.ndarray) -> float:
    """Multi-class Brier score: mean of sum_k (P(k) - [label = k])^2."""
    check_probs(probs, labels)
    return float(_brier_items(probs, labels).mean()) if len(probs) else math.nan


def _brier_items(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    onehot = np.eye(N_LABELS)[labels]
    return ((probs - onehot) ** 2).sum(axis=1)


def accuracy(probs: np.ndarray, labels: np.ndarray) -> float:
    return float((probs.argmax(axis=1) == labels).mean()) if len(probs) else math.nan


def reliability(probs: np.ndarray, labels: np.ndarray, n_bins: int = N_BINS) -> list[dict]:
    """Per non-empty confidence bin: its bounds, count, mean confidence and accuracy."""
    check_probs(probs, labels)
    conf, pred = probs.max(axis=1), probs.argmax(axis=1)
    b = _bins(conf, n_bins)
    out = []
    for k in range(n_bins):
        sel = b == k
        if sel.any():
            out.append({"bin_lo": k / n_bins, "bin_hi": (k + 1) / n_bins, "n": int(sel.sum()),
                        "confidence": float(conf[sel].mean()), "accuracy": float((pred[sel] == labels[sel]).mean())})
    return out


def bootstrap_measures(named: dict[str, np.ndarray], labels: np.ndarray, *, n_boot: int = 1000, seed: int = 0,
                       confidence: float = 0.95, n_bins: int = N_BINS) -> dict[str, dict[str, tuple[float, float]]]:
    """Percentile CIs of ECE and Brier for each named probability array (same items, same
    resamples: scipy.stats.bootstrap with paired=True), and of each difference `<first> - <other>`:
    {name: {"ece": (lo, hi), "brier": ...}}. Each ECE's own interval is moved by the bootstrap's
    bias, clipped at 0 and starts at 0 where a calibrated judge is not rejected (module doc); the
    differences' are not (their biases largely cancel)."""
    n = len(labels)
    names = list(named)
    keys = [*names, *(f"{names[0]} - {o}" for o in names[1:])]
    if n < 2 or n_boot <= 0:
        return {k: {"ece": (math.nan, math.nan), "brier": (math.nan, math.nan)} for k in keys}
    columns, confs = [], []  # per name, per item: its confidence bin, [right] - confidence, its Brier term
    for p in named.values():
        check_probs(p, labels)
        conf = p.max(axis=1)
        confs.append(conf)
        columns += [_bins(conf, n_bins), (p.argmax(axis=1) == labels) - conf, _brier_items(p, labels)]

    def measures(*resampled: np.ndarray, axis: int = -1) -> np.ndarray:
        # each column resampled to (b, n): per name the ECE and Brier of every resample, then the differences
        b = resampled[0].shape[0]
        rows = np.repeat(np.arange(b), n) * n_bins
        per = []
        for k in range(0, len(resampled), 3):
            bins, gap, items = resampled[k:k + 3]
            sums = np.bincount(rows + bins.ravel(), weights=gap.ravel(), minlength=b * n_bins).reshape(b, n_bins)
            per.append((np.abs(sums).sum(axis=1) / n, items.mean(axis=1)))
        per += [(per[0][0] - e, per[0][1] - s) for e, s in per[1:]]
        return np.array([m for pair in per for m in pair])  # rows: the ECE and the Brier of each key in turn

    batch = max(1, min(n_boot, 2_000_000 // n))  # about 2M resampled items in memory at once
    res = stats.bootstrap(columns, measures, n_resamples=n_boot, batch=batch, vectorized=True, paired=True,
                          confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed))
    ci, draws = res.confidence_interval, res.bootstrap_distribution
    low, high = np.array(ci.low, dtype=float), np.array(ci.high, dtype=float)
    point = measures(*[c[None, :] for c in columns])[:, 0]
    rng = np.random.default_rng([seed, 53])
    for i in range(len(names)):  # each judge's own ECE: moved by the bootstrap's bias, clipped at 0
        bias = float(np.nanmean(draws[2 * i])) - float(point[2 * i])
        low[2 * i], high[2 * i] = max(0.0, low[2 * i] - bias), max(0.0, high[2 * i] - bias)
        if point[2 * i] <= consistent_ece(confs[i], max(100, min(n_boot, 2_000_000 // n)), rng, confidence, n_bins):
            low[2 * i] = 0.0  # a calibrated judge is not rejected at this level: the interval holds 0
    return {k: {"ece": (float(low[2 * i]), float(high[2 * i])),
                "brier": (float(low[2 * i + 1]), float(high[2 * i + 1]))} for i, k in enumerate(keys)}


def consistent_ece(conf: np.ndarray, n_sim: int, rng: np.random.Generator, confidence: float = 0.95,
                   n_bins: int = N_BINS) -> float:
    """The upper (1 + confidence) / 2 quantile of the ECE a calibrated judge would show on items of
    these top-label confidences (consistency resampling: each item right with probability its own
    confidence, n_sim times; the same bins as ece())."""
    n, bins = len(conf), _bins(conf, n_bins)
    right = rng.random((max(1, n_sim), n)) < conf
    rows = np.repeat(np.arange(right.shape[0]), n) * n_bins + np.tile(bins, right.shape[0])
    sums = np.bincount(rows, weights=(right - conf).ravel(), minlength=right.shape[0] * n_bins)
    sims = np.abs(sums.reshape(right.shape[0], n_bins)).sum(axis=1) / n
    return float(np.quantile(sims, (1.0 + confidence) / 2.0))


# --- recalibrations ----------------------------------------------------------------------
class Recalibration(Protocol):
    def fit(self, probs: np.ndarray, labels: np.ndarray) -> "Recalibration": ...
    def apply(self, probs: np.ndarray) -> np.ndarray: ...
    def params(self) -> dict: ...


class TemperatureScaling:
    """P'(k) = softmax(log P(k) / T); T > 1 softens an overconfident judge, T < 1 sharpens."""

    def __init__(self) -> None:
        self.temperature = 1.0

    def fit(self, probs: np.ndarray, labels: np.ndarray) -> "TemperatureScaling":
        check_probs(probs, labels)
        logp = np.log(np.clip(probs, EPS, 1.0))
        rows = np.arange(len(labels))

        def nll(log_t: float) -> float:
            z = logp / math.exp(log_t)
            z = z - z.max(axis=1, keepdims=True)
            return float(-(z[rows, labels] - np.log(np.exp(z).sum(axis=1))).mean())

        res = optimize.minimize_scalar(nll, bounds=(math.log(0.05), math.log(20.0)), method="bounded",
                                       options={"xatol": 1e-4})
        self.temperature = float(math.exp(res.x))
        return self

    def apply(self, probs: np.ndarray) -> np.ndarray:
        z = np.log(np.clip(probs, EPS, 1.0)) / self.temperature
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def params(self) -> dict:
        return {"temperature": self.temperature}


class IsotonicOneVsRest:
    """Per label k a non-decreasing map P(k) -> P(label = k) (pool-adjacent-violators on the
    distinct values of P(k), linear between them, flat beyond), then each row renormalised."""

    def __init__(self) -> None:
        self.maps: list[tuple[np.ndarray, np.ndarray]] = []

    def fit(self, probs: np.ndarray, labels: np.ndarray) -> "IsotonicOneVsRest":
        check_probs(probs, labels)
        self.maps = []
        for k in range(N_LABELS):
            x, inverse = np.unique(probs[:, k], return_inverse=True)
            counts = np.bincount(inverse, minlength=len(x)).astype(float)
            hits = np.bincount(inverse, weights=(labels == k).astype(float), minlength=len(x))
            fitted = optimize.isotonic_regression(hits / counts, weights=counts, increasing=True).x
            self.maps.append((x, np.asarray(fitted, dtype=float)))
        return self

    def apply(self, probs: np.ndarray) -> np.ndarray:
        out = np.column_stack([np.interp(probs[:, k], x, y) for k, (x, y) in enumerate(self.maps)])
        total = out.sum(axis=1, keepdims=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out = out / total
        # A row every map sends to 0 (a region no human label reached): keep the judge's own vector.
        empty = ~(total[:, 0] > 0)
        out[empty] = probs[empty]
        return out

    def params(self) -> dict:
        return {"knots": [int(len(x)) for x, _ in self.maps]}


METHODS: dict[str, type] = {"temperature": TemperatureScaling, "isotonic": IsotonicOneVsRest}


def make_recalibration(method: str) -> Recalibration:
    try:
        return METHODS[method]()
    except KeyError:
        raise ValueError(f"unknown recalibration {method!r}; expected one of {', '.join(METHODS)}") from None


def fold_of(keys: np.ndarray, folds: int, seed: int) -> dict[str, int]:
    """Each distinct key (a dialogue id) to a fold 0..folds-1, balanced and seeded."""
    unique = np.unique(keys.astype(str))
    order = np.random.default_rng(seed).permutation(len(unique))
    return {str(unique[i]): int(r % folds) for r, i in enumerate(order)}


def cross_fit(method: str, probs: np.ndarray, labels: np.ndarray, folds_of_items: np.ndarray,
              others: np.ndarray, folds: int) -> tuple[np.ndarray, np.ndarray, list[dict], dict]:
    """K-fold cross-fitting: each human-scored item recalibrated by the fit on the other folds
    (held out), each other item by the mean of the K fits (every fit, none saw it).
    Returns (held-out probabilities of the items, probabilities of the others, each fold's
    parameters, the parameters of a fit on every item, for the record)."""
    check_probs(probs, labels)
    held = np.empty_like(probs, dtype=float)
    rest = np.zeros((len(others), N_LABELS))
    params = []
    for k in range(folds):
        test = folds_of_items == k
        fit = make_recalibration(method).fit(probs[~test], labels[~test])
        params.append(fit.params())
        if test.any():
            held[test] = fit.apply(probs[test])
        if len(others):
            rest += fit.apply(others)
    full = make_recalibration(method).fit(probs, labels).params()
    return held, rest / folds, params, full
