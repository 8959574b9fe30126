"""The annotation page's HTTP server: the page and a JSON API over an AnnotationService.

Standard library only (http.server), like the results viewer. Bound to 127.0.0.1 by default.

    GET  /                              the page
    GET  /api/session[?study=]          who the asker is, the studies they may open
    GET  /api/rubric?language=en|zh     the seven rubrics (paper Figures 12-19 + Table 16)
    GET  /api/item?study=&position=     one dialogue of the asker's queue, with their own answers
    GET  /api/next?study=&after=        the next position neither complete nor skipped
    POST /api/answer   {study, position, dimension, score, seconds}   saved before the reply
    POST /api/mark     {study, position, note?, flagged?, skipped?, seconds?}
    GET  /api/progress?study=           the asker's progress (everyone's for the organiser)
    GET  /api/results?study=            agreement, ICC, judge vs human (organiser only)
    POST /api/study    {name, annotators, overlap, sample, strata, ...}    create a study (organiser)

Who asks: header X-Annotator-Token (required off loopback), or on loopback ?annotator=NAME.
POST bodies must be application/json: a page on another origin cannot send that without a CORS
preflight this server never grants. On loopback, requests naming another Host are refused (DNS
rebinding).
"""
from __future__ import annotations

import functools
import json
import logging
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, urlparse

from esc_eval.analysis.web.annotation_service import AnnotationService, Forbidden, Identity, Unauthorized, is_loopback
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.web.viewer_server import JSONRequestHandler

log = logging.getLogger(__name__)
MAX_BODY = 1 << 20


@functools.lru_cache(maxsize=1)
def annotation_page() -> str:
    """The single-page front end (package data next to this module)."""
    return Path(__file__).with_name("annotate.html").read_text(encoding="utf-8")


def make_handler(service: AnnotationService, loopback: bool) -> type[BaseHTTPRequestHandler]:
    gets: dict[str, Callable[[Identity, dict[str, str]], Any]] = {
        "/api/session": lambda who, p: service.session(who, p.get("study") or None),
        "/api/rubric": lambda who, p: service.rubric(p.get("language", "en")),
        "/api/item": lambda who, p: service.item(who, p.get("study") or None, p.get("position", "")),
        "/api/next": lambda who, p: service.next_position(who, p.get("study") or None, p.get("after", "-1")),
        "/api/progress": lambda who, p: service.progress(who, p.get("study") or None),
        "/api/results": lambda who, p: service.results(who, p.get("study") or None),
    }
    posts: dict[str, Callable[[Identity, dict[str, Any]], Any]] = {
        "/api/answer": service.answer,
        "/api/mark": service.mark,
        "/api/study": service.create,
    }

    class Handler(JSONRequestHandler):
        server_version = "esc-eval-annotate"

        def _host_ok(self) -> bool:
            if not loopback:
                return True
            host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]")
            return is_loopback(host)

        def _run(self, fn: Callable[[Identity, Any], Any], arg: Any) -> None:
            try:
                who = service.identify(self.headers.get("X-Annotator-Token"), self.headers.get("X-Annotator")
                                       or (arg.get("annotator") if isinstance(arg, dict) else None))
                result = fn(who, arg)
            except Unauthorized as e:
                self._json(HTTPStatus.UNAUTHORIZED, {"error": str(e)})
            except Forbidden as e:
                self._json(HTTPStatus.FORBIDDEN, {"error": str(e)})
            except KeyError as e:
                self._json(HTTPStatus.NOT_FOUND, {"error": str(e.args[0]) if e.args else "not found"})
            except (AnalysisInputError, ValueError) as e:
                self._json(HTTPStatus.BAD_REQUEST, {"error": str(e)})
            except Exception as e:  # noqa: BLE001 - a bug must answer, not hang the page
                log.exception("annotation API error")
                self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(e).__name__}: {e}"})
            else:
                self._json(HTTPStatus.OK, result)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if not self._host_ok():
                self._json(HTTPStatus.FORBIDDEN, {"error": "unexpected Host header"})
                return
            url = urlparse(self.path)
            if url.path in ("/", "/index.html"):
                self._send(HTTPStatus.OK, annotation_page().encode("utf-8"), "text/html; charset=utf-8")
                return
            route = gets.get(url.path)
            if route is None:
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no such path {url.path}"})
                return
            self._run(route, {k: v[-1] for k, v in parse_qs(url.query).items()})

        def do_POST(self) -> None:  # noqa: N802
            if not self._host_ok():
                self._json(HTTPStatus.FORBIDDEN, {"error": "unexpected Host header"})
                return
            route = posts.get(urlparse(self.path).path)
            if route is None:
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no such path {self.path}"})
                return
            if not (self.headers.get("Content-Type") or "").startswith("application/json"):
                self._json(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, {"error": "send the body as application/json"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": f"body over {MAX_BODY} bytes"})
                return
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                self._json(HTTPStatus.BAD_REQUEST, {"error": f"body is not JSON: {e}"})
                return
            if not isinstance(body, dict):
                self._json(HTTPStatus.BAD_REQUEST, {"error": "body must be a JSON object"})
                return
            self._run(route, body)

    return Handler


def make_annotation_server(service: AnnotationService, host: str = "127.0.0.1", port: int = 8766) -> ThreadingHTTPServer:
    """A server bound to host:port (port 0 = any free port). Off loopback the service must require tokens."""
    loopback = is_loopback(host)
    if not loopback and not service.require_tokens:
        raise ValueError(f"--host {host} is not a loopback address: the service must require annotator tokens")
    server = ThreadingHTTPServer((host, port), make_handler(service, loopback))
    server.daemon_threads = True
    return server
