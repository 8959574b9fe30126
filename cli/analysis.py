"""Command functions of the analysis package, for the main `esc-eval` typer app to register.

Plain functions with typer annotations (no app here): e.g.
    from esc_eval.analysis import cli as acli
    app.command("report")(acli.report)
    analysis_app.command("judge-accuracy")(acli.judge_accuracy)
Each prints what it wrote (JSON) and raises AnalysisInputError (a ValueError) on bad input.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Callable, Optional

import typer

from esc_eval.cli.common import local_out

from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.sim.runs.open import OutputFolder
from esc_eval.sim.runs.storage import join_location

# Run folders and outputs are strings: a storage URI (s3://bucket/run) would lose a '/' as a Path.
RunDirs = Annotated[list[str], typer.Argument(help="Run folders or storage URIs (or folders of official score JSON).")]
Out = Annotated[Optional[str], typer.Option("--out", "-o", help="Output folder or storage URI (default <first run>/report).")]

app = typer.Typer(no_args_is_help=True, help="Analysis: model comparison, judge accuracy, annotation sheets and agreement, role-play fidelity.")


def _one_judge(scores, judge: Optional[str]):
    """The scores of one judge (--judge, or the only one there is) and the judges the runs hold."""
    judges = sorted(scores["judge"].dropna().unique())
    if judge is None and len(judges) > 1:
        raise AnalysisInputError(f"scores from several judges {judges}: pick one with --judge")
    return (scores[scores["judge"] == judge] if judge is not None else scores), judges


def _echo(obj) -> None:
    typer.echo(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


@app.command("compare")
def compare(
    run_dirs: RunDirs,
    model_a: Annotated[str, typer.Option("--a", help="First model (target_model as in the scores).")],
    model_b: Annotated[str, typer.Option("--b", help="Second model.")],
    dimension: Annotated[str, typer.Option("--dimension", help="A paper dimension name or 'average'.")] = "average",
    method: Annotated[str, typer.Option("--method", help="permutation | bootstrap (p-value).")] = "permutation",
    n_resamples: Annotated[int, typer.Option("--n-resamples", help="Resamples for the test and CI.")] = 10000,
    seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
) -> None:
    """Paired comparison of two models on shared role cards: A - B, 95% CI and p-value."""
    from esc_eval.analysis.compare.paired import paired_comparison
    from esc_eval.analysis.results.loaders import load_scores

    _echo(paired_comparison(load_scores(run_dirs), model_a, model_b, dimension, method, n_resamples, seed))


@app.command("judge-accuracy")
def judge_accuracy(
    pred: Annotated[list[str], typer.Argument(help="Run folders (or official score JSON) of the judge to check.")],
    human: Annotated[Path, typer.Option("--human", help="Filled annotation sheet(s): a CSV or a folder of annotate_*.csv.")],
    judge: Annotated[Optional[str], typer.Option("--judge", help="Judge id to check when the runs hold several.")] = None,
    out: Out = None,
) -> None:
    """Table 4: ACC and ACC_soft of a judge against human scores (mean over annotators, rounded)."""
    from esc_eval.analysis.annotation.sheets import import_annotations
    from esc_eval.analysis.trust.judge_accuracy import accuracy_markdown, judge_accuracy as _acc, write_accuracy
    from esc_eval.analysis.results.loaders import load_scores

    scores, judges = _one_judge(load_scores(pred, extra_dimensions=True), judge)  # safety has its own row
    name = judge or (judges[0] if judges else "judge")
    ref = import_annotations(human)
    # Several annotators: the reference is their mean, rounded half up (scores are integers).
    ref = (ref.groupby(["dialogue_id", "dimension"], as_index=False)["score"].mean()
           .assign(score=lambda d: (d["score"] + 0.5).apply(int).astype(float)))
    acc = _acc(scores, ref)
    typer.echo(accuracy_markdown(acc, name))
    paths = write_accuracy(acc, out or join_location(pred[0], "report"), judge=name)
    _echo({k: str(v) for k, v in paths.items()})


@app.command("annotate-export")
def annotate_export(
    run_dirs: RunDirs,
    out: Annotated[Path, typer.Option("--out", "-o", callback=local_out, help="Folder for the sheets.")],
    annotators: Annotated[int, typer.Option("--annotators", help="Number of annotators (sheets a1..aN).")] = 2,
    seed: Annotated[int, typer.Option("--seed", help="Shuffle seed.")] = 0,
) -> None:
    """Annotation sheets (CSV, one per annotator) with the scoring rules of the paper's Table 16."""
    from esc_eval.analysis.annotation.sheets import export_annotation_sheets
    from esc_eval.analysis.results.loaders import load_dialogues

    paths = export_annotation_sheets(load_dialogues(run_dirs), out, annotators=annotators, seed=seed)
    _echo({k: str(v) for k, v in paths.items()})


