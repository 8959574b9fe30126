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


def export_official(run_dir: str | Path, out: Path, judge: Optional[str] = None, include_failed: bool = False) -> dict:
    from esc_eval.sim.runs.official import official_keys, write_official_dialogues, write_official_scores
    from esc_eval.sim.runs.runfolder import RunFolder
    from esc_eval.sim.runs.storage import RunFolderError

    try:
        run = RunFolder(run_dir, create=False)
    except RunFolderError as e:
        raise FileNotFoundError(str(e)) from None
    if not run.parts("dialogues"):
        raise FileNotFoundError(f"{run}: no dialogues/part-*.parquet (not a run folder?)")
    latest: dict[str, dict] = {}
    # The latest row of a dialogue wins, an ok row over a failed one (a re-run rewrites it).
    for r in run.iter_rows("dialogues"):
        prev = latest.get(r["dialogue_id"])
        rank = (r["status"] == "ok", r["finished_at"] or 0)
        if prev is None or rank >= (prev["status"] == "ok", prev["finished_at"] or 0):
            latest[r["dialogue_id"]] = r
    dialogues = [r for r in latest.values() if include_failed or r["status"] == "ok"]
    skipped = len(latest) - len(dialogues)
    keys = official_keys(dialogues)
    files = write_official_dialogues(dialogues, out / "dialogues", keys)
    cols = ["dialogue_id", "dimension", "score", "judge", "scored_at"]
    scores = list(run.iter_rows("scores", columns=cols)) if run.parts("scores") else []
    judges = sorted({s["judge"] for s in scores})
    if judge is None and len(judges) > 1:
        raise ValueError(f"{run}: scores from several judges {judges}: pick one with --judge")
    if judge is not None and judge not in judges:
        raise ValueError(f"--judge {judge!r}: no such judge in {run} (has {judges})")
    score_files = []
    if scores:
        chosen = judge or judges[0]
        # write_official_scores keeps the last row per key: feed rows oldest first.
        rows = sorted((s for s in scores if s["judge"] == chosen and s["dialogue_id"] in keys),
                      key=lambda s: str(s["scored_at"]))
        keyed = [{**d, "card_id": keys[d["dialogue_id"]]} for d in dialogues]
        score_files = write_official_scores(rows, keyed, out / "scores")
    return {"dialogues": [str(p) for p in files], "scores": [str(p) for p in score_files],
            "n_dialogues": len(dialogues), "skipped_failed": skipped, "judge": judge or (judges[0] if judges else None)}


def export(
    run_dir: Annotated[str, typer.Argument(help="Run folder (or storage URI) to export.")],
    official: Annotated[Path, typer.Option("--official", help="Output folder: dialogues/ and scores/ in the release's JSON layout.")],
    judge: Annotated[Optional[str], typer.Option("--judge", help="Judge whose scores are exported when the run holds several.")] = None,
    include_failed: Annotated[bool, typer.Option("--include-failed", help="Also export failed dialogues (their turns so far).")] = False,
) -> None:
    """Our dialogues and scores as the release's JSON (one file per model and language)."""
    emit(export_official(run_dir, official, judge, include_failed))
