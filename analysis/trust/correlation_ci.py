"""Judge-vs-human correlations with bootstrap 95% CIs (the paper's Tables 3 and 13-15 from the CLI).

correlation_table gives r and p per (metric, human dimension, method); this adds a percentile
bootstrap CI of r (scipy.stats.bootstrap, paired resampling of the units: dialogues at the sample
level, models at the dataset level).
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import stats

from esc_eval.analysis.annotation.sheets import import_annotations
from esc_eval.analysis.trust.correlation import METHODS, correlation_table, scores_wide
from esc_eval.analysis.results.loaders import AnalysisInputError


def human_wide(annotations: pd.DataFrame) -> pd.DataFrame:
    """Long annotations (several annotators) -> one row per dialogue, their mean per dimension."""
    mean = annotations.groupby(["dialogue_id", "dimension"], as_index=False)["score"].mean()
    return scores_wide(mean, extra=[])


def _pearson_rows(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """Pearson's r of each resample (along axis) at once; NaN where a side is constant."""
    am = a - a.mean(axis=axis, keepdims=True)
    bm = b - b.mean(axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (am * bm).sum(axis=axis) / np.sqrt((am * am).sum(axis=axis) * (bm * bm).sum(axis=axis))


def _spearman_rows(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """Spearman's rho of each resample: Pearson's r of the average ranks (what spearmanr computes)."""
    return _pearson_rows(stats.rankdata(a, axis=axis), stats.rankdata(b, axis=axis), axis=axis)


# Resampled statistics computed for a whole batch of resamples at once (a Python call per resample
# made `correlate --pairing cross` take minutes at 8,500 dialogues); Kendall's tau has no cheap
# vectorised form and keeps scipy's loop.
_VECTORISED = {"pearson": _pearson_rows, "spearman": _spearman_rows}


def _ci(x: np.ndarray, y: np.ndarray, method: str, n_boot: int, seed: int) -> tuple[float, float]:
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    if n_boot <= 0 or len(x) < 4 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan"), float("nan")
    fn = METHODS[method]

    def stat(a, b):
        return fn(a, b).statistic

    vectorised = _VECTORISED.get(method)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resamples with a constant side give NaN: dropped by nanpercentile below
        res = stats.bootstrap((x, y), vectorised or stat, paired=True, vectorized=vectorised is not None,
                              n_resamples=n_boot, method="percentile", rng=np.random.default_rng(seed),
                              batch=max(1, 2_000_000 // len(x)))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def correlations_with_ci(metrics: pd.DataFrame, human: pd.DataFrame, *, level: str = "sample",
                         pairing: str = "matched", label: str | None = "ESC-Eval", group: str = "target_model",
                         methods: tuple[str, ...] = ("spearman", "pearson", "kendall"), n_boot: int = 1000,
                         seed: int = 0) -> pd.DataFrame:
    """correlation_table rows plus ci_lo, ci_hi (bootstrap over the same joined units)."""
    table = correlation_table(metrics, human, level=level, pairing=pairing, label=label, group=group, methods=methods)
    on = "dialogue_id"
    mcols = [c for c in metrics.columns if c not in (on, group) and pd.api.types.is_numeric_dtype(metrics[c])]
    hcols = [c for c in human.columns if c not in (on, group) and pd.api.types.is_numeric_dtype(human[c])]
    joined = metrics[[on, *mcols, *([group] if group in metrics.columns else [])]].merge(
        human[[on, *hcols]], on=on, how="inner", suffixes=("", "_human"))
    if level == "dataset":
        joined = joined.groupby(group)[[c for c in joined.columns if c not in (on, group)]].mean().reset_index()
    lo, hi = [], []
    for r in table.itertuples():
        mc = r.human if pairing == "matched" else r.metric
        hc = r.human + "_human" if r.human in mcols else r.human
        a, b = _ci(joined[mc].to_numpy(float), joined[hc].to_numpy(float), r.method, n_boot, seed)
        lo.append(a)
        hi.append(b)
    return table.assign(ci_lo=lo, ci_hi=hi)


def correlation_ci_markdown(table: pd.DataFrame) -> str:
    """One row per (level, metric, human dimension, method): r x100 [CI] and n."""
    if table.empty:
        return "_No correlations._\n"
    lines = ["| Level | Metric | Human | Method | r x100 | 95% CI | p | n |", "|---|---|---|---|---:|---|---:|---:|"]
    f = lambda v: "n/a" if v != v else f"{100 * v:.1f}"  # noqa: E731 (NaN check)
    for r in table.itertuples():
        p = "n/a" if r.p != r.p else f"{r.p:.3g}"
        lines.append(f"| {r.level} | {r.metric} | {r.human} | {r.method} | {f(r.r)} | [{f(r.ci_lo)}, {f(r.ci_hi)}] | "
                     f"{p} | {r.n} |")
    # Why a row has no number (e.g. a judge that gave every dialogue the same score): once per reason.
    if "note" in table.columns:
        notes = table[table["note"].fillna("").astype(str) != ""]
        for note, g in notes.groupby("note", sort=False):
            where = ", ".join(dict.fromkeys(f"{r.level} {r.metric} vs {r.human}" for r in g.itertuples()))
            lines.append(f"\nn/a: {note} ({where})")
    return "\n".join(lines) + "\n"


def load_human(paths) -> pd.DataFrame:
    ann = import_annotations(paths)
    if ann.empty:
        raise AnalysisInputError("the annotation sheets hold no scores")
    return human_wide(ann)


def correlate_runs(pred: list[str], human, judge: str | None = None, metrics_csv=None, level: str = "both",
                   pairing: str = "matched", n_boot: int = 1000, seed: int = 0,
                   out: str | None = None, windowed: str = "include") -> tuple[str, dict[str, str]]:
    """Tables 3, 13-15 for the runs' judge (or the per-dialogue metric columns of `metrics_csv`) against
    filled annotation sheets: the Markdown and the written correlations.md/.json (default <first run>/report).
    windowed: include | exclude | only the judgments made on a window (analysis/judgments/windowed.py)."""
    from esc_eval.analysis.judgments.windowed import windowed_line

    from esc_eval.analysis.results.loaders import load_scores
    from esc_eval.analysis.results.outputs import one_judge, records, write_markdown_json
    from esc_eval.sim.runs.storage import join_location

    levels = {"both": ["sample", "dataset"], "sample": ["sample"], "dataset": ["dataset"]}.get(level)
    if levels is None:
        raise AnalysisInputError(f"--level must be sample, dataset or both, got {level!r}")
    read = load_scores(pred, extra_dimensions=True, windowed=windowed)
    scores, judges = one_judge(read, judge)  # safety has its own row
    said = windowed_line(read) if metrics_csv is None else ""  # the judge's readings, not the metrics'
    if metrics_csv is not None:
        try:
            metrics = pd.read_csv(metrics_csv)
        except (OSError, pd.errors.ParserError) as e:
            raise AnalysisInputError(f"{metrics_csv}: cannot read as CSV ({e})") from e
        if "dialogue_id" not in metrics.columns:
            raise AnalysisInputError(f"{metrics_csv}: no dialogue_id column")
        if "target_model" not in metrics.columns:
            metrics = metrics.merge(scores.drop_duplicates("dialogue_id")[["dialogue_id", "target_model"]],
                                    on="dialogue_id", how="left")
        metrics = metrics.drop(columns=[c for c in ("n_pairs", "meteor_wordnet") if c in metrics.columns])
        pairing, label = "cross", None
    else:
        metrics, label = scores_wide(scores, extra=["target_model"]), "ESC-Eval"
    hum = load_human(human)
    table = pd.concat([correlations_with_ci(metrics, hum, level=lv, pairing=pairing, label=label, n_boot=n_boot,
                                            seed=seed) for lv in levels], ignore_index=True)
    md = (said + "\n\n" if said else "") + correlation_ci_markdown(table)
    paths = write_markdown_json(out or join_location(pred[0], "report"), "correlations",
                                "# Judge vs human correlations\n\n" + md,
                                {"judge": judge or (judges[0] if judges else None), "n_boot": n_boot,
                                 "rows": records(table), "windowed": read.attrs["windowed"]})
    return md, paths
