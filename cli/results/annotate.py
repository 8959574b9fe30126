"""`esc-eval annotate serve|study|list|export|import|sheets|agreement|tokens`: the paper's human
evaluation, in the browser or on CSV sheets (`sheets` writes them, `agreement` reads them back filled).

The store (SQLite, WAL) lives beside the first run folder unless --store names another file.
The CLI only parses and calls analysis/annotation_*; the one piece of glue it owns is checking an
exported table with train's own reader (analysis may not import train)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from esc_eval.cli.common import emit, local_out
from esc_eval.cli.results.view import serve_until_stopped

app = typer.Typer(no_args_is_help=True, help="Human evaluation of dialogues in the browser: studies, the annotating "
                                             "page, live agreement and judge-vs-human tables, export for train rank.")

Runs = Annotated[list[str], typer.Argument(help="Run folders or storage URIs whose dialogues are annotated (their "
                                                "dialogues/ and scores/ parts; the judges in scores/ are compared "
                                                "with the humans).")]
StoreOpt = Annotated[Optional[Path], typer.Option("--store", help="The annotation store (SQLite). Default: "
                                                  "<first run>/annotations/annotations.sqlite.")]
StudyOpt = Annotated[str, typer.Option("--study", "-s", help="Study name.")]


def _store(runs: list[str], store: Path | None, create: bool):
    """The store (SQLite, a local file): --store, or beside the first run folder when that is local."""
    from esc_eval.analysis.annotation.store import AnnotationStore, default_store_path
    from esc_eval.analysis.annotation.answers import AnnotationStoreError
    from esc_eval.sim.runs.storage import is_uri, local_path

    if store is None:
        if is_uri(runs[0]) or not local_path(runs[0]).is_dir():
            raise AnnotationStoreError(f"run folder {runs[0]} is not a local folder here; the store lives beside a "
                                       "local run folder, or give its file with --store")
        store = default_store_path(local_path(runs[0]))
    return AnnotationStore(store, create=create)


def _index(runs: list[str]):
    from esc_eval.analysis.web.viewer import ResultsViewer

    return ResultsViewer(runs).index


@app.command("serve")
def serve(
    runs: Runs,
    port: Annotated[int, typer.Option("--port", "-p", help="Port to listen on (0 = any free port).")] = 8766,
    host: Annotated[str, typer.Option("--host", help="Address to bind. Any non-loopback address makes every "
                                                     "annotator sign in with their token.")] = "127.0.0.1",
    store: StoreOpt = None,
) -> None:
    """Serve the annotating page and the live results (Ctrl-C stops; every answer is already saved)."""
    from esc_eval.analysis.web.annotation_server import make_annotation_server
    from esc_eval.analysis.web.annotation_service import AnnotationService
    from esc_eval.analysis.web.http_app import is_loopback
    from esc_eval.sim.driver.progress import console

    from esc_eval.analysis.web.viewer import ResultsViewer

    t0 = time.perf_counter()
    viewer = ResultsViewer(runs)  # the runs are checked before anything is written beside them
    st = _store(runs, store, create=True)
    service = AnnotationService(runs, st, require_tokens=not is_loopback(host), viewer=viewer)
    server = make_annotation_server(service, host, port)
    bound_host, bound_port = server.server_address[:2]
    studies = [s["study"] for s in st.studies()]
    console.print(f"{len(service.viewer.index)} dialogues from {len(runs)} run(s) in {time.perf_counter() - t0:.2f} s; "
                  f"store {st.path}; studies: {', '.join(studies) or 'none yet (create one on the page)'}")
    how = ("annotators open their token link (esc-eval annotate tokens)" if service.require_tokens
           else "annotators open ?annotator=NAME; without it: results and new studies")
    console.print(f"serving http://{bound_host}:{bound_port}/ ({how}; Ctrl-C stops)")
    serve_until_stopped(server)


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
    from esc_eval.analysis.annotation.answers import AnnotationStoreError
    from esc_eval.analysis.annotation.study import create_study, study_config

    ids = None
    if dialogues is not None:
        try:
            ids = [ln.strip() for ln in dialogues.read_text(encoding="utf-8").splitlines() if ln.strip()]
        except OSError as e:
            raise AnnotationStoreError(f"{dialogues}: cannot read ({e.strerror or e})") from None
        if not ids:
            raise AnnotationStoreError(f"{dialogues}: no dialogue id in the file")
    cfg = study_config({"name": name, "annotators": [a.strip() for a in annotators.split(",") if a.strip()],
                        "overlap": overlap, "sample": sample, "strata": [s.strip() for s in strata.split(",") if s.strip()],
                        "models": model or None, "languages": language or None, "dialogue_ids": ids, "seed": seed,
                        "safety": safety})
    index = _index(runs)
    st = _store(runs, store, create=True)
    out = create_study(st, index, cfg, runs=[str(r) for r in runs])
    emit({**out, "store": str(st.path), "note": "tokens are shown once (esc-eval annotate tokens makes new ones); "
                                                "on 127.0.0.1 annotators open ?annotator=NAME instead"})


@app.command("list")
def list_studies(runs: Runs, store: StoreOpt = None) -> None:
    """The store's studies with each annotator's progress."""
    st = _store(runs, store, create=False)
    emit({"store": str(st.path), "studies": [{**s, "progress": st.progress(s["study"])} for s in st.studies()]})


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
    import json

    from esc_eval.analysis.annotation.formats import annotation_table, label_config, labelstudio_export, write_table
    from esc_eval.analysis.annotation.answers import AnnotationStoreError

    if fmt not in ("table", "labelstudio", "labelstudio-min"):
        raise AnnotationStoreError(f"--format {fmt!r}: use table, labelstudio or labelstudio-min")
    st = _store(runs, store, create=False)
    st.study(study_name)
    if fmt == "table":
        from esc_eval.train.data.annotations import load_annotations
        from esc_eval.train.errors import TrainInputError

        table = annotation_table(st, study_name, _index(runs))
        path = write_table(table, out)
        try:
            rows = load_annotations(path)  # the reader `train rank` uses: what is written must read back
        except TrainInputError as e:
            path.unlink(missing_ok=True)
            raise AnnotationStoreError(f"the exported table does not read back for train rank ({e}); removed") from None
        emit({"study": study_name, "out": str(path), "rows": len(rows), "dialogues": int(table["dialogue_id"].nunique()),
              "annotators": sorted(table["annotator"].unique())})
        return
    from esc_eval.analysis.results.loaders import load_dialogues

    if out.suffix.lower() != ".json":
        raise AnnotationStoreError(f"{out}: Label Studio files are .json")
    tasks = labelstudio_export(st, study_name, load_dialogues(runs), minimal=fmt == "labelstudio-min")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(tasks, ensure_ascii=False, indent=1), encoding="utf-8")
    config = out.with_name(out.stem + ".label_config.xml")
    config.write_text(label_config(st.dimensions(study_name)), encoding="utf-8")
    emit({"study": study_name, "out": str(out), "format": fmt, "records": len(tasks), "label_config": str(config)})


@app.command("import")
def import_(
    runs: Runs,
    study_name: StudyOpt,
    source: Annotated[Path, typer.Option("--from", help="A Label Studio JSON or JSON_MIN export.")],
    store: StoreOpt = None,
) -> None:
    """Read Label Studio answers into a study (a new study is made from the file). All or nothing."""
    from esc_eval.analysis.annotation.formats import import_labelstudio

    index = _index(runs)
    st = _store(runs, store, create=True)
    emit(import_labelstudio(st, index, source, study_name, runs=[str(r) for r in runs]))


@app.command("sheets")
def sheets(
    run_dirs: Annotated[list[str], typer.Argument(help="Run folders or storage URIs (or folders of official score JSON).")],
    out: Annotated[Path, typer.Option("--out", "-o", callback=local_out, help="Folder for the sheets.")],
    annotators: Annotated[int, typer.Option("--annotators", help="Number of annotators (sheets a1..aN).")] = 2,
    seed: Annotated[int, typer.Option("--seed", help="Shuffle seed.")] = 0,
) -> None:
    """Annotation sheets (CSV, one per annotator) with the scoring rules of the paper's Table 16."""
    from esc_eval.analysis.annotation.sheets import export_annotation_sheets
    from esc_eval.analysis.results.loaders import load_dialogues

    paths = export_annotation_sheets(load_dialogues(run_dirs), out, annotators=annotators, seed=seed)
    emit({k: str(v) for k, v in paths.items()})


@app.command("agreement")
def agreement(
    sheets: Annotated[list[Path], typer.Argument(help="Filled sheets, or a folder of annotate_*.csv.")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", callback=local_out, help="Write agreement.md/.json here.")] = None,
) -> None:
    """Inter-annotator agreement: quadratic-weighted Cohen's kappa per pair, Krippendorff's alpha."""
    from esc_eval.analysis.annotation.agreement import sheet_agreement
    from esc_eval.analysis.annotation.sheets import import_annotations

    typer.echo(sheet_agreement(import_annotations(sheets[0] if len(sheets) == 1 and sheets[0].is_dir() else sheets), out))


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
    st = _store(runs, store, create=False)
    st.study(study_name)
    if admin:
        emit({"admin": st.reissue_token(None, None)})
        return
    emit({"study": study_name, "tokens": {a: st.reissue_token(study_name, a) for a in (annotator or st.annotators(study_name))},
          "link": "http://HOST:PORT/?study=" + study_name + "#token=TOKEN"})
