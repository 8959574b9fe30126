"""analysis.web: the two browser apps. The results viewer (`viewer.py`: a run's rows as JSON for
the page, `viewer.html`) and the human-evaluation app (`annotation_service.py`: studies, identities
and answers; `annotation_results.py`: a study's live agreement and judge accuracy;
`annotate.html`), each a Starlette app served by uvicorn (`viewer_server.py`, `annotation_server.py`)
on what they share (`http_app.py`: the Host, origin and JSON-only guard, errors as JSON, the server).

Layer: above trust, annotation and results; only bench imports it. Loaded on first use of a name."""
import importlib

_NAMES = {"ResultsViewer": "viewer", "make_server": "viewer_server", "AnnotationService": "annotation_service",
          "make_annotation_server": "annotation_server", "live_results": "annotation_results"}


def __getattr__(name: str):
    if name in _NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(_NAMES)
