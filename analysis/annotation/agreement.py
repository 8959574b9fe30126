"""Agreement between annotators (people, or a judge among people): quadratic-weighted Cohen's kappa
per annotator pair, Krippendorff's alpha (ordinal, the `krippendorff` package) over all
annotators, and the one-way random-effects intraclass correlation ICC(1) with its F-based
confidence interval. Input: the long layout of `sheets.import_annotations` (annotator,
dialogue_id, dimension, score)."""
from __future__ import annotations

import itertools
import math
from typing import Iterable

import numpy as np
import pandas as pd

from esc_eval.sim.judging.dimensions import ALL_DIMENSION_NAMES, DIMENSION_NAMES, dimension_title


def quadratic_weighted_kappa(a: Iterable[float], b: Iterable[float], categories: int = 5) -> float:
    """Cohen's kappa with quadratic weights for scores 0..categories-1:
    1 - sum(w * observed) / sum(w * expected), w_ij = (i - j)^2. NaN when expected disagreement
    is zero (both raters gave one and the same constant score: agreement is undefined)."""
    a, b = np.asarray(list(a), dtype=int), np.asarray(list(b), dtype=int)
    if a.shape != b.shape or a.size == 0:
        raise ValueError("kappa needs two equally long, non-empty score lists")
    if a.min() < 0 or b.min() < 0 or a.max() >= categories or b.max() >= categories:
        raise ValueError(f"scores must lie in 0..{categories - 1}")
    observed = np.zeros((categories, categories))
    np.add.at(observed, (a, b), 1.0)
    observed /= a.size
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    i, j = np.indices((categories, categories))
    w = (i - j) ** 2
    denom = float((w * expected).sum())
    return float("nan") if denom == 0 else 1.0 - float((w * observed).sum()) / denom


def agreement_scopes(annotations: pd.DataFrame) -> list[str]:
    """"all" (the seven dimensions pooled), each of the seven present, then each dimension beyond the
    paper present (safety): shown like the others, never pooled into "all"."""
    present = set(annotations["dimension"])
    return ["all"] + [d for d in ALL_DIMENSION_NAMES if d in present]


def _scope(annotations: pd.DataFrame, scope: str | None) -> pd.DataFrame:
    if scope in (None, "all"):
        return annotations[annotations["dimension"].isin(DIMENSION_NAMES)]
    return annotations[annotations["dimension"] == scope]


def pairwise_kappa(annotations: pd.DataFrame, by_dimension: bool = True) -> pd.DataFrame:
    """Quadratic-weighted kappa for every annotator pair on the items both scored, per dimension
    and pooled over dimensions ("all"). Columns: annotator_a, annotator_b, dimension, n, kappa, note."""
    rows = []
    names = sorted(annotations["annotator"].unique())
    wide = annotations.pivot_table(index=["dialogue_id", "dimension"], columns="annotator", values="score",
                                   aggfunc="first").reindex(columns=names)
    scopes = agreement_scopes(annotations) if by_dimension else ["all"]
    # One float array per scope, split once: a study of 8,500 dialogues x 10 annotators has 45 pairs x 8 scopes.
    dims = wide.index.get_level_values("dimension")
    arrays = {scope: (wide[dims.isin(DIMENSION_NAMES)] if scope == "all" else wide[dims == scope]).to_numpy(dtype=float)
              for scope in scopes}
    for (i, x), (j, y) in itertools.combinations(enumerate(names), 2):
        for scope in scopes:
            arr = arrays[scope]
            both = ~(np.isnan(arr[:, i]) | np.isnan(arr[:, j]))
            n = int(both.sum())
            note = ""
            if n < 2:
                kappa, note = float("nan"), f"{n} item(s) scored by both"
            else:
                kappa = quadratic_weighted_kappa(arr[both, i], arr[both, j])
                if math.isnan(kappa):
                    note = "both annotators gave one constant score: kappa undefined"
            rows.append({"annotator_a": x, "annotator_b": y, "dimension": scope, "n": n,
                         "kappa": kappa, "note": note})
    return pd.DataFrame(rows, columns=["annotator_a", "annotator_b", "dimension", "n", "kappa", "note"])


