"""How fast the annotation page's server opens the next dialogue on a big run (`esc-eval bench annotate`).

One study over every dialogue of the folder (annotators x overlap 2), a real server on loopback,
one annotator working through their queue as the page does: GET /api/next, GET /api/item (the
"open the next dialogue" the target is about), then seven POST /api/answer."""
from __future__ import annotations

import json
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from esc_eval.analysis.web.annotation_server import make_annotation_server
from esc_eval.analysis.web.annotation_service import AnnotationService
from esc_eval.analysis.annotation.store import AnnotationStore
from esc_eval.analysis.annotation.study import create_study
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES


def _stats(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {"p50_ms": round(float(np.percentile(a, 50)), 2), "p95_ms": round(float(np.percentile(a, 95)), 2),
            "max_ms": round(float(a.max()), 2)}


def bench_annotation(run_dirs: list[Path], dialogues: int = 50, annotators: int = 10) -> dict[str, Any]:
    """Time start-up, study creation, opening the next dialogue and saving answers."""
    with tempfile.TemporaryDirectory(prefix="esc-eval-annotate-bench-") as tmp:
        t0 = time.perf_counter()
        store = AnnotationStore(Path(tmp) / "annotations.sqlite")
        service = AnnotationService(run_dirs, store)
        start_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        made = create_study(store, service.viewer.index, {"name": "bench", "overlap": 2,
                                                          "annotators": [f"a{i:02d}" for i in range(annotators)]})
        study_s = time.perf_counter() - t0
        server = make_annotation_server(service, "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}"

        def call(path: str, body: dict | None = None, annotator: str | None = "a00") -> Any:
            data = None if body is None else json.dumps(body).encode()
            req = urllib.request.Request(base + path, data=data, headers={
                **({"X-Annotator": annotator} if annotator else {}), **({"Content-Type": "application/json"} if data else {})})
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())

        open_ms, answer_ms, pos = [], [], -1
        try:
            for _ in range(dialogues):
                t0 = time.perf_counter()
                pos = call(f"/api/next?after={pos}")["position"]
                item = call(f"/api/item?position={pos}")
                open_ms.append(1000 * (time.perf_counter() - t0))
                assert item["turns"]
                for k, dim in enumerate(DIMENSION_NAMES):
                    t0 = time.perf_counter()
                    call("/api/answer", {"position": pos, "dimension": dim, "score": k % 5, "seconds": 1})
                    answer_ms.append(1000 * (time.perf_counter() - t0))
            t0 = time.perf_counter()
            call("/api/results", annotator=None)  # the organiser's view
            results_s = time.perf_counter() - t0
        finally:
            server.shutdown()
            server.server_close()
    return {"n_dialogues": int(len(service.viewer.index)), "queue_length": made["queues"]["a00"],
            "start_s": round(start_s, 2), "create_study_s": round(study_s, 2), "dialogues_annotated": dialogues,
            "open_next": _stats(open_ms), "save_answer": _stats(answer_ms), "first_results_s": round(results_s, 2)}
