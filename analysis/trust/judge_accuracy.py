"""Judge accuracy against reference (human) scores: the paper's Table 4 (ACC and ACC_soft).

ACC is the share of (dialogue, dimension) pairs where the judge's score equals the reference;
ACC_soft allows one point of deviation (|pred - ref| <= 1). Both in percent. A judge answer that
did not parse counts as wrong (the judge failed on that item); a missing reference is skipped, and
a reference item the judge has no row for at all is skipped and counted in n_unjudged.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.sim.judging.dimensions import ALL_DIMENSION_NAMES, DIMENSION_NAMES, dimension_title, to_dimension
from esc_eval.sim.runs.open import OutputFolder

AVERAGE = "average"


def _long(frame: pd.DataFrame, name: str, on: list[str]) -> pd.DataFrame:
    need = set(on) | {"dimension", "score"}
    missing = need - set(frame.columns)
    if missing:
        raise AnalysisInputError(f"{name} scores lack columns {sorted(missing)}")
    out = frame[list(on) + ["dimension", "score"]].copy()
    try:
        out["dimension"] = out["dimension"].map(to_dimension)
    except ValueError as e:
        raise AnalysisInputError(f"{name} scores: {e}") from e
    out["score"] = pd.to_numeric(out["score"], errors="raise").astype("float64")
    bad = out["score"].notna() & ~out["score"].isin([0, 1, 2, 3, 4])
    if bad.any():
        raise AnalysisInputError(f"{name} scores: value {out.loc[bad, 'score'].iloc[0]} outside 0-4")
    if out.duplicated(list(on) + ["dimension"]).any():
        dup = out[out.duplicated(list(on) + ["dimension"], keep=False)].iloc[0]
        raise AnalysisInputError(
            f"{name} scores have several rows for {dict(dup[list(on) + ['dimension']])}; "
            "reduce them first (one judge, one reference per item)"
        )
    return out


def judge_accuracy(pred: pd.DataFrame, ref: pd.DataFrame, on: list[str] | None = None) -> pd.DataFrame:
    """ACC / ACC_soft per dimension and their average over dimensions (the paper's "Aver." row).

    pred, ref: long score frames (dialogue_id, dimension, score), e.g. a judge's load_scores and
    imported human annotations. Items are matched on `on` (default ["dialogue_id"]) + dimension.
    Returns one row per dimension with columns dimension, title, n (items with a reference and a
    judge row), n_unparsed (of those, judge gave no score), n_unjudged (reference, no judge row), ACC, ACC_soft, MAE (on parsed items); the last
    row "average" is the unweighted mean of the seven's rows, as in Table 4. Safety (beyond the
    paper) has its row after the seven when both sides score it, and stays out of the average.
    """
    on = on or ["dialogue_id"]
    p, r = _long(pred, "predicted", on), _long(ref, "reference", on)
    r = r[r["score"].notna()]
    joined = r.merge(p, on=list(on) + ["dimension"], how="left", suffixes=("_ref", "_pred"), indicator=True)
    unjudged = joined[joined["_merge"] == "left_only"]
    joined = joined[joined["_merge"] == "both"]
    if joined.empty:
        raise AnalysisInputError("no item has both a reference score and a judge row: check the ids match")
    rows = []
    for dim in ALL_DIMENSION_NAMES:
        g = joined[joined["dimension"] == dim]
        if g.empty:
            continue
        diff = (g["score_pred"] - g["score_ref"]).abs()
        parsed = diff.notna()
        rows.append({
            "dimension": dim, "title": dimension_title(dim), "n": int(len(g)),
            "n_unparsed": int((~parsed).sum()),
            "n_unjudged": int((unjudged["dimension"] == dim).sum()),
            # NaN diffs compare False: an unparsed judge answer counts as wrong, not as skipped.
            "ACC": 100.0 * float((diff == 0).mean()),
            "ACC_soft": 100.0 * float((diff <= 1).mean()),
            "MAE": float(diff[parsed].mean()) if parsed.any() else float("nan"),
        })
    extra = pd.DataFrame([r for r in rows if r["dimension"] not in DIMENSION_NAMES])
    df = pd.DataFrame([r for r in rows if r["dimension"] in DIMENSION_NAMES],
                      columns=["dimension", "title", "n", "n_unparsed", "n_unjudged", "ACC", "ACC_soft", "MAE"])
    avg = {"dimension": AVERAGE, "title": "Average", "n": int(df["n"].sum()), "n_unparsed": int(df["n_unparsed"].sum()),
           "n_unjudged": int(df["n_unjudged"].sum()),
           "ACC": float(df["ACC"].mean()), "ACC_soft": float(df["ACC_soft"].mean()), "MAE": float(np.nanmean(df["MAE"]))
           if df["MAE"].notna().any() else float("nan")}
    return pd.concat([df, pd.DataFrame([avg]), extra], ignore_index=True)


def accuracy_markdown(acc: pd.DataFrame, judge: str = "judge") -> str:
    lines = ["| Dimension | Model | n | ACC | ACC_soft | MAE | unparsed |", "|---|---|---:|---:|---:|---:|---:|"]
    for _, r in acc.iterrows():
        mae = "n/a" if np.isnan(r["MAE"]) else f"{r['MAE']:.2f}"
        lines.append(f"| {r['title']} | {judge} | {r['n']} | {r['ACC']:.2f} | {r['ACC_soft']:.2f} | {mae} | {r['n_unparsed']} |")
    return "\n".join(lines) + "\n"


def write_accuracy(acc: pd.DataFrame, out_dir: str | Path, judge: str = "judge", note: str = "") -> dict[str, Path]:
    """judge_accuracy.json (one object per dimension + average) and judge_accuracy.md (a folder or a storage URI)."""
    with OutputFolder(out_dir) as out:
        js, md = out / "judge_accuracy.json", out / "judge_accuracy.md"
        records = json.loads(acc.to_json(orient="records"))  # NaN -> null
        js.write_text(json.dumps({"judge": judge, "dimensions": records}, indent=2), encoding="utf-8")
        md.write_text(f"# Judge accuracy ({judge})\n\n" + (note + "\n\n" if note else "") + accuracy_markdown(acc, judge),
                      encoding="utf-8")
        return out.finals({"json": js, "markdown": md})


def accuracy_from_sheets(pred: list[str], human, judge: str | None = None,
                         out: str | None = None, windowed: str = "include") -> tuple[str, dict[str, str]]:
    """Table 4 of the runs' judge (`judge`, or the only one) against filled annotation sheets (a CSV or a
    folder of annotate_*.csv): the Markdown and the written judge_accuracy.md/.json (default
    <first run>/report). Several annotators: the reference is their mean, rounded half up. windowed: include |
    exclude | only the judgments made on a window (analysis/judgments/windowed.py), counted in the Markdown."""
    from esc_eval.analysis.annotation.sheets import import_annotations
    from esc_eval.analysis.results.loaders import load_scores
    from esc_eval.analysis.results.outputs import one_judge
    from esc_eval.sim.runs.storage import join_location

    from esc_eval.analysis.judgments.windowed import windowed_line

    read = load_scores(pred, extra_dimensions=True, windowed=windowed)
    scores, judges = one_judge(read, judge)  # safety has its own row
    said = windowed_line(read)
    name = judge or (judges[0] if judges else "judge")
    ref = import_annotations(human)
    # scores are integers: the mean of several annotators rounded half up
    ref = (ref.groupby(["dialogue_id", "dimension"], as_index=False)["score"].mean()
           .assign(score=lambda d: (d["score"] + 0.5).apply(int).astype(float)))
    acc = judge_accuracy(scores, ref)
    paths = write_accuracy(acc, out or join_location(pred[0], "report"), judge=name, note=said)
    return (said + "\n\n" if said else "") + accuracy_markdown(acc, name), {k: str(v) for k, v in paths.items()}
