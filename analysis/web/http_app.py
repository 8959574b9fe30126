"""What the viewer's and the annotation page's web apps share: a Starlette app of JSON routes behind
one guard, errors as {"error": ...}, request validation by pydantic, and `Server`: uvicorn on a
socket bound at once, with the serve_forever / shutdown / server_close of http.server's servers.

The guard, before any route: on a loopback bind a Host that is not loopback is refused (DNS
rebinding); a POST must come from the page's own origin (Sec-Fetch-Site, else Origin against Host)
and be application/json of at most MAX_BODY bytes. No CORS header is ever sent.
"""
from __future__ import annotations

import ipaddress
import json
import socket
import threading
from typing import Any, Callable
from urllib.parse import urlsplit

import uvicorn
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route

MAX_BODY = 1 << 20
# A bug's answer: the exception's text can hold paths and data the page's user should not see (on an
# annotation server, another annotator's); Starlette re-raises it after the answer, so uvicorn's
# error logger writes the traceback where the server runs.
SERVER_FAILED = ("the server failed on this request; the traceback is in the log of the process serving this page "
                 "(the terminal running the esc-eval command)")
HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}  # on every answer
Handler = Callable[[Request, dict[str, Any]], Any]  # (the request, its query or JSON body) -> the answer


def is_loopback(host: str) -> bool:
    """localhost or a loopback address (not a name that merely starts with 127., such as 127.0.0.1.evil.example)."""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class JSON(JSONResponse):
    media_type = "application/json; charset=utf-8"

    def render(self, content: Any) -> bytes:  # as json.dumps wrote them before: dates as text, NaN as NaN
        return json.dumps(content, ensure_ascii=False, default=str).encode("utf-8")


def error(status: int, message: str) -> JSON:
    return JSON({"error": message}, status, HEADERS)


def message(e: Exception) -> str:
    """An exception as the one line of an error answer; a pydantic refusal names the field."""
    if isinstance(e, ValidationError):
        err = e.errors()[0]
        msg = str(err["msg"]).removeprefix("Value error, ")  # our own checks' messages name the field
        return msg if err["type"] == "value_error" else f"{'.'.join(map(str, err['loc']))}: {msg}"
    return (str(e.args[0]) if e.args else "not found") if isinstance(e, KeyError) else str(e)


def refusal(headers: Headers, method: str, loopback: bool) -> tuple[int, str] | None:
    """Why the guard refuses a request before any route (status, message), or None."""
    host = headers.get("host", "")
    try:
        local = is_loopback(urlsplit("//" + host).hostname or "")
    except ValueError:  # e.g. "[" without its "]"
        local = False
    if loopback and not local:
        return 403, "unexpected Host header"
    if method in ("GET", "HEAD"):
        return None
    site, origin = headers.get("sec-fetch-site"), headers.get("origin")
    if site not in (None, "same-origin", "none") or (site is None and origin and urlsplit(origin).netloc != host):
        return 403, "cross-origin request refused"
    if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        return 415, "send the body as application/json"
    if not headers.get("content-length", "").isdigit() or int(headers["content-length"]) > MAX_BODY:
        return 413, f"send a body of at most {MAX_BODY} bytes, with its Content-Length"
    return None


class Guard:
    """ASGI middleware: the refusals above, before any route."""

    def __init__(self, app: Any, loopback: bool) -> None:
        self.app, self.loopback = app, loopback

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        refused = refusal(Headers(scope=scope), scope["method"], self.loopback) if scope["type"] == "http" else None
        await (error(*refused) if refused else self.app)(scope, receive, send)


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")  # the guard saw its length: at most MAX_BODY
    except ValueError as e:
        raise ValueError(f"body is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise ValueError("body must be a JSON object")
    return body


def json_app(page: Callable[[], str], gets: dict[str, Handler], posts: dict[str, Handler], *, loopback: bool,
             errors: dict[type[Exception], int] | None = None) -> Starlette:
    """The page at / and the JSON routes, each run in a worker thread (they block on files and SQLite);
    an empty query parameter is none. Exceptions answer by `errors` (the nearest class), KeyError 404,
    ValueError 400 (pydantic's ValidationError is one), anything else 500 with SERVER_FAILED (uvicorn
    logs its traceback)."""
    def endpoint(handler: Handler, post: bool) -> Callable[[Request], Any]:
        async def run(request: Request) -> JSON:
            data = await _body(request) if post else {k: v for k, v in request.query_params.items() if v}
            return JSON(await run_in_threadpool(handler, request, data), headers=HEADERS)
        return run

    def html(request: Request) -> HTMLResponse:
        return HTMLResponse(page(), headers=HEADERS)

    routes = [Route(path, html) for path in ("/", "/index.html")]  # a Route is GET (and HEAD) unless told
    routes += [Route(path, endpoint(h, False)) for path, h in gets.items()]
    routes += [Route(path, endpoint(h, True), methods=["POST"]) for path, h in posts.items()]
    codes = {KeyError: 404, ValueError: 400, **(errors or {})}

    def answer(request: Request, e: Exception) -> JSON:  # the status of the nearest class in codes
        return error(next(codes[c] for c in type(e).__mro__ if c in codes), message(e))

    def refused(request: Request, e: HTTPException) -> JSON:  # the router's 404 and 405
        return error(e.status_code, f"no such path {request.url.path}" if e.status_code == 404 else e.detail)

    handlers: dict[Any, Callable] = {**dict.fromkeys(codes, answer), HTTPException: refused,
                                     Exception: lambda request, e: error(500, SERVER_FAILED)}
    return Starlette(routes=routes, exception_handlers=handlers, middleware=[Middleware(Guard, loopback=loopback)])


class Server:
    """An app served by uvicorn on host:port, bound when made (port 0 = any free port: read
    server_address). serve_forever() runs until shutdown() from another thread, or a signal in the
    main thread (uvicorn stops, then raises the signal again for the caller: Ctrl-C is KeyboardInterrupt)."""

    def __init__(self, app: Starlette, host: str, port: int) -> None:
        self.socket = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
        self.server_address = self.socket.getsockname()
        config = uvicorn.Config(app, lifespan="off", log_config=None, log_level="warning", access_log=False,
                                server_header=False, ws="none", timeout_graceful_shutdown=5)
        self._uvicorn = uvicorn.Server(config)
        self._stopped = threading.Event()

    def serve_forever(self) -> None:
        try:
            self._uvicorn.run(sockets=[self.socket])
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        self._uvicorn.should_exit = True
        self._stopped.wait()

    def server_close(self) -> None:
        self.socket.close()


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def serve_until_stopped(server: Server) -> None:
    """Serve until Ctrl-C or a plain kill, which stop it cleanly even when started with SIGINT
    ignored (a background job)."""
    import signal

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
