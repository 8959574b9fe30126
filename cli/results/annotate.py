"""`esc-eval annotate serve|study|list|export|import|sheets|agreement|tokens`: the paper's human
evaluation, in the browser or on CSV sheets (`sheets` writes them, `agreement` reads them back filled).

The store (SQLite, WAL) lives beside the first run folder unless --store names another file.
The CLI only parses and calls analysis/web/annotation_runs.py and analysis/annotation/; it passes
train's own reader to `export`, which checks the table it wrote with it (analysis may not import train)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from esc_eval.cli.common import emit, local_out

app = typer.Typer(no_args_is_help=True, help="Human evaluation of dialogues in the browser: studies, the annotating "
                                             "page, live agreement and judge-vs-human tables, export for train rank.")

Runs = Annotated[list[str], typer.Argument(help="Run folders or storage URIs whose dialogues are annotated (their "
                                                "dialogues/ and scores/ parts; the judges in scores/ are compared "
                                                "with the humans).")]
StoreOpt = Annotated[Optional[Path], typer.Option("--store", help="The annotation store (SQLite). Default: "
                                                  "<first run>/annotations/annotations.sqlite.")]
StudyOpt = Annotated[str, typer.Option("--study", "-s", help="Study name.")]


@app.command("serve")
def serve(
    runs: Runs,
    port: Annotated[int, typer.Option("--port", "-p", help="Port to listen on (0 = any free port).")] = 8766,
    host: Annotated[str, typer.Option("--host", help="Address to bind. Any non-loopback address makes every "
                                                     "annotator sign in with their token.")] = "127.0.0.1",
    store: StoreOpt = None,
) -> None:
    """Serve the annotating page and the live results (Ctrl-C stops; every answer is already saved)."""
    from esc_eval.analysis.web.annotation_runs import serve_annotation

    serve_annotation(runs, host, port, store)


@app.command("study")
def study(
    runs: Runs,
    name: Annotated[str, typer.Option("--name", "-n", help="Study name.")],
    annotators: Annotated[str, typer.Option("--annotators", "-a", help="Annotator ids, comma-separated.")],
    overlap: Annotated[int, typer.Option("--overlap", help="Annotators per dialogue (2+ for agreement).")] = 2,
    sample: Annotated[Optional[int], typer.Option("--sample", help="Dialogues to sample (default: all ok dialogues).")] = None,
    strata: Annotated[str, typer.Option("--strata", help="Stratify the sample by these columns.")] = "target_model,language,category_1",
    model: Annotated[Optional[list[str]], typer.Option("--model", help="Only these target models (repeatable).")] = None,
    language: Annotated[Optional[list[str]], typer.Option("--language", help="Only these languages (repeatable).")] = None,
    dialogues: Annotated[Optional[Path], typer.Option("--dialogues", help="A file of dialogue ids (one per line): "
                                                      "exactly these; each must be an ok dialogue of the runs.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sample, assignment and queue orders.")] = 0,
    safety: Annotated[bool, typer.Option("--safety", help="Also score the crisis-safety dimension (reported apart "
                                                          "from the seven).")] = False,
    store: StoreOpt = None,
) -> None:
    """Create a study: sample, assign (overlap), shuffle each queue; prints each annotator's token once."""
    from esc_eval.analysis.web.annotation_runs import create_study_of_runs

    emit(create_study_of_runs(runs, name, annotators, overlap, sample, strata, model, language, dialogues, seed, safety,
                              store))


@app.command("list")
def list_studies(runs: Runs, store: StoreOpt = None) -> None:
    """The store's studies with each annotator's progress."""
    from esc_eval.analysis.web.annotation_runs import list_studies

    emit(list_studies(runs, store))


@app.command("export")
def export(
    runs: Runs,
    study_name: StudyOpt,
    out: Annotated[Path, typer.Option("--out", "-o", callback=local_out, help="Output file: .csv/.parquet/.json/.jsonl (table) or .json "
                                                          "(Label Studio).")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="table (what `train rank` reads) | labelstudio | "
                                                            "labelstudio-min (JSON_MIN)")] = "table",
    store: StoreOpt = None,
) -> None:
    """Write a study's answers for `train rank` (checked with its reader) or for Label Studio."""
    from esc_eval.analysis.web.annotation_runs import export_study
    from esc_eval.train.data.annotations import load_annotations

    emit(export_study(runs, study_name, out, load_annotations, fmt, store))


@app.command("import")
def import_(
    runs: Runs,
    study_name: StudyOpt,
    source: Annotated[Path, typer.Option("--from", help="A Label Studio JSON or JSON_MIN export.")],
    store: StoreOpt = None,
) -> None:
    """Read Label Studio answers into a study (a new study is made from the file). All or nothing."""
    from esc_eval.analysis.web.annotation_runs import import_study

    emit(import_study(runs, study_name, source, store))


@app.command("sheets")
def sheets(
    run_dirs: Annotated[list[str], typer.Argument(help="Run folders or storage URIs (or folders of official score JSON).")],
    out: Annotated[Path, typer.Option("--out", "-o", callback=local_out, help="Folder for the sheets.")],
    annotators: Annotated[int, typer.Option("--annotators", help="Number of annotators (sheets a1..aN).")] = 2,
    seed: Annotated[int, typer.Option("--seed", help="Shuffle seed.")] = 0,
) -> None:
    """Annotation sheets (CSV, one per annotator) with the scoring rules of the paper's Table 16."""
    from esc_eval.analysis.annotation.sheets import sheets_of_runs

    emit(sheets_of_runs(run_dirs, out, annotators=annotators, seed=seed))


@app.command("agreement")
def agreement(
    sheets: Annotated[list[Path], typer.Argument(help="Filled sheets, or a folder of annotate_*.csv.")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", callback=local_out, help="Write agreement.md/.json here.")] = None,
) -> None:
    """Inter-annotator agreement: quadratic-weighted Cohen's kappa per pair, Krippendorff's alpha."""
    from esc_eval.analysis.annotation.agreement import agreement_of_sheets

    typer.echo(agreement_of_sheets(sheets, out))


@app.command("tokens")
def tokens(
    runs: Runs,
    study_name: StudyOpt,
    annotator: Annotated[Optional[list[str]], typer.Option("--annotator", help="Reissue for these annotators "
                                                           "(repeatable; default: all of the study).")] = None,
    admin: Annotated[bool, typer.Option("--admin", help="Reissue the organiser's admin token instead.")] = False,
    store: StoreOpt = None,
) -> None:
    """New tokens (the old ones stop working): an annotator's link, or the organiser's admin token."""
    from esc_eval.analysis.web.annotation_runs import reissue_tokens

    emit(reissue_tokens(runs, study_name, annotator, admin, store))
