"""`esc-eval compare RUN_A RUN_B`: two runs paired by dialogue or by card and seed."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from esc_eval.cli.common import Humans, OneAnnotator, ScoreKind, Study, Windowed, emit


def compare(
    run_a: Annotated[str, typer.Argument(help="Run A (the baseline): a run folder, a storage URI or official score JSON.")],
    run_b: Annotated[str, typer.Argument(help="Run B (compared with A: differences are B - A).")],
    out: Annotated[Optional[str], typer.Option("--out", "-o", help="Folder or storage URI for compare.md/.json (default <RUN_B>/report/compare-<A>).")] = None,
    pair_by: Annotated[str, typer.Option("--pair-by", help="auto | dialogue (same dialogues, two judges) | card (same card and seed).")] = "auto",
    model_a: Annotated[Optional[str], typer.Option("--model-a", help="Target model of run A when it holds several.")] = None,
    model_b: Annotated[Optional[str], typer.Option("--model-b", help="Target model of run B when it holds several.")] = None,
    judge_a: Annotated[Optional[str], typer.Option("--judge-a", help="Judge of run A when it holds several.")] = None,
    judge_b: Annotated[Optional[str], typer.Option("--judge-b", help="Judge of run B when it holds several.")] = None,
    n_resamples: Annotated[int, typer.Option("--n-resamples", help="Resamples for the CIs and the permutation test.")] = 5000,
    seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
    top: Annotated[int, typer.Option("--top", help="Cards listed among those that moved most.")] = 10,
    humans: Humans = None, study: Study = None, allow_one_annotator: OneAnnotator = False, scores: ScoreKind = "label",
    windowed: Windowed = "include",
) -> None:
    """Per-dimension B - A with bootstrap CIs and Holm-corrected p-values; the cards that moved most;
    with --humans each side's human-scale mean (PPI) and B - A on that scale."""
    from esc_eval.analysis.compare.runs import compare_of_runs

    if study is not None and humans is None:
        raise typer.BadParameter("--study needs --humans")
    emit(compare_of_runs(run_a, run_b, out, humans=humans, study=study, allow_one_annotator=allow_one_annotator,
                         pair_by=pair_by, model_a=model_a, model_b=model_b, judge_a=judge_a, judge_b=judge_b,
                         n_resamples=n_resamples, seed=seed, top=top, score_kind=scores, windowed=windowed))
