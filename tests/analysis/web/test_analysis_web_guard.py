"""The guard both web apps share (analysis/web/http_app.py), over real uvicorn servers: a foreign
Host (DNS rebinding) and a cross-origin POST are refused on the viewer and on the annotation
server, a POST that is not JSON (or of no stated length, or too long) is refused, nothing is
written when refused, no CORS header is ever sent, and pydantic refuses a bad query or body with
one line naming the field."""
from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

from annotate_testdata import fake_run, serving, study_request
from esc_eval.analysis.annotation.store import AnnotationStore
from esc_eval.analysis.annotation.study import create_study
from esc_eval.analysis.web.annotation_server import make_annotation_server
from esc_eval.analysis.web.annotation_service import AnnotationService
from esc_eval.analysis.web.http_app import MAX_BODY, SERVER_FAILED
from esc_eval.analysis.web.viewer import ResultsViewer
from esc_eval.analysis.web.viewer_server import make_server

ANSWER = {"study": "s1", "position": 0, "dimension": "fluency", "score": 3}


def send(port: int, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
         raw: bytes | None = None) -> tuple[int, dict[str, str], Any]:
    """One request as a browser or a script would send it; Host is 127.0.0.1:port unless given."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        h = {"Host": f"127.0.0.1:{port}", **({"Content-Type": "application/json"} if data is not None else {}),
             **(headers or {})}
        conn.request(method, path, body=data, headers={k: v for k, v in h.items() if v is not None})
        r = conn.getresponse()
        text = r.read()
        ctype = r.getheader("Content-Type", "")
        return r.status, {k.lower(): v for k, v in r.getheaders()}, json.loads(text) if "json" in ctype else text
    finally:
        conn.close()


@contextmanager
def viewer_at(run) -> Iterator[int]:
    srv = make_server(ResultsViewer([run]), "127.0.0.1", 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv.server_address[1]
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def run(tmp_path):
    return fake_run(tmp_path / "run", 30)


@contextmanager
def annotation_at(run) -> Iterator[tuple[int, AnnotationService]]:
    with serving([run]) as (base, service):
        create_study(service.store, service.viewer.index, study_request(annotators=("a1", "a2"), overlap=2, sample=4))
        yield int(base.rsplit(":", 1)[1]), service


def test_a_foreign_host_is_refused_on_both_servers(run):
    with viewer_at(run) as vport, annotation_at(run) as (aport, _):
        for port, path in ((vport, "/api/meta"), (vport, "/"), (aport, "/api/session"), (aport, "/")):
            for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}", "[::1", ""):
                status, _, body = send(port, "GET", path, headers={"Host": host})
                assert status == 403 and body == {"error": "unexpected Host header"}, (port, path, host, status, body)
            for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "127.0.0.2"):
                assert send(port, "GET", path, headers={"Host": host})[0] == 200, (port, path, host)


def test_a_cross_origin_post_is_refused_on_both_servers(run):
    with viewer_at(run) as vport, annotation_at(run) as (aport, service):
        for foreign in ({"Origin": "http://evil.example"}, {"Origin": f"http://localhost:{aport}"},
                        {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
                        {"Sec-Fetch-Site": "cross-site", "Origin": f"http://127.0.0.1:{aport}"}):
            for port, path in ((aport, "/api/answer"), (aport, "/api/study"), (vport, "/api/meta")):
                body = ANSWER if path == "/api/answer" else study_request(name="evil", annotators=("x",), overlap=1)
                status, headers, answer = send(port, "POST", path, body, {"X-Annotator": "a1", **foreign})
                assert status == 403 and answer == {"error": "cross-origin request refused"}, (foreign, path, answer)
                assert "access-control-allow-origin" not in headers
        assert len(service.store.answers("s1")) == 0 and [s["study"] for s in service.store.studies()] == ["s1"]
        # the page's own requests: Chromium's same-origin fetch, an older browser's Origin, a script's neither
        for own in ({"Sec-Fetch-Site": "same-origin", "Origin": f"http://127.0.0.1:{aport}"},
                    {"Origin": f"http://127.0.0.1:{aport}"}, {}):
            assert send(aport, "POST", "/api/answer", ANSWER, {"X-Annotator": "a1", **own})[0] == 200, own
        assert len(service.store.answers("s1")) == 1
        # the viewer has no POST route: its own origin gets 405; a CORS preflight is refused, never granted
        assert send(vport, "POST", "/api/meta", {}, {"Sec-Fetch-Site": "same-origin"})[0] == 405
        for port, path in ((aport, "/api/answer"), (vport, "/api/meta")):
            status, headers, _ = send(port, "OPTIONS", path, headers={
                "Origin": "http://evil.example", "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type"})
            assert status == 403 and not any(k.startswith("access-control-") for k in headers)


def test_a_post_that_is_not_json_is_refused_and_writes_nothing(run):
    with annotation_at(run) as (port, service):
        a1 = {"X-Annotator": "a1"}
        for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                      "application/jsonp", "", None):
            status, _, body = send(port, "POST", "/api/answer", ANSWER, {**a1, "Content-Type": ctype})
            assert status == 415 and body == {"error": "send the body as application/json"}, ctype
        chunked = send(port, "POST", "/api/answer", raw=iter([json.dumps(ANSWER).encode()]), headers=a1)
        assert chunked[0] == 413 and "Content-Length" in chunked[2]["error"]
        big = send(port, "POST", "/api/answer", raw=b" " * (MAX_BODY + 1), headers={**a1, "Content-Type": "application/json"})
        assert big[0] == 413 and f"at most {MAX_BODY} bytes" in big[2]["error"]
        for raw, fragment in ((b"{not json", "body is not JSON"), (b"[1, 2]", "body must be a JSON object"),
                              (b"\xff\xfe", "body is not JSON")):
            status, _, body = send(port, "POST", "/api/answer", raw=raw, headers={**a1, "Content-Type": "application/json"})
            assert status == 400 and fragment in body["error"], raw
        assert len(service.store.answers("s1")) == 0
        # JSON with a charset parameter is JSON
        assert send(port, "POST", "/api/answer", ANSWER, {**a1, "Content-Type": "application/json; charset=utf-8"})[0] == 200


def test_pydantic_refuses_a_bad_query_or_body_with_one_line(run):
    with viewer_at(run) as vport, annotation_at(run) as (aport, service):
        for query, fragment in (("limit=ten", "limit: "), ("min=abc", "min: "), ("desc=maybe", "desc: ")):
            status, _, body = send(vport, "GET", f"/api/dialogues?{query}")
            assert status == 400 and body["error"].startswith(fragment) and "\n" not in body["error"], (query, body)
        assert send(vport, "GET", "/api/dialogues?min=&max=&model=&limit=2")[2]["total"] == 30  # empty = not given
        a1 = {"X-Annotator": "a1"}
        for bad, fragment in (({"position": "first"}, "position: "), ({"score": 5}, "score 5 is outside the integers 0-4"),
                              ({"dimension": "charm"}, "unknown dimension"), ({"seconds": -1}, "seconds -1 is not a duration"),
                              ({"position": None}, "position: ")):
            status, _, body = send(aport, "POST", "/api/answer", {**ANSWER, **bad}, a1)
            assert status == 400 and fragment in body["error"] and "\n" not in body["error"], (bad, body)
        status, _, body = send(aport, "POST", "/api/mark", {"position": 0, "note": "x" * 20_001}, a1)
        assert status == 400 and body["error"].startswith("note: ")
        status, _, body = send(aport, "GET", "/api/item?position=two", headers=a1)
        assert status == 400 and body["error"].startswith("position: ")
        assert len(service.store.answers("s1")) == 0
        # who asks is known first: a bad body from someone who may not post is refused as that
        status, _, body = send(aport, "POST", "/api/answer", {"score": "x"}, {"X-Annotator-Token": "not-a-token"})
        assert status == 401 and "unknown annotator token" in body["error"]


def test_every_answer_is_uncached_and_unsniffed_json_and_a_bug_answers_500(run, monkeypatch, caplog):
    with viewer_at(run) as port:
        for path, status in (("/", 200), ("/api/meta", 200), ("/api/nothing", 404), ("/api/dialogue?run=x&id=y", 404)):
            got, headers, body = send(port, "GET", path)
            assert got == status and headers["cache-control"] == "no-store" and headers["x-content-type-options"] == "nosniff"
            assert headers["content-type"] == ("text/html; charset=utf-8" if path == "/" else "application/json; charset=utf-8")
        assert send(port, "GET", "/api/nothing")[2] == {"error": "no such path /api/nothing"}
        assert send(port, "GET", "/api/meta", headers={"Host": "evil.example"})[1]["cache-control"] == "no-store"
        def leaks(self):
            raise RuntimeError("/home/annotator/secret.db: row 7")
        monkeypatch.setattr(ResultsViewer, "meta", leaks)
        caplog.set_level(logging.ERROR, logger="uvicorn.error")
        status, headers, body = send(port, "GET", "/api/meta")
        # the answer says that it failed and where to look, not what the exception said; the log has it
        assert status == 500 and body == {"error": SERVER_FAILED} and "secret" not in json.dumps(body)
        deadline = time.monotonic() + 10  # logged as Starlette re-raises it, after the answer went out
        while not any(r.exc_info and "secret.db" in str(r.exc_info[1]) for r in caplog.records):
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.05)
        assert send(port, "GET", "/api/dialogues?limit=1")[0] == 200  # and the server goes on


def test_off_loopback_needs_tokens_and_a_server_stops_promptly(run, tmp_path):
    store = AnnotationStore(tmp_path / "store.sqlite")
    with pytest.raises(ValueError, match="not a loopback address"):
        make_annotation_server(AnnotationService([run], store), "0.0.0.0", 0)
    server = make_annotation_server(AnnotationService([run], store, require_tokens=True), "0.0.0.0", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        # bound off loopback, any Host may reach it (names are not known), and the token decides
        status, _, body = send(port, "GET", "/api/session", headers={"Host": f"annotate.example.org:{port}"})
        assert status == 401 and "needs a token" in body["error"]
    finally:
        t0 = time.perf_counter()
        server.shutdown()
        server.server_close()
    assert time.perf_counter() - t0 < 5 and not thread.is_alive()
