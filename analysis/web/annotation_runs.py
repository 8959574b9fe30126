"""The human evaluation over run folders, as `esc-eval annotate` runs it once its options are parsed:
the store beside the first run folder (or the file --store names), the annotating page served until
Ctrl-C, studies made over the runs' dialogues, their answers exported (a table that `train rank` reads,
checked with the reader the caller passes in, since analysis may not import train; or Label Studio's
JSON) and imported, tokens reissued. Each returns what the command prints as JSON."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from esc_eval.analysis.annotation.answers import AnnotationStoreError
from esc_eval.analysis.annotation.store import AnnotationStore


def store_for(runs: list[str], store: Path | None, create: bool) -> AnnotationStore:
    """The store (SQLite, a local file): `store`, or beside the first run folder when that is local."""
    from esc_eval.analysis.annotation.store import default_store_path
    from esc_eval.sim.runs.storage import is_uri, local_path

    if store is None:
        if is_uri(runs[0]) or not local_path(runs[0]).is_dir():
            raise AnnotationStoreError(f"run folder {runs[0]} is not a local folder here; the store lives beside a "
                                       "local run folder, or give its file with --store")
        store = default_store_path(local_path(runs[0]))
    return AnnotationStore(store, create=create)


def dialogue_index(runs: list[str]):
    """The runs' dialogues as the viewer indexes them (the runs are checked before anything is written)."""
    from esc_eval.analysis.web.viewer import ResultsViewer

    return ResultsViewer(runs).index


def serve_annotation(runs: list[str], host: str = "127.0.0.1", port: int = 8766, store: Path | None = None) -> None:
    """`esc-eval annotate serve`: the annotating page and the live results, until Ctrl-C (every answer is
    saved as it comes); any non-loopback host makes every annotator sign in with a token."""
    from esc_eval.analysis.web.annotation_server import make_annotation_server
    from esc_eval.analysis.web.annotation_service import AnnotationService
    from esc_eval.analysis.web.http_app import is_loopback, serve_until_stopped
    from esc_eval.analysis.web.viewer import ResultsViewer
    from esc_eval.sim.console import console

    t0 = time.perf_counter()
    viewer = ResultsViewer(runs)  # the runs are checked before anything is written beside them
    st = store_for(runs, store, create=True)
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


def create_study_of_runs(runs: list[str], name: str, annotators: str, overlap: int = 2, sample: int | None = None,
                         strata: str = "target_model,language,category_1", models: list[str] | None = None,
                         languages: list[str] | None = None, dialogues: Path | None = None, seed: int = 0,
                         safety: bool = False, store: Path | None = None) -> dict[str, Any]:
    """`esc-eval annotate study`: a study over the runs' dialogues (annotators and strata comma-separated;
    `dialogues`: a file of dialogue ids, one a line), sampled, assigned and shuffled; each annotator's token
    in the result, once."""
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
                        "models": models or None, "languages": languages or None, "dialogue_ids": ids, "seed": seed,
                        "safety": safety})
    index = dialogue_index(runs)
    st = store_for(runs, store, create=True)
    out = create_study(st, index, cfg, runs=[str(r) for r in runs])
    return {**out, "store": str(st.path), "note": "tokens are shown once (esc-eval annotate tokens makes new ones); "
                                                  "on 127.0.0.1 annotators open ?annotator=NAME instead"}


def list_studies(runs: list[str], store: Path | None = None) -> dict[str, Any]:
    """`esc-eval annotate list`: the store's studies with each annotator's progress."""
    st = store_for(runs, store, create=False)
    return {"store": str(st.path), "studies": [{**s, "progress": st.progress(s["study"])} for s in st.studies()]}


EXPORT_FORMATS = ("table", "labelstudio", "labelstudio-min")


def export_study(runs: list[str], study_name: str, out: Path, read_back: Callable[[Path], list], fmt: str = "table",
                 store: Path | None = None) -> dict[str, Any]:
    """`esc-eval annotate export`: a study's answers as the table `train rank` reads (.csv/.parquet/.json/
    .jsonl; read back with `read_back`, train's own reader, which raises a ValueError on a table it refuses:
    then the file is removed) or as Label Studio's JSON (.json, with its labelling config beside it)."""
    from esc_eval.analysis.annotation.formats import annotation_table, label_config, labelstudio_export, write_table

    if fmt not in EXPORT_FORMATS:
        raise AnnotationStoreError(f"--format {fmt!r}: use table, labelstudio or labelstudio-min")
    st = store_for(runs, store, create=False)
    st.study(study_name)
    if fmt == "table":
        table = annotation_table(st, study_name, dialogue_index(runs))
        path = write_table(table, out)
        try:
            rows = read_back(path)  # the reader `train rank` uses: what is written must read back
        except ValueError as e:
            path.unlink(missing_ok=True)
            raise AnnotationStoreError(f"the exported table does not read back for train rank ({e}); removed") from None
        return {"study": study_name, "out": str(path), "rows": len(rows), "dialogues": int(table["dialogue_id"].nunique()),
                "annotators": sorted(table["annotator"].unique())}
    from esc_eval.analysis.results.loaders import load_dialogues

    if out.suffix.lower() != ".json":
        raise AnnotationStoreError(f"{out}: Label Studio files are .json")
    tasks = labelstudio_export(st, study_name, load_dialogues(runs), minimal=fmt == "labelstudio-min")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(tasks, ensure_ascii=False, indent=1), encoding="utf-8")
    config = out.with_name(out.stem + ".label_config.xml")
    config.write_text(label_config(st.dimensions(study_name)), encoding="utf-8")
    return {"study": study_name, "out": str(out), "format": fmt, "records": len(tasks), "label_config": str(config)}


def import_study(runs: list[str], study_name: str, source: Path, store: Path | None = None) -> dict[str, Any]:
    """`esc-eval annotate import`: Label Studio answers read into a study (a new study made from the
    file), all or nothing."""
    from esc_eval.analysis.annotation.formats import import_labelstudio

    index = dialogue_index(runs)
    st = store_for(runs, store, create=True)
    return import_labelstudio(st, index, source, study_name, runs=[str(r) for r in runs])


def reissue_tokens(runs: list[str], study_name: str, annotators: list[str] | None = None, admin: bool = False,
                   store: Path | None = None) -> dict[str, Any]:
    """`esc-eval annotate tokens`: new tokens (the old ones stop working): the annotators' (default: all
    of the study), or the organiser's admin token."""
    st = store_for(runs, store, create=False)
    st.study(study_name)
    if admin:
        return {"admin": st.reissue_token(None, None)}
    return {"study": study_name, "tokens": {a: st.reissue_token(study_name, a) for a in (annotators or st.annotators(study_name))},
            "link": "http://HOST:PORT/?study=" + study_name + "#token=TOKEN"}


__all__ = ["EXPORT_FORMATS", "create_study_of_runs", "dialogue_index", "export_study", "import_study", "list_studies",
           "reissue_tokens", "serve_annotation", "store_for"]