@app.command("annotate-agreement")
def annotate_agreement(
    sheets: Annotated[list[Path], typer.Argument(help="Filled sheets, or a folder of annotate_*.csv.")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", callback=local_out, help="Write agreement.md/.json here.")] = None,
) -> None:
    """Inter-annotator agreement: quadratic-weighted Cohen's kappa per pair, Krippendorff's alpha."""
    from esc_eval.analysis.annotation.sheets import import_annotations
    from esc_eval.analysis.annotation.agreement import agreement_markdown, agreement_summary, pairwise_kappa

    files = sheets[0] if len(sheets) == 1 and sheets[0].is_dir() else sheets
    ann = import_annotations(files)
    summary, pairs = agreement_summary(ann), pairwise_kappa(ann)
    md = agreement_markdown(summary, pairs)
    typer.echo(md)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "agreement.md").write_text("# Inter-annotator agreement\n\n" + md, encoding="utf-8")
        (out / "agreement.json").write_text(json.dumps({
            "summary": json.loads(summary.to_json(orient="records")),
            "pairs": json.loads(pairs.to_json(orient="records"))}, indent=2), encoding="utf-8")


@app.command("roleplay-fidelity")
def roleplay_fidelity(run_dirs: RunDirs) -> None:
    """Character breaks and emotional drift of the role model, per role model and language."""
    from esc_eval.analysis.results.loaders import load_dialogues
    from esc_eval.analysis.seekers.roleplay import fidelity_summary

    _echo(json.loads(fidelity_summary(load_dialogues(run_dirs)).to_json(orient="records")))


@app.command("fidelity")
def fidelity_cmd(
    run_dirs: RunDirs,
    humans: Annotated[str, typer.Option("--humans", help="Real help-seekers' dialogues in ESConv's format (ESConv.json, FailedESConv.json, or your own transcripts laid out so).")],
    judge: Annotated[Optional[str], typer.Option("--judge", "-j", help="Also rate the seeker's distress 0-4 at every seeker turn, people's and simulated alike, with this chat model (registry name or spec); checked against ESConv's survey.")] = None,
    judge_out: Annotated[Optional[str], typer.Option("--judge-out", help="Run folder for the judge's ratings (default <first run>/distress); re-running resumes.")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="Distress judge YAML (sim.jobs.distress.DistressConfig).")] = None,
    method: Annotated[Optional[str], typer.Option("--method", help="The judge's method: logprob | generate.")] = None,
    rounds: Annotated[int, typer.Option("--rounds", min=1, help="Aligned seeker turns per dialogue (the simulation's rounds).")] = 5,
    align: Annotated[str, typer.Option("--align", help="auto (first for runs cut at their round cap, relative where every seeker closed its dialogue) | relative (seeker turns spread from the first to the last) | first (the first --rounds).")] = "auto",
    n_boot: Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples for the intervals (0 = none).")] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
    out: Out = None,
) -> None:
    """Is the simulated seeker like a person? Its turns next to real help-seekers' per role model,
    strategy and language: distributions, distances with bootstrap intervals, directions, a fidelity figure."""
    import pandas as pd

    from esc_eval.analysis.results.loaders import load_dialogues
    from esc_eval.analysis.seekers.esconv import read_human_seekers
    from esc_eval.analysis.seekers.fidelity_features import ALIGNMENTS
    from esc_eval.analysis.seekers.fidelity_report import fidelity_markdown, seeker_fidelity, write_fidelity
    from esc_eval.sim.judging.distress_turns import seeker_runs

    if align not in ALIGNMENTS:
        raise AnalysisInputError(f"--align {align!r}: expected one of {', '.join(ALIGNMENTS)}")
    people = read_human_seekers(humans)  # every bad input stops here, before anything is written
    dialogues = load_dialogues(run_dirs)
    ok = dialogues[dialogues["status"] == "ok"] if not dialogues.empty else dialogues
    if ok.empty or not any(seeker_runs(t) for t in ok["turns"]):
        raise AnalysisInputError(f"{', '.join(run_dirs)}: no completed dialogue with a seeker turn")
    distress, judge_id = None, None
    if judge or config:
        from esc_eval.serve.config import load_config
        from esc_eval.sim.jobs.distress import DistressConfig, distress_ratings, run_distress
        from esc_eval.sim.pool.progress import job_progress

        cfg = load_config(config, DistressConfig, {"judge.model": judge, "method": method})
        keep = ["dialogue_id", "language", "role_model", "turns"]
        items = ok[keep].to_dict("records") + people.dialogues[keep].to_dict("records")
        target = judge_out or join_location(run_dirs[0], "distress")
        with job_progress("distress", unit="dialogues") as jp:
            run_distress(cfg, items, target, on_summary=jp.on_summary, on_start=jp.on_start)
        judge_id = cfg.judge_id
        distress = pd.DataFrame(distress_ratings(target, judge_id), columns=["dialogue_id", "seeker_turn", "rating"])
    result = seeker_fidelity(ok, people, rounds=rounds, align=align, n_boot=n_boot, seed=seed, distress=distress,
                             judge=judge_id)
    typer.echo(fidelity_markdown(result))
    _echo(write_fidelity(result, out or join_location(run_dirs[0], "report")))