def krippendorff_alpha(annotations: pd.DataFrame, dimension: str | None = None, level: str = "ordinal") -> tuple[float, str]:
    """Krippendorff's alpha over all annotators (items = dialogue x dimension, or one dimension).
    Returns (alpha, note); NaN and a note when it cannot be computed."""
    import krippendorff

    sub = _scope(annotations, dimension)
    data = sub.pivot_table(index="annotator", columns=["dialogue_id", "dimension"], values="score", aggfunc="first")
    if data.shape[0] < 2:
        return float("nan"), "fewer than 2 annotators"
    pairable = int((data.notna().sum(axis=0) >= 2).sum())
    if pairable == 0:
        return float("nan"), "no item scored by 2 or more annotators"
    values = data.to_numpy(dtype=float)
    if np.unique(values[~np.isnan(values)]).size < 2:
        return float("nan"), "every score is the same value: alpha undefined"
    alpha = krippendorff.alpha(reliability_data=values, level_of_measurement=level, value_domain=[0, 1, 2, 3, 4])
    return float(alpha), ""


def icc_oneway(annotations: pd.DataFrame, dimension: str | None = None, confidence: float = 0.95) -> dict:
    """One-way random-effects ICC (Shrout & Fleiss 1979, ICC(1,1) and ICC(1,k)) with F-based CIs.

    One-way, because in an overlap design each dialogue is scored by its own subset of the
    annotators: rater identity is not a crossed factor. Items = dialogues (one dimension) or
    dialogue x dimension ("all"); items with fewer than two scores are left out. Unequal numbers of
    scores per item use the ANOVA's n0 = (N - sum n_i^2 / N) / (a - 1) in place of k.
    Returns icc, ci_lo, ci_hi (single score), icc_k, ci_k_lo, ci_k_hi (mean of n0 scores), n_items,
    k (n0) and a note (NaN figures with the reason when they cannot be computed)."""
    from scipy import stats

    sub = _scope(annotations, dimension)
    nan = float("nan")
    out = {"icc": nan, "ci_lo": nan, "ci_hi": nan, "icc_k": nan, "ci_k_lo": nan, "ci_k_hi": nan, "n_items": 0,
           "k": nan, "note": ""}
    item = sub.groupby(["dialogue_id", "dimension"], sort=False).ngroup().to_numpy()
    x = sub["score"].to_numpy(dtype=float)
    counts = np.bincount(item)
    keep = counts[item] >= 2
    item, x = np.unique(item[keep], return_inverse=True)[1], x[keep]
    a = int(item.max()) + 1 if len(item) else 0
    out["n_items"] = a
    if a < 2:
        out["note"] = f"{a} item(s) scored by 2 or more annotators: too few for ICC"
        return out
    n = np.bincount(item).astype(float)
    means = np.bincount(item, weights=x) / n
    big_n = n.sum()
    grand = float(x.mean())
    ss_between = float((n * (means - grand) ** 2).sum())
    ss_within = float(((x - means[item]) ** 2).sum())
    df_b, df_w = a - 1, big_n - a
    ms_b, ms_w = ss_between / df_b, ss_within / df_w
    n0 = (big_n - (n ** 2).sum() / big_n) / df_b
    out["k"] = float(n0)
    if ms_w == 0:
        out["note"] = "every item's annotators agree exactly: the within-item variance is 0, ICC undefined"
        return out
    f = ms_b / ms_w
    q = 1 - (1 - confidence) / 2
    f_lo, f_hi = f / stats.f.ppf(q, df_b, df_w), f * stats.f.ppf(q, df_w, df_b)
    out.update(icc=(ms_b - ms_w) / (ms_b + (n0 - 1) * ms_w),
               ci_lo=(f_lo - 1) / (f_lo + n0 - 1), ci_hi=(f_hi - 1) / (f_hi + n0 - 1),
               icc_k=(ms_b - ms_w) / ms_b, ci_k_lo=1 - 1 / f_lo, ci_k_hi=1 - 1 / f_hi)
    out.update({k: float(v) for k, v in out.items() if k.startswith(("icc", "ci"))})
    return out


