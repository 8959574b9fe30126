"""`esc-eval analysis calibration`: a judge's stored P(0..4) against human labels, per judge and
dimension, and its recalibration written as a new judge without calling the judge again.

For each judge and dimension: the items are the dialogues with the judge's full probability
vector and a human label (the low median of the dialogue's annotators, analysis.trust.human_scores).
Folds are drawn per dialogue (the same fold for all seven dimensions); every measure of the
recalibrated judge is held out (calibration.cross_fit), with bootstrap CIs over dialogues. The
new judge `<judge>+cal:<method>` gets one score row per row of the judge (SCORE_SCHEMA): full
vectors recalibrated (a human-scored dialogue by the fit that did not see it, the others by the
mean of the fold fits), expected score and most likely label from the new vector; rows without a
full vector (parse failures, partial top-k) copied as they are, so its failure rate is the judge's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from esc_eval.analysis.checks.floors import gate
from esc_eval.analysis.checks.registry import VerdictCheck, register_check
from esc_eval.analysis.trust.calibration import (N_LABELS, accuracy, bootstrap_measures, brier, cross_fit, ece, fold_of,
                                           make_recalibration, reliability)
from esc_eval.analysis.trust.human_scores import HumanScores
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, DIMENSION_TITLES
from esc_eval.sim.runs.records import SCORE_SCHEMA

CAL_TAG = "+cal:"
MIN_HUMAN = 10  # fewer human-scored items cannot both fit a map and check it on held-out folds
CHECK = "calibration"  # its planted-truth check (analysis/checks), registered at the end of this module


def calibrated_judge_id(judge: str, method: str) -> str:
    return f"{judge}{CAL_TAG}{method}"


@dataclass
class CalibrationResult:
    """The per judge x dimension table, the reliability bins, the new judge's rows and the notes."""

    method: str
    folds: int
    source: str
    table: pd.DataFrame
    bins: pd.DataFrame
    rows: pd.DataFrame = field(repr=False)
    notes: list[str] = field(default_factory=list)


