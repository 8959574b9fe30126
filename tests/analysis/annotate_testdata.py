"""Helpers of the annotation tests: a fake run, a store with a study, and a live local server."""
from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from esc_eval.analysis.web.annotation_server import make_annotation_server
from esc_eval.analysis.web.annotation_service import AnnotationService
from esc_eval.analysis.annotation.store import AnnotationStore, default_store_path
from esc_eval.analysis.results.fake_runs import write_fake_run
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

MODELS = ["m1", "m2", "m3"]


def fake_run(path: Path, n: int = 60, judge: str = "fake/judge") -> Path:
    """n ok dialogues (cards x MODELS, every fifth card Chinese), seven judge scores each."""
    return write_fake_run(path, n, models=MODELS, part_rows=16, judge=judge)


def study_request(name: str = "s1", annotators=("a1", "a2", "a3"), overlap: int = 2, **kw) -> dict[str, Any]:
    return {"name": name, "annotators": list(annotators), "overlap": overlap, **kw}


def score_for(annotator: str, dialogue_id: str, dimension: str) -> int:
    """A deterministic score that differs a little between annotators (so agreement is neither 0 nor 1)."""
    base = (sum(map(ord, dialogue_id)) + DIMENSION_NAMES.index(dimension)) % 5
    bump = (sum(map(ord, annotator + dialogue_id)) % 3) - 1
    return min(4, max(0, base + (bump if dimension in ("empathy", "overall") else 0)))


class Client:
    """JSON over HTTP to an annotation server, as one annotator (header) or with a token."""

    def __init__(self, base: str, annotator: str | None = None, token: str | None = None):
        self.base, self.annotator, self.token = base, annotator, token

    def _headers(self, body: bool) -> dict[str, str]:
        h = {}
        if self.annotator:
            h["X-Annotator"] = self.annotator
        if self.token:
            h["X-Annotator-Token"] = self.token
        if body:
            h["Content-Type"] = "application/json"
        return h

    def call(self, path: str, body: dict | None = None, timeout: float = 10) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, headers=self._headers(body is not None))
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def ok(self, path: str, body: dict | None = None) -> Any:
        status, data = self.call(path, body)
        assert status == 200, (path, status, data)
        return data


@contextmanager
def serving(run_dirs: list[Path], store_path: Path | None = None, host: str = "127.0.0.1",
            require_tokens: bool = False) -> Iterator[tuple[str, AnnotationService]]:
    store = AnnotationStore(store_path or default_store_path(run_dirs[0]))
    service = AnnotationService(run_dirs, store, require_tokens=require_tokens)
    server = make_annotation_server(service, host, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}", service
    finally:
        server.shutdown()
        server.server_close()


def answer_queue(client: Client, store: AnnotationStore, study: str, annotator: str, limit: int | None = None) -> int:
    """Score every dimension of the annotator's queue (or its first `limit` dialogues) over HTTP."""
    queue = store.queue(study, annotator)[:limit]
    for pos, (did, _) in enumerate(queue):
        for dim in DIMENSION_NAMES:
            client.ok("/api/answer", {"study": study, "position": pos, "dimension": dim,
                                      "score": score_for(annotator, did, dim), "seconds": 1.5 + pos})
    return len(queue) * len(DIMENSION_NAMES)