def _write_outputs(out: str | Path, stem: str, markdown: str, data: dict,
                   extra: Optional[dict[str, Callable[[Path], None]]] = None) -> dict[str, str]:
    """<stem>.md and <stem>.json (and each `extra` file, written by its function) in a folder or a storage URI."""
    with OutputFolder(out) as folder:
        files = {"markdown": folder / f"{stem}.md", "json": folder / f"{stem}.json"}
        files["markdown"].write_text(markdown, encoding="utf-8")
        files["json"].write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
        for name, write in (extra or {}).items():
            files[name] = folder / name
            write(files[name])
        return {k: str(v) for k, v in folder.finals(files).items()}


def _records(df) -> list[dict]:
    return json.loads(df.to_json(orient="records"))


@app.command("correlate")
def correlate_cmd(
    pred: Annotated[list[str], typer.Argument(help="Run folders (or official score JSON) of the judge.")],
    human: Annotated[Path, typer.Option("--human", help="Filled annotation sheet(s): a CSV or a folder of annotate_*.csv.")],
    judge: Annotated[Optional[str], typer.Option("--judge", help="Judge id when the runs hold several.")] = None,
    metrics_csv: Annotated[Optional[Path], typer.Option("--metrics", help="Correlate these per-dialogue metric columns (e.g. text-metrics' per_dialogue.csv) instead of the judge's scores.")] = None,
    level: Annotated[str, typer.Option("--level", help="sample | dataset | both.")] = "both",
    pairing: Annotated[str, typer.Option("--pairing", help="matched (judge dimension vs the same human dimension, Table 3) | cross (every metric vs every dimension, Tables 13-15).")] = "matched",
    n_boot: Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples for the CIs of r (0 = none).")] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
    out: Out = None,
) -> None:
    """Tables 3, 13-15: Spearman, Pearson and Kendall of judge (or metric) vs human scores, with CIs."""
    import pandas as pd

    from esc_eval.analysis.trust.correlation import scores_wide
    from esc_eval.analysis.trust.correlation_ci import correlation_ci_markdown, correlations_with_ci, load_human
    from esc_eval.analysis.results.loaders import load_scores

    levels = {"both": ["sample", "dataset"], "sample": ["sample"], "dataset": ["dataset"]}.get(level)
    if levels is None:
        raise AnalysisInputError(f"--level must be sample, dataset or both, got {level!r}")
    scores, judges = _one_judge(load_scores(pred, extra_dimensions=True), judge)  # safety has its own row
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
    md = correlation_ci_markdown(table)
    typer.echo(md)
    _echo(_write_outputs(out or join_location(pred[0], "report"), "correlations", "# Judge vs human correlations\n\n" + md,
                         {"judge": judge or (judges[0] if judges else None), "n_boot": n_boot, "rows": _records(table)}))