def full_probs(probs: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(n x 5 array, mask of rows with a full, finite, non-zero vector); other rows are zeros."""
    vals = probs.to_numpy(dtype=object)
    out = np.zeros((len(vals), N_LABELS))
    sized = np.fromiter((v is not None and not isinstance(v, float) and len(v) == N_LABELS for v in vals), bool, len(vals))
    if sized.any():
        out[sized] = np.stack(vals[sized]).astype(float)
    total = out.sum(axis=1)
    ok = sized & np.isfinite(out).all(axis=1) & (total > 0)
    out[ok] /= total[ok, None]
    out[~ok] = 0.0
    return out, ok


def probability_judges(scores: pd.DataFrame) -> list[str]:
    """Judges with at least one full P(0..4), calibrated ones left out."""
    if scores.empty or "probs" not in scores.columns:
        return []
    return sorted(j for j in scores.loc[scores["probs"].notna(), "judge"].dropna().unique() if CAL_TAG not in j)


def calibrate(scores: pd.DataFrame, humans: HumanScores, *, method: str = "temperature", judges: list[str] | None = None,
              dimensions: list[str] | None = None, folds: int = 5, n_boot: int = 1000, seed: int = 0,
              confidence: float = 0.95, strict: bool = True) -> CalibrationResult:
    """Measure and recalibrate (see the module docstring). strict: a judge or dimension that cannot
    be calibrated is an AnalysisInputError (one line); otherwise it is left out with a note."""
    make_recalibration(method)  # an unknown method fails first
    if folds < 2:
        raise AnalysisInputError(f"--folds {folds}: at least 2 folds are needed to hold a fit's dialogues out")
    humans.check_runs(set(scores["dialogue_id"]))
    known = probability_judges(scores)
    if judges:
        every = sorted(scores["judge"].dropna().unique())
        unknown = [j for j in judges if j not in every]
        if unknown:
            raise AnalysisInputError(f"--judge {unknown[0]}: not in the runs' scores (judges: {', '.join(every)})")
    else:
        judges = known
    if not judges:
        raise AnalysisInputError("no judge in the runs gives P(0..4) (score with --method logprob): nothing to calibrate")
    labels = humans.labels.set_index(["dialogue_id", "dimension"])["label"]
    fold = fold_of(np.asarray(sorted(humans.dialogue_ids)), folds, seed)
    notes: list[str] = []
    table, bins, rows = [], [], []
    for judge in judges:
        sub = scores[scores["judge"] == judge]
        if "scored_at" in sub.columns:
            sub = sub.sort_values("scored_at", kind="stable")
        sub = sub.drop_duplicates(["dialogue_id", "dimension"], keep="last")
        present = set(sub["dimension"].unique())
        dims = [d for d in (dimensions or DIMENSION_NAMES) if d in present]
        if dimensions:
            absent = [d for d in dimensions if d not in dims]
            if absent:
                _problem(strict, notes, f"judge {judge} has no score rows for {absent[0]}")
        new_judge = calibrated_judge_id(judge, method)
        for dim in dims:
            d = sub[sub["dimension"] == dim]
            probs, ok = full_probs(d["probs"]) if "probs" in d.columns else (np.zeros((len(d), N_LABELS)),
                                                                              np.zeros(len(d), bool))
            ids = d["dialogue_id"].astype(str).to_numpy(dtype=object)
            keys = pd.MultiIndex.from_arrays([ids, np.full(len(d), dim)])
            label = labels.reindex(keys).to_numpy()
            human = ok & ~pd.isna(label)
            where = f"judge {judge}, {DIMENSION_TITLES[dim]}"
            if not ok.any():
                _problem(strict, notes, f"{where}: no P(0..4) in its score rows (labels only: a generate judge, or "
                                        "every label outside the top-k): nothing to calibrate")
                continue
            if human.sum() < max(MIN_HUMAN, 2 * folds):
                _problem(strict, notes, f"{where}: {int(human.sum())} human-scored dialogues carry the judge's "
                                        f"P(0..4); at least {max(MIN_HUMAN, 2 * folds)} are needed to fit and "
                                        f"check a recalibration on held-out folds")
                continue
            y = label[human].astype(int)
            p = probs[human]
            item_folds = np.array([fold[i] for i in ids[human]])
            other = ok & ~human
            held, rest, fold_params, full = cross_fit(method, p, y, item_folds, probs[other], folds)
            ci = bootstrap_measures({"judge": p, "recalibrated": held}, y, n_boot=n_boot, seed=seed,
                                    confidence=confidence)
            table.append({
                "judge": judge, "dimension": dim, "calibrated_judge": new_judge, "n_human": int(human.sum()),
                "n_other": int(other.sum()), "n_without_probs": int((~ok).sum()),
                "ece": ece(p, y), "ece_lo": ci["judge"]["ece"][0], "ece_hi": ci["judge"]["ece"][1],
                "brier": brier(p, y), "brier_lo": ci["judge"]["brier"][0], "brier_hi": ci["judge"]["brier"][1],
                "accuracy": accuracy(p, y),
                "ece_recal": ece(held, y), "ece_recal_lo": ci["recalibrated"]["ece"][0],
                "ece_recal_hi": ci["recalibrated"]["ece"][1],
                "brier_recal": brier(held, y), "brier_recal_lo": ci["recalibrated"]["brier"][0],
                "brier_recal_hi": ci["recalibrated"]["brier"][1], "accuracy_recal": accuracy(held, y),
                "ece_drop_lo": ci["judge - recalibrated"]["ece"][0], "ece_drop_hi": ci["judge - recalibrated"]["ece"][1],
                "fit": full, "fold_fits": fold_params,
            })
            for kind, q in (("judge", p), ("recalibrated", held)):
                bins += [{"judge": judge, "dimension": dim, "kind": kind, **b} for b in reliability(q, y)]
            new = probs.copy()
            new[human], new[other] = held, rest
            rows.append(_new_rows(d, new, ok, new_judge))
    if not table:
        raise AnalysisInputError(notes[0] if notes else "nothing to calibrate")
    out_rows = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=[*SCORE_SCHEMA.names, "run_dir"])
    return CalibrationResult(method, folds, humans.source, pd.DataFrame(table), pd.DataFrame(bins), out_rows, notes)


def _problem(strict: bool, notes: list[str], text: str) -> None:
    if strict:
        raise AnalysisInputError(text)
    notes.append(text)


def _new_rows(d: pd.DataFrame, probs: np.ndarray, ok: np.ndarray, judge: str) -> pd.DataFrame:
    """The recalibrated judge's rows: recalibrated vectors where the judge had a full one, else the row as it was."""
    out = d.reindex(columns=[*SCORE_SCHEMA.names, "run_dir"]).copy()
    vectors = [probs[i].astype(np.float32).tolist() if ok[i] else out["probs"].iloc[i] for i in range(len(out))]
    out["probs"] = pd.Series(vectors, index=out.index, dtype=object)
    out.loc[ok, "expected"] = probs[ok] @ np.arange(N_LABELS)
    out.loc[ok, "score"] = probs[ok].argmax(axis=1)
    out.loc[ok, "probs_status"] = "full"
    # no judge call was made for these rows: no tokens, no latency; scored now
    out = out.assign(judge=judge, prompt_tokens=None, latency_s=None, scored_at=pd.Timestamp.now(tz="UTC"))
    return out


def write_calibrated_rows(result: CalibrationResult) -> dict[str, int]:
    """Write the new judge's rows into each run folder they came from (one Parquet part per run)
    and record the fit in its manifest (`calibration.<new judge>`). Returns rows written per run."""
    from esc_eval.sim.runs.runfolder import RunFolder

    written = {}
    for run_dir, g in result.rows.groupby("run_dir", sort=True):
        folder = RunFolder(run_dir, create=False)
        records = g.drop(columns=["run_dir"]).astype(object).where(g.drop(columns=["run_dir"]).notna(), None)
        rows = records.to_dict("records")
        for r in rows:
            r["score"] = None if r["score"] is None else int(r["score"])
        folder.write_part("scores", rows)
        fits = {}
        for judge, t in result.table.groupby("calibrated_judge"):
            fits[judge] = {"method": result.method, "folds": result.folds, "humans": result.source,
                           "from_judge": str(t["judge"].iloc[0]),
                           "dimensions": {r["dimension"]: {"n_human": r["n_human"], "fit": r["fit"],
                                                           "ece": r["ece"], "ece_recal_held_out": r["ece_recal"]}
                                          for _, r in t.iterrows()}}
        folder.update_manifest(calibration=fits)
        written[str(run_dir)] = len(rows)
    return written


# --- output ------------------------------------------------------------------------------
def _ci(v: float, lo: float, hi: float, nd: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if lo is None or math.isnan(lo):
        return f"{v:.{nd}f}"
    return f"{v:.{nd}f} [{lo:.{nd}f}, {hi:.{nd}f}]"


def _fit_text(fit: dict) -> str:
    if "temperature" in fit:
        return f"T = {fit['temperature']:.2f}"
    return ", ".join(f"{k}: {v}" for k, v in fit.items())


HEADERS = ["Judge", "Dimension", "Human-scored", "ECE [95% CI]", "ECE recalibrated (held out)", "ECE drop [95% CI]",
           "Brier", "Brier recalibrated (held out)", "Accuracy", "Fit (all dialogues)"]


def calibration_rows(result: CalibrationResult) -> list[list[str]]:
    return [[r["judge"], DIMENSION_TITLES[r["dimension"]], str(r["n_human"]),
             _ci(r["ece"], r["ece_lo"], r["ece_hi"]), _ci(r["ece_recal"], r["ece_recal_lo"], r["ece_recal_hi"]),
             f"{r['ece'] - r['ece_recal']:+.3f} [{r['ece_drop_lo']:+.3f}, {r['ece_drop_hi']:+.3f}]"
             if not math.isnan(r["ece_drop_lo"]) else f"{r['ece'] - r['ece_recal']:+.3f}",
             _ci(r["brier"], r["brier_lo"], r["brier_hi"]), _ci(r["brier_recal"], r["brier_recal_lo"], r["brier_recal_hi"]),
             f"{r['accuracy']:.2f} -> {r['accuracy_recal']:.2f}", _fit_text(r["fit"])]
            for _, r in result.table.iterrows()]


def calibration_markdown(result: CalibrationResult) -> str:
    lines = [f"Human labels: the low median of each dialogue's annotators ({result.source}). Recalibration: "
             f"{result.method}, fitted per judge and dimension; every recalibrated figure is held out "
             f"({result.folds}-fold cross-fitting by dialogue). ECE: top-label, 10 bins; Brier: multi-class (0-2); "
             "CIs: bootstrap over dialogues (ECE is biased upwards in small samples, each resample's too, so its "
             "interval can sit just above a near-zero estimate).", "",
             "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |" for r in calibration_rows(result)]
    lines += [f"\n> {n}" for n in [*result.notes, *worse_notes(result)]]
    return "\n".join(lines) + "\n"


def worse_notes(result: CalibrationResult) -> list[str]:
    """Where the recalibration did not help on held-out dialogues (few human scores, or a judge already
    calibrated); and what the planted-truth check of these intervals found, when it found them wanting."""
    out = []
    t = result.table
    n = int((t["n_human"] + t["n_other"]).max()) if len(t) and {"n_human", "n_other"} <= set(t.columns) else 0
    _, note = gate(CHECK, n, "intervals", finds=True)
    if note:
        out.append(f"ECE and Brier intervals: {note}")
    for judge, t in result.table.groupby("judge", sort=False):
        worse = t[t["ece_recal"] > t["ece"]]
        if len(worse):
            lo, hi = int(worse["n_human"].min()), int(worse["n_human"].max())
            out.append(f"{judge}: the held-out ECE rose on {', '.join(DIMENSION_TITLES[d] for d in worse['dimension'])} "
                       f"({lo if lo == hi else f'{lo}-{hi}'} human-scored dialogues): the recalibration does not help there")
    return out


def reliability_figure(result: CalibrationResult, judge: str, path: str | Path) -> Path:
    """Reliability diagrams of one judge: a panel per dimension, the judge and its held-out recalibration."""
    from esc_eval.analysis.figures.plots import NothingToPlot, _save, plt

    b = result.bins[result.bins["judge"] == judge] if not result.bins.empty else result.bins
    if b.empty:
        raise NothingToPlot(f"no human-scored dialogues with P(0..4) for {judge}")
    dims = [d for d in DIMENSION_NAMES if d in set(b["dimension"])]
    cols = min(4, len(dims))
    rows = -(-len(dims) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.1 * cols, 3.0 * rows), squeeze=False)
    for ax, dim in zip(axes.ravel(), dims):
        ax.plot([0, 1], [0, 1], color="#999", lw=0.8, ls="--")
        for kind, color in (("judge", "#d9534f"), ("recalibrated", "#1a4f8a")):
            k = b[(b["dimension"] == dim) & (b["kind"] == kind)]
            ax.plot(k["confidence"], k["accuracy"], marker="o", color=color, lw=1.2,
                    label="judge" if kind == "judge" else f"{result.method} (held out)")
            ax.scatter(k["confidence"], k["accuracy"], s=8 + 60 * k["n"] / max(1, b["n"].max()), color=color, alpha=0.3)
        ax.set_xlim(0, 1), ax.set_ylim(0, 1)
        ax.set_title(DIMENSION_TITLES[dim], fontsize=9)
        ax.set_xlabel("confidence", fontsize=8), ax.set_ylabel("accuracy", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes.ravel()[len(dims):]:
        ax.axis("off")
    axes.ravel()[0].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"Reliability of {judge} against human labels", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def calibration_of_runs(run_dirs: list[str], humans: str, *, study: str | None = None,
                        judges: list[str] | None = None, dimensions: list[str] | None = None,
                        method: str = "temperature", folds: int = 5, write: bool = True,
                        allow_one_annotator: bool = False, n_boot: int = 1000, seed: int = 0,
                        out: str | None = None, windowed: str = "include") -> tuple[str, dict]:
    """Each judge's P(0..4) against human scores and its recalibration (`calibrate`): the Markdown and
    what was written (calibration.md/.json and a reliability figure per judge, default <first
    run>/report; with `write`, the recalibrated judge's score rows in the runs). Everything is
    computed, and every bad input refused, before anything is written. windowed: include | exclude | only
    the judgments made on a window (analysis/judgments/windowed.py), counted in the Markdown."""
    from esc_eval.analysis.judgments.windowed import windowed_line

    from esc_eval.analysis.results.loaders import load_scores
    from esc_eval.analysis.results.outputs import records, write_markdown_json
    from esc_eval.analysis.trust.human_scores import load_human_scores
    from esc_eval.sim.judging.dimensions import to_paper_dimension
    from esc_eval.sim.runs.storage import join_location

    try:
        dims = [to_paper_dimension(d) for d in dimensions] if dimensions else None
    except ValueError as e:
        raise AnalysisInputError(f"--dimension: {e}") from None
    human = load_human_scores(humans, study=study, allow_one_annotator=allow_one_annotator)
    read = load_scores(run_dirs, windowed=windowed)
    result = calibrate(read, human, method=method, judges=judges, dimensions=dims, folds=folds,
                       n_boot=n_boot, seed=seed)
    said = windowed_line(read)
    md = "# Judge calibration against human scores\n\n" + (said + "\n\n" if said else "") + calibration_markdown(result)
    figures = {f"calibration_{''.join(c if c.isalnum() else '_' for c in j)}.png": j for j in result.table["judge"].unique()}
    data = {"method": method, "folds": folds, "humans": human.source, "n_boot": n_boot,
            "rows": records(result.table), "reliability": records(result.bins), "windowed": read.attrs["windowed"]}
    paths: dict = write_markdown_json(out or join_location(run_dirs[0], "report"), "calibration", md, data,
                                      extra={name: (lambda p, j=j: reliability_figure(result, j, p))
                                             for name, j in figures.items()})
    if write:
        paths["rows_written"] = write_calibrated_rows(result)
        paths["judges_written"] = sorted(result.table["calibrated_judge"].unique())
    return md, paths


_TRUE: dict[str, tuple[float, float]] = {}


def _planted_check(r):
    """One planted replicate (analysis/checks): J2's ECE and Brier intervals per dimension against the
    population's (the analysis's own measures of a large draw of the planted judge), and whether the
    recalibration is said to help (its ECE drop's interval above 0)."""
    from esc_eval.analysis.checks.registry import Outcome, held, within
    from esc_eval.analysis.results.loaders import load_scores
    from esc_eval.analysis.trust.human_scores import human_scores_of

    if r.variant not in _TRUE:
        draw = r.truth["samples"]
        probs, labels = np.asarray(draw["probs"], dtype=float), np.asarray(draw["labels"], dtype=int)
        _TRUE[r.variant] = (ece(probs, labels), brier(probs, labels))
    true_ece, true_brier = _TRUE[r.variant]
    result = calibrate(r.once("scores", lambda: load_scores(r.path("runs"))),
                       r.once("humans", lambda: human_scores_of(r.path("humans"))), judges=["J2"], n_boot=r.n_boot,
                       seed=r.seed, strict=False)
    t = result.table
    helps = [bool(lo > 0) for lo in t["ece_drop_lo"] if not math.isnan(lo)]
    return Outcome(items=(sum(helps), len(helps)) if helps else None,
                   intervals=held([within(lo, hi, true_ece) for lo, hi in zip(t["ece_lo"], t["ece_hi"])]
                                  + [within(lo, hi, true_brier) for lo, hi in zip(t["brier_lo"], t["brier_hi"])]))


register_check(VerdictCheck(
    CHECK, "Calibration of the judge's P(0..4)", "esc_eval.analysis.trust.calibration_runs.calibrate",
    ("section:human-scores", "command:analysis calibration"), "duo", "overconfident", _planted_check,
    flag="the recalibration helps (held-out ECE drop's 95% CI above 0), per dimension",
    interval="ECE and Brier per dimension, 95% bootstrap CI", unit="cards per target (a quarter scored by people)"))