def icc_table(annotations: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """icc_oneway per dimension and pooled ("all"): one row each."""
    scopes = agreement_scopes(annotations)
    return pd.DataFrame([{"dimension": s, **icc_oneway(annotations, s, confidence)} for s in scopes])


def agreement_summary(annotations: pd.DataFrame, pairs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per dimension and overall: n annotators, items, mean pairwise kappa, Krippendorff's alpha.
    `pairs`: pairwise_kappa(annotations) when the caller has it already."""
    kap = pairwise_kappa(annotations) if pairs is None else pairs
    rows = []
    for scope in agreement_scopes(annotations):
        sub = _scope(annotations, scope)
        alpha, note = krippendorff_alpha(annotations, scope)
        k = kap[kap["dimension"] == scope]["kappa"]
        rows.append({"dimension": scope, "n_annotators": int(sub["annotator"].nunique()),
                     "n_items": int(sub.groupby(["dialogue_id", "dimension"]).ngroups),
                     "mean_pairwise_kappa": float(k.mean()) if k.notna().any() else float("nan"),
                     "krippendorff_alpha": alpha, "note": note})
    return pd.DataFrame(rows)


def agreement_markdown(summary: pd.DataFrame, pairs: pd.DataFrame | None = None) -> str:
    fmt = lambda v: "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"  # noqa: E731
    lines = ["| Dimension | Annotators | Items | Mean pairwise kappa (quadratic) | Krippendorff alpha (ordinal) | Note |",
             "|---|---:|---:|---:|---:|---|"]
    for _, r in summary.iterrows():
        title = "All" if r["dimension"] == "all" else dimension_title(r["dimension"])
        lines.append(f"| {title} | {r['n_annotators']} | {r['n_items']} | {fmt(r['mean_pairwise_kappa'])} | "
                     f"{fmt(r['krippendorff_alpha'])} | {r['note']} |")
    if pairs is not None and not pairs.empty:
        lines += ["", "| Pair | Dimension | n | kappa | Note |", "|---|---|---:|---:|---|"]
        for _, r in pairs.iterrows():
            lines.append(f"| {r['annotator_a']} / {r['annotator_b']} | {r['dimension']} | {r['n']} | {fmt(r['kappa'])} | {r['note']} |")
    return "\n".join(lines) + "\n"


def sheet_agreement(annotations: pd.DataFrame, out=None) -> str:
    """Agreement between the annotators of filled sheets as Markdown; with `out` (a local folder) also
    agreement.md and agreement.json (the summary and the pairwise kappas as records) there."""
    import json
    from pathlib import Path

    summary, pairs = agreement_summary(annotations), pairwise_kappa(annotations)
    md = agreement_markdown(summary, pairs)
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "agreement.md").write_text("# Inter-annotator agreement\n\n" + md, encoding="utf-8")
        (out / "agreement.json").write_text(json.dumps({
            "summary": json.loads(summary.to_json(orient="records")),
            "pairs": json.loads(pairs.to_json(orient="records"))}, indent=2), encoding="utf-8")
    return md


def agreement_of_sheets(sheets: list, out=None) -> str:
    """`esc-eval annotate agreement`: sheet_agreement of filled sheets (files, or one folder of annotate_*.csv)."""
    from pathlib import Path

    from esc_eval.analysis.annotation.sheets import import_annotations

    paths = [Path(p) for p in sheets]
    return sheet_agreement(import_annotations(paths[0] if len(paths) == 1 and paths[0].is_dir() else paths), out)
