"""The results viewer's web app: the page and a JSON API over a ResultsViewer, served by uvicorn
(the guard and the server: http_app.py). Bound to 127.0.0.1 by default.

    GET /                        the page
    GET /api/meta                runs, models, languages, categories, statuses, usage
    GET /api/dialogues?...       one page of rows (DialogueQuery)
    GET /api/dialogue?run=&id=   one dialogue: turns, mean scores, every judge's raw answer and P(0..4)
    GET /api/card?card_id=       the models with a dialogue on that card
    GET /api/side-by-side?card_id=&a=&b=[&language=]
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from pydantic import BaseModel, Field

from esc_eval.analysis.web.http_app import Server, is_loopback, json_app
from esc_eval.analysis.web.viewer import ResultsViewer, viewer_page


class DialogueQuery(BaseModel):
    """GET /api/dialogues: ResultsViewer.query's filters, sort and page."""

    model: str | None = Field(None, description="Only this target model.")
    language: str | None = Field(None, description="Only this language.")
    category: str | None = Field(None, description="Only this card category (any level).")
    status: str | None = Field(None, description="Only this status.")
    run: str | None = Field(None, description="Only this run (its label).")
    card_id: str | None = Field(None, description="Only this role card.")
    dimension: str = Field("average", alias="dim", description="The score min, max and sort=score read.")
    score_min: float | None = Field(None, alias="min", description="Lowest score (0-4).")
    score_max: float | None = Field(None, alias="max", description="Highest score (0-4).")
    q: str | None = Field(None, description="Text in the turns or the ids (case-insensitive).")
    sort: str = Field("card_id", description="Column to sort by.")
    descending: bool = Field(False, alias="desc", description="Sort descending.")
    offset: int = Field(0, description="First row of the page.")
    limit: int = Field(50, description="Rows in the page.")


def make_server(viewer: ResultsViewer, host: str = "127.0.0.1", port: int = 8765) -> Server:
    """A server bound to host:port (port 0 = any free port; read it from server.server_address)."""
    lock = threading.Lock()  # the viewer's pandas index is read-only after start-up, its search cache is not

    def locked(route: Callable[[dict[str, str]], Any]) -> Callable[[Any, dict[str, str]], Any]:
        def run(request: Any, p: dict[str, str]) -> Any:
            with lock:
                return route(p)
        return run

    routes = {
        "/api/meta": lambda p: viewer.meta(),
        "/api/dialogues": lambda p: viewer.query(**DialogueQuery.model_validate(p).model_dump()),
        "/api/dialogue": lambda p: viewer.dialogue(p.get("run", ""), p.get("id", "")),
        "/api/card": lambda p: {"card_id": p.get("card_id", ""), "models": viewer.card_models(p.get("card_id", ""))},
        "/api/side-by-side": lambda p: viewer.side_by_side(p.get("card_id", ""), p.get("a", ""), p.get("b", ""),
                                                           p.get("language")),
    }
    app = json_app(viewer_page, {path: locked(r) for path, r in routes.items()}, {}, loopback=is_loopback(host))
    return Server(app, host, port)


def serve_viewer(run_dirs: list[str], host: str = "127.0.0.1", port: int = 8765) -> None:
    """`esc-eval view`: the runs indexed, then the viewer served on host:port until Ctrl-C."""
    import time

    from esc_eval.analysis.web.http_app import serve_until_stopped
    from esc_eval.sim.console import console

    t0 = time.perf_counter()
    viewer = ResultsViewer(run_dirs)
    server = make_server(viewer, host, port)
    bound_host, bound_port = server.server_address[:2]
    console.print(f"{len(viewer.index)} dialogues from {len(run_dirs)} run(s) indexed in "
                  f"{time.perf_counter() - t0:.2f} s; serving http://{bound_host}:{bound_port}/ (Ctrl-C stops)")
    serve_until_stopped(server)
