"""The results viewer's HTTP server: the static page and a JSON API over a ResultsViewer.

Standard library only (http.server): the viewer is a local tool bound to 127.0.0.1 by default.

    GET /                        the page
    GET /api/meta                runs, models, languages, categories, statuses, usage
    GET /api/dialogues?...       one page of rows: model, language, category, status, run, card_id,
                                 dim, min, max, q, sort, desc, offset, limit
    GET /api/dialogue?run=&id=   one dialogue: turns, mean scores, every judge's raw answer and P(0..4)
    GET /api/card?card_id=       the models with a dialogue on that card
    GET /api/side-by-side?card_id=&a=&b=[&language=]
"""
from __future__ import annotations

import json
import logging
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlparse

from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.web.viewer import ResultsViewer, viewer_page

log = logging.getLogger(__name__)


def _float(params: dict[str, str], key: str) -> float | None:
    value = params.get(key, "").strip()
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        raise AnalysisInputError(f"{key}: not a number: {value!r}") from None


def _int(params: dict[str, str], key: str, default: int) -> int:
    value = params.get(key, "").strip()
    try:
        return int(value) if value else default
    except ValueError:
        raise AnalysisInputError(f"{key}: not an integer: {value!r}") from None


class JSONRequestHandler(BaseHTTPRequestHandler):
    """What the local web tools' handlers share: uncached responses, JSON bodies, quiet logs."""

    def log_message(self, fmt: str, *args: Any) -> None:  # requests go to the debug log, not stderr
        log.debug("%s " + fmt, self.address_string(), *args)

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj, ensure_ascii=False, default=str).encode("utf-8"),
                   "application/json; charset=utf-8")


def make_handler(viewer: ResultsViewer) -> type[BaseHTTPRequestHandler]:
    # The viewer's pandas index is read-only after start-up, but the search cache is not: one lock.
    lock = threading.Lock()

    def dialogues(p: dict[str, str]) -> Any:
        return viewer.query(model=p.get("model") or None, language=p.get("language") or None,
                            category=p.get("category") or None, status=p.get("status") or None,
                            run=p.get("run") or None, card_id=p.get("card_id") or None,
                            dimension=p.get("dim", "average") or "average",
                            score_min=_float(p, "min"), score_max=_float(p, "max"), q=p.get("q") or None,
                            sort=p.get("sort", "card_id") or "card_id", descending=p.get("desc") in ("1", "true"),
                            offset=_int(p, "offset", 0), limit=_int(p, "limit", 50))

    routes: dict[str, Callable[[dict[str, str]], Any]] = {
        "/api/meta": lambda p: viewer.meta(),
        "/api/dialogues": dialogues,
        "/api/dialogue": lambda p: viewer.dialogue(p.get("run", ""), p.get("id", "")),
        "/api/card": lambda p: {"card_id": p.get("card_id", ""), "models": viewer.card_models(p.get("card_id", ""))},
        "/api/side-by-side": lambda p: viewer.side_by_side(p.get("card_id", ""), p.get("a", ""), p.get("b", ""),
                                                           p.get("language") or None),
    }

    class Handler(JSONRequestHandler):
        server_version = "esc-eval-viewer"

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            url = urlparse(self.path)
            if url.path in ("/", "/index.html"):
                self._send(HTTPStatus.OK, viewer_page().encode("utf-8"), "text/html; charset=utf-8")
                return
            route = routes.get(url.path)
            if route is None:
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no such path {url.path}"})
                return
            params = {k: v[-1] for k, v in parse_qs(url.query).items()}
            try:
                with lock:
                    result = route(params)
            except KeyError as e:
                self._json(HTTPStatus.NOT_FOUND, {"error": str(e.args[0]) if e.args else "not found"})
            except ValueError as e:
                self._json(HTTPStatus.BAD_REQUEST, {"error": str(e)})
            else:
                self._json(HTTPStatus.OK, result)

    return Handler


def make_server(viewer: ResultsViewer, host: str = "127.0.0.1", port: int = 8765) -> ThreadingHTTPServer:
    """A server bound to host:port (port 0 = any free port; read it from server.server_address)."""
    server = ThreadingHTTPServer((host, port), make_handler(viewer))
    server.daemon_threads = True
    return server
