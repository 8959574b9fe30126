"""analysis.web: the two browser apps. The results viewer (`viewer.py`: a run's rows as JSON for
the page, `viewer.html`) and the human-evaluation app (`annotation_service.py`: studies, identities
and answers; `annotation_results.py`: a study's live agreement and judge accuracy;
`annotate.html`), each a Starlette app served by uvicorn (`viewer_server.py`, `annotation_server.py`)
on what they share (`http_app.py`: the Host, origin and JSON-only guard, errors as JSON, the server).

Layer: above trust, annotation and results; only bench imports it. Running the apps over run folders as
`esc-eval view` and `esc-eval annotate` do: serve_viewer (viewer_server.py) and annotation_runs.py."""
from esc_eval.analysis.web.annotation_results import live_results
from esc_eval.analysis.web.annotation_runs import (create_study_of_runs, export_study, import_study, list_studies,
                                                   reissue_tokens, serve_annotation, store_for)
from esc_eval.analysis.web.annotation_server import make_annotation_server
from esc_eval.analysis.web.annotation_service import AnnotationService
from esc_eval.analysis.web.http_app import serve_until_stopped
from esc_eval.analysis.web.viewer import ResultsViewer
from esc_eval.analysis.web.viewer_server import make_server, serve_viewer

__all__ = ["AnnotationService", "ResultsViewer", "create_study_of_runs", "export_study", "import_study", "list_studies",
           "live_results", "make_annotation_server", "make_server", "reissue_tokens", "serve_annotation",
           "serve_until_stopped", "serve_viewer", "store_for"]
