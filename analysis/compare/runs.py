"""Compare two runs: two models on the same cards, two judges on the same dialogues, a model
before and after a fine-tune (`esc-eval compare RUN_A RUN_B`).

Pairing: the same dialogue ids in both runs (one dialogue set scored by two judges), or else the
same (language, card, seed) and, when both runs hold several models, the same target model.
Per dimension (and the average): mean of B - A on the paper's x25 scale, a bootstrap 95% CI and a
paired test's p-value (analysis.compare.paired.paired_comparison), Holm-corrected over the dimensions;
and the cards whose average moved most.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from esc_eval.analysis.compare.paired import holm, paired_comparison
from esc_eval.analysis.judgments.expected_scores import check_score_kind, expected_scores
from esc_eval.analysis.results.loaders import AnalysisInputError, is_official_json, load_scores
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, DIMENSION_TITLES, TABLE_SCALE
from esc_eval.sim.runs.open import OutputFolder
from esc_eval.sim.runs.runfolder import RunFolder

PairBy = Literal["auto", "dialogue", "card"]
KEYS = {"dialogue": ["dialogue_id"], "card": ["language", "card_id", "seed"]}


def _run_scores(path: str | os.PathLike[str], model: str | None, judge: str | None, side: str,
                score_kind: str = "label", windowed: str = "include") -> tuple[pd.DataFrame, set[str]]:
    """(the side's score rows, every dialogue id the run holds scores for); the rows' windowed count in attrs."""
    scores = load_scores([path], windowed=windowed)
    counts = scores.attrs["windowed"]
    every_id = set(scores["dialogue_id"])
    if check_score_kind(score_kind) == "expected":
        scores = expected_scores(scores)
    if scores.empty:
        raise AnalysisInputError(f"{path}: no score rows (run `esc-eval score` first)")
    for col, value, what in (("target_model", model, "model"), ("judge", judge, "judge")):
        if value is not None:
            scores = scores[scores[col] == value]
            if scores.empty:
                raise AnalysisInputError(f"{path}: no scores for --{what}-{side} {value!r}")
    judges = sorted(scores["judge"].dropna().unique())
    if len(judges) > 1:
        raise AnalysisInputError(f"{path}: scores from several judges {judges}: pick one with --judge-{side}")
    seeds = pd.DataFrame(columns=["dialogue_id", "seed"])
    if not is_official_json(path):
        seeds = RunFolder(path, create=False).read("dialogues", columns=["dialogue_id", "seed"]).to_pandas()
        seeds = seeds.drop_duplicates("dialogue_id", keep="last")
    scores = scores.merge(seeds, on="dialogue_id", how="left")
    scores["seed"] = scores["seed"].fillna(0).astype("int64")
    scores["card_id"] = scores["card_id"].astype(str)
    scores.attrs["windowed"] = counts
    return scores, every_id


def compare_runs(run_a: str | os.PathLike[str], run_b: str | os.PathLike[str], *, pair_by: PairBy = "auto",
                 model_a: str | None = None, model_b: str | None = None, judge_a: str | None = None,
                 judge_b: str | None = None, n_resamples: int = 5_000, seed: int = 0, top: int = 10,
                 humans: Any = None, score_kind: str = "label", windowed: str = "include") -> dict[str, Any]:
    """B - A per dimension with CIs and Holm-corrected p-values, and the cards that moved most.
    humans (analysis.trust.human_scores.HumanScores): also each side's human-scale mean (PPI) and B - A
    on that scale (analysis.trust.human_leaderboard.compare_on_humans). score_kind: label | expected.
    windowed: include | exclude | only the judgments made on a window (analysis/judgments/windowed.py)."""
    from esc_eval.analysis.judgments.windowed import windowed_line

    a, ids_a = _run_scores(run_a, model_a, judge_a, "a", score_kind, windowed)
    b, ids_b = _run_scores(run_b, model_b, judge_b, "b", score_kind, windowed)
    said = {"a": windowed_line(a.attrs["windowed"]), "b": windowed_line(b.attrs["windowed"])}
    if humans is not None:  # bad human scores fail before anything is computed (the whole runs' dialogues)
        humans.check_runs(ids_a | ids_b, "either run")
    if pair_by not in ("auto", "dialogue", "card"):
        raise ValueError(f"pair_by must be auto, dialogue or card, got {pair_by!r}")
    if pair_by == "auto":
        shared = set(a["dialogue_id"]) & set(b["dialogue_id"])
        pair_by = "dialogue" if len(shared) >= 0.5 * min(a["dialogue_id"].nunique(), b["dialogue_id"].nunique()) else "card"
    keys = list(KEYS[pair_by])
    models_a, models_b = sorted(a["target_model"].unique()), sorted(b["target_model"].unique())
    if pair_by == "card" and (len(models_a) > 1 or len(models_b) > 1):
        if set(models_a) != set(models_b):
            raise AnalysisInputError(f"runs hold several models ({models_a} vs {models_b}): pick one with "
                                     "--model-a/--model-b")
        keys.append("target_model")  # the same model in both runs, e.g. two judges re-scoring separately
    # The pairing columns become one key; both sides are relabelled A and B so paired_comparison
    # (which pairs by target_model) tests B against A on exactly these units.
    frames = []
    for label, df in (("A", a), ("B", b)):
        df = df.copy()
        # Column-wise string concatenation (a row-wise join took 20 s at 60K rows).
        unit = df[keys[0]].astype(str)
        for k in keys[1:]:
            unit = unit + "|" + df[k].astype(str)
        df["_unit"] = unit
        df["_card"] = df["language"].astype(str) + "|" + df["card_id"].astype(str)
        df["target_model"] = label
        frames.append(df)
    both = pd.concat(frames, ignore_index=True)
    both["dialogue_id"] = both["target_model"] + ":" + both["dialogue_id"].astype(str)
    rows = []
    for dim in [*DIMENSION_NAMES, "average"]:
        if dim != "average" and not both["dimension"].eq(dim).any():
            continue
        r = paired_comparison(both, "B", "A", dim, "permutation", n_resamples, seed, pair_on=("_unit",))
        # paired_comparison's "a" side is B here (diff = B - A): swap its means back.
        rows.append({"dimension": dim, "n_pairs": r["n_pairs"], "mean_a": r["mean_b"], "mean_b": r["mean_a"],
                     "diff": r["diff"], "ci_lo": r["ci_lo"], "ci_hi": r["ci_hi"], "p_value": r["p_value"],
                     "note": r["note"]})
    dims = pd.DataFrame(rows)
    dims["p_holm"] = holm(dims["p_value"].tolist())
    # Cards that moved most: the average over dimensions per dialogue, then per card, B - A.
    per = (both.groupby(["target_model", "_unit", "_card"])["score"].mean().rename("avg").reset_index())
    wide = per.pivot_table(index=["_unit", "_card"], columns="target_model", values="avg").dropna()
    moved = pd.DataFrame(columns=["language", "card_id", "n_pairs", "mean_a", "mean_b", "diff"])
    if {"A", "B"} <= set(wide.columns) and len(wide):
        g = wide.reset_index().groupby("_card").agg(n_pairs=("A", "size"), mean_a=("A", "mean"), mean_b=("B", "mean"))
        g["diff"] = (g["mean_b"] - g["mean_a"]) * TABLE_SCALE
        g[["mean_a", "mean_b"]] *= TABLE_SCALE
        g = g.reindex(g["diff"].abs().sort_values(ascending=False, kind="stable").index).head(top)
        g[["language", "card_id"]] = g.index.to_series().str.split("|", n=1, expand=True).to_numpy()
        moved = g.reset_index(drop=True)[["language", "card_id", "n_pairs", "mean_a", "mean_b", "diff"]]
    result = {
        "run_a": str(run_a), "run_b": str(run_b), "pair_by": pair_by, "pair_keys": keys, "scores": score_kind,
        "models_a": models_a, "models_b": models_b,
        "judges_a": sorted(a["judge"].dropna().unique()), "judges_b": sorted(b["judge"].dropna().unique()),
        "n_resamples": n_resamples, "seed": seed,
        "dimensions": json.loads(dims.to_json(orient="records")),
        "cards_moved": json.loads(moved.to_json(orient="records")),
        "windowed": said,
    }
    if humans is not None:
        from esc_eval.analysis.trust.human_leaderboard import compare_on_humans

        result["humans"] = compare_on_humans(a, b, humans, pair_by)
    return result


def _f(x: Any, nd: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.{nd}f}"


def _p(x: Any) -> str:
    return "-" if x is None or (isinstance(x, float) and np.isnan(x)) else (f"{x:.3g}" if x >= 1e-3 else "<0.001")


def comparison_markdown(result: dict[str, Any]) -> str:
    lines = [f"# {result['run_b']} vs {result['run_a']}", "",
             f"Paired by {result['pair_by']} ({', '.join(result['pair_keys'])}); models A {result['models_a']}, "
             f"B {result['models_b']}; judges A {result['judges_a']}, B {result['judges_b']}. Scores x25; "
             f"diff = B - A with a bootstrap 95% CI; p from a paired sign-flip permutation test "
             f"({result['n_resamples']} resamples), Holm-corrected over the rows.", "",
             *[f"Run {k.upper()}: {v}" for k, v in (result.get("windowed") or {}).items() if v], "",
             "| Dimension | pairs | A | B | B - A | 95% CI | p | p (Holm) |", "|---|---:|---:|---:|---:|---|---:|---:|"]
    for r in result["dimensions"]:
        title = DIMENSION_TITLES.get(r["dimension"], r["dimension"].capitalize())
        lines.append(f"| {title} | {r['n_pairs']} | {_f(r['mean_a'])} | {_f(r['mean_b'])} | {_f(r['diff'])} | "
                     f"[{_f(r['ci_lo'])}, {_f(r['ci_hi'])}] | {_p(r['p_value'])} | {_p(r['p_holm'])} |")
    lines += [f"\n> {title}: {r['note']}" for r in result["dimensions"] if r.get("note")
              for title in [DIMENSION_TITLES.get(r["dimension"], r["dimension"].capitalize())]]
    if result["cards_moved"]:
        lines += ["", "## Cards that moved most (average over dimensions)", "",
                  "| Language | Card | pairs | A | B | B - A |", "|---|---|---:|---:|---:|---:|"]
        for r in result["cards_moved"]:
            lines.append(f"| {r['language']} | {r['card_id']} | {r['n_pairs']} | {_f(r['mean_a'])} | "
                         f"{_f(r['mean_b'])} | {_f(r['diff'])} |")
    if result.get("humans"):
        from esc_eval.analysis.trust.human_leaderboard import compare_humans_markdown

        lines += ["", compare_humans_markdown(result["humans"])]
    return "\n".join(lines) + "\n"


def write_comparison(result: dict[str, Any], out: str | os.PathLike[str]) -> dict[str, Path]:
    with OutputFolder(out) as folder:
        md, js = folder / "compare.md", folder / "compare.json"
        md.write_text(comparison_markdown(result), encoding="utf-8")
        js.write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf-8")
        return folder.finals({"markdown": md, "json": js})


def default_compare_out(run_a: str, run_b: str) -> str:
    """Where a comparison goes by default: <RUN_B>/report/compare-<A> (RUN_B's folder for a score file)."""
    from esc_eval.sim.runs.storage import is_uri, join_location, location_name

    folder_b = run_b if is_uri(run_b) or Path(run_b).is_dir() else str(Path(run_b).parent)
    return join_location(folder_b, "report", f"compare-{location_name(run_a)}")


def compare_of_runs(run_a: str, run_b: str, out: str | None = None, *, humans: str | None = None,
                    study: str | None = None, allow_one_annotator: bool = False, **options: Any) -> dict[str, str]:
    """`esc-eval compare`: the human scores (--humans) read and checked first, compare_runs with `options`,
    compare.md/.json written into `out` (default <RUN_B>/report/compare-<A>), the Markdown shown on the
    terminal; the paths."""
    from esc_eval.analysis.trust.human_scores import read_humans
    from esc_eval.sim.console import console

    result = compare_runs(run_a, run_b, humans=read_humans(humans, study, allow_one_annotator), **options)
    paths = write_comparison(result, out or default_compare_out(run_a, run_b))
    console.print(comparison_markdown(result), markup=False, highlight=False)
    return {k: str(v) for k, v in paths.items()}