@app.command("text-metrics")
def text_metrics_cmd(
    run_dirs: RunDirs,
    references: Annotated[Path, typer.Option("--references", help="JSON {dialogue or card id: [reference replies in turn order]} (e.g. ESConv supporter replies of each card's source dialogue).")],
    out: Out = None,
) -> None:
    """BLEU-1/2/4, Distinct-1/2, ROUGE-L and METEOR of the assistants' replies against references."""
    from esc_eval.analysis.results.loaders import load_dialogues
    from esc_eval.analysis.textmetrics.runs import load_references, run_text_metrics, text_metrics_markdown

    per, corpus = run_text_metrics(load_dialogues(run_dirs), load_references(references))
    md = text_metrics_markdown(corpus)
    typer.echo(md)
    paths = _write_outputs(out or join_location(run_dirs[0], "report"), "text_metrics",
                           "# Text metrics against references\n\n" + md, {"corpus": _records(corpus)},
                           extra={"text_metrics_per_dialogue.csv": lambda p: per.to_csv(p, index=False)})
    _echo({"markdown": paths["markdown"], "json": paths["json"], "per_dialogue": paths["text_metrics_per_dialogue.csv"]})


@app.command("roleplay-export")
def roleplay_export(
    run_dirs: RunDirs,
    role_a: Annotated[str, typer.Option("--role-a", help="First role model (role_model as in the dialogues).")],
    role_b: Annotated[str, typer.Option("--role-b", help="Second role model.")],
    out: Annotated[Path, typer.Option("--out", "-o", callback=local_out, help="Folder for roleplay_pairs.csv and its key.")],
    target: Annotated[Optional[str], typer.Option("--target", help="Only dialogues with this target model.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the shown order of each pair.")] = 0,
) -> None:
    """Pairwise sheet for Table 1 (six 0-2 ratings per dialogue) and Figure 3 (which is more human-like)."""
    from esc_eval.analysis.results.loaders import load_dialogues
    from esc_eval.analysis.seekers.roleplay_sheets import export_pairwise_sheets

    paths = export_pairwise_sheets(load_dialogues(run_dirs), role_a, role_b, out, seed=seed, target=target)
    _echo({k: str(v) for k, v in paths.items()})


@app.command("roleplay-import")
def roleplay_import(
    sheets: Annotated[list[Path], typer.Argument(help="Filled roleplay_pairs.csv sheets (one per annotator).")],
    key: Annotated[Path, typer.Option("--key", help="roleplay_pairs_key.csv written with the sheet.")],
    out: Annotated[Path, typer.Option("--out", "-o", callback=local_out, help="Folder for roleplay.md/.json and the Figure 3 plot.")],
) -> None:
    """Table 1 (role-play metrics, 0-10) and Figure 3 (win / tie / loss with Wilson 95% CIs) from filled sheets."""
    from esc_eval.analysis.seekers.roleplay import roleplay_markdown, roleplay_table
    from esc_eval.analysis.seekers.roleplay_sheets import import_pairwise_sheets, win_rate_markdown, win_rates_with_ci

    judgments, comparisons = import_pairwise_sheets(sheets, key)
    parts, data = [], {}
    if not judgments.empty:
        t1 = roleplay_table(judgments)
        parts.append("## Table 1: role-play metrics\n\n" + roleplay_markdown(t1))
        data["table1"] = _records(t1)
    if not comparisons.empty:
        rates = win_rates_with_ci(comparisons)
        parts.append("## Figure 3: which dialogue is more human-like\n\n" + win_rate_markdown(rates))
        data["win_rates"] = _records(rates)
        from esc_eval.analysis.figures.plots import win_rate_plot

        data["figure3"] = str(win_rate_plot(rates, out / "figure3_win_rates.png"))
    if not parts:
        raise AnalysisInputError("the sheets hold no filled cell")
    md = "\n".join(parts)
    typer.echo(md)
    _echo(_write_outputs(out, "roleplay", "# Role-play evaluation\n\n" + md, data))


