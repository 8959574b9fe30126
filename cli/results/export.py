"""`esc-eval export RUN --official DIR`: a run's dialogues and scores in the release's JSON layout.

DIR/dialogues/{model}_{lang}.json  {"<card>": ["AI assistant：...", "ESC-Role：...", ...]}
DIR/scores/{model}_{lang}.json     {"<card>": {"fluency": 3, "diversity": 2, ...}} (-1 = unparsed)

`esc-eval score --input DIR/dialogues` reads the dialogues back turn for turn; `esc-eval report
DIR/scores` reads the scores.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from esc_eval.cli.common import emit


def export(
    run_dir: Annotated[str, typer.Argument(help="Run folder (or storage URI) to export.")],
    official: Annotated[Path, typer.Option("--official", help="Output folder: dialogues/ and scores/ in the release's JSON layout.")],
    judge: Annotated[Optional[str], typer.Option("--judge", help="Judge whose scores are exported when the run holds several.")] = None,
    include_failed: Annotated[bool, typer.Option("--include-failed", help="Also export failed dialogues (their turns so far).")] = False,
) -> None:
    """Our dialogues and scores as the release's JSON (one file per model and language)."""
    from esc_eval.sim.runs.official import export_run_official

    emit(export_run_official(run_dir, official, judge, include_failed))