@app.command("judge-agreement")
def judge_agreement_cmd(
    dialogues: Annotated[Path, typer.Option("--dialogues", help="Released dialogues (official dialogue JSON: a file or folder).")],
    scores: Annotated[Path, typer.Option("--scores", help="Released ESC-RANK scores (official score JSON: a file or folder).")],
    judge: Annotated[str, typer.Option("--judge", "-j", help="The judge to check (registry name or spec).")],
    out: Annotated[Optional[str], typer.Option("--out", "-o", help="Run folder or storage URI for the judge's scores (default <dialogues>-scored); resumable.")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="Scoring YAML (sim.jobs.config.ScoringConfig).")] = None,
    method: Annotated[Optional[str], typer.Option("--method", help="logprob | generate.")] = None,
    rubric: Annotated[Optional[str], typer.Option("--rubric", help="official (score.py) | paper.")] = None,
    n_boot: Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples for the CIs (0 = none).")] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
) -> None:
    """Score the released dialogues with a judge and compare with the released ESC-RANK scores per
    dimension: exact agreement, within one, Spearman, weighted kappa, each with a bootstrap CI."""
    from esc_eval.analysis.trust.judge_agreement import agreement_table_markdown, judge_agreement
    from esc_eval.analysis.results.loaders import load_official_scores, load_scores
    from esc_eval.cli.score import load_score_config
    from esc_eval.sim.pool.progress import console, job_progress
    from esc_eval.sim.jobs.scoring import run_scoring

    if not scores.exists():
        raise AnalysisInputError(f"{scores}: no such official score file or folder")
    reference = load_official_scores(scores)  # read first: a bad reference fails before any scoring
    cfg = load_score_config(config, judge, method, None, rubric, None)
    with job_progress("judge-agreement", unit="dialogues") as jp:
        scored = run_scoring(cfg, dialogues, out, on_summary=jp.on_summary, on_start=jp.on_start)
    pred = load_scores([scored["run_dir"]])
    pred = pred[pred["judge"] == cfg.judge.judge_id]
    result = judge_agreement(pred, reference, n_boot=n_boot, seed=seed)
    console.print(agreement_table_markdown(result))
    _echo({"judge": cfg.judge.judge_id, "run_dir": scored["run_dir"], "reference": str(scores), **result})


@app.command("calibration")
def calibration_cmd(
    run_dirs: RunDirs,
    humans: Annotated[str, typer.Option("--humans", help="Human scores: an annotate store (annotations.sqlite, or a run folder holding one), filled annotation sheets (a folder of annotate_*.csv or a CSV) or annotate export's table.")],
    study: Annotated[Optional[str], typer.Option("--study", help="Only this study of the annotate store.")] = None,
    judge: Annotated[Optional[list[str]], typer.Option("--judge", help="Judge(s) to calibrate (default: every judge that gave P(0..4)).")] = None,
    dimension: Annotated[Optional[list[str]], typer.Option("--dimension", help="Dimension(s) to calibrate (default: all the judge scored).")] = None,
    method: Annotated[str, typer.Option("--method", help="temperature | isotonic (one-vs-rest, per label).")] = "temperature",
    folds: Annotated[int, typer.Option("--folds", help="Cross-fitting folds (by dialogue): every recalibrated figure is held out.")] = 5,
    write: Annotated[bool, typer.Option("--write/--no-write", help="Write the recalibrated judge's score rows into the runs.")] = True,
    allow_one_annotator: Annotated[bool, typer.Option("--allow-one-annotator", help="Accept human scores that all come from one annotator.")] = False,
    n_boot: Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples for the CIs (0 = none).")] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the folds and the bootstrap.")] = 0,
    out: Out = None,
) -> None:
    """Reliability, ECE and Brier of each judge's P(0..4) against human scores, with CIs; a recalibration
    (temperature or isotonic per dimension) checked on held-out dialogues and written as judge
    `<judge>+cal:<method>` without calling the judge again."""
    from esc_eval.analysis.trust.calibration_runs import (
        calibrate, calibration_markdown, reliability_figure, write_calibrated_rows,
    )
    from esc_eval.analysis.trust.human_scores import load_human_scores
    from esc_eval.analysis.results.loaders import load_scores
    from esc_eval.sim.judging.dimensions import to_paper_dimension

    try:
        dims = [to_paper_dimension(d) for d in dimension] if dimension else None
    except ValueError as e:
        raise AnalysisInputError(f"--dimension: {e}") from None
    human = load_human_scores(humans, study=study, allow_one_annotator=allow_one_annotator)
    scores = load_scores(run_dirs)
    # Everything is computed (and every bad input refused) before anything is written.
    result = calibrate(scores, human, method=method, judges=judge, dimensions=dims, folds=folds, n_boot=n_boot,
                       seed=seed)
    md = "# Judge calibration against human scores\n\n" + calibration_markdown(result)
    typer.echo(md)
    figures = {f"calibration_{''.join(c if c.isalnum() else '_' for c in j)}.png": j for j in result.table["judge"].unique()}
    data = {"method": method, "folds": folds, "humans": human.source, "n_boot": n_boot,
            "rows": _records(result.table), "reliability": _records(result.bins)}
    paths = _write_outputs(out or join_location(run_dirs[0], "report"), "calibration", md, data,
                           extra={name: (lambda p, j=j: reliability_figure(result, j, p)) for name, j in figures.items()})
    if write:
        paths["rows_written"] = write_calibrated_rows(result)
        paths["judges_written"] = sorted(result.table["calibrated_judge"].unique())
    _echo(paths)
