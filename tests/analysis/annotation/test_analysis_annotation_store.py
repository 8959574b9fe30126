"""The annotation store under concurrent writers and a killed server, and the bad input it refuses."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from annotate_testdata import Client, answer_queue, fake_run, score_for, serving, study_request
from esc_eval.analysis.annotation.answers import AnnotationStoreError
from esc_eval.analysis.web.annotation_service import AnnotationService
from esc_eval.analysis.annotation.store import AnnotationStore, default_store_path
from esc_eval.analysis.annotation.study import create_study
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES


@pytest.fixture
def run_with_study(tmp_path):
    run = fake_run(tmp_path / "run", 60)
    store = AnnotationStore(default_store_path(run))
    svc = AnnotationService([run], store)
    out = create_study(store, svc.viewer.index, study_request(annotators=("a1", "a2"), overlap=2, sample=8))
    return run, store, out


def _rows(path: Path) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT annotator, dialogue_id, dimension, score FROM answers").fetchall()
    finally:
        con.close()


def test_two_annotators_at_once_on_two_servers_each_answer_once(run_with_study):
    """Two servers on one store file (several processes may serve one study), an annotator on each,
    writing at the same time, each answer sent twice (a retry after a lost reply)."""
    run, store, _ = run_with_study
    with serving([run]) as (base1, _), serving([run]) as (base2, _):
        errors: list[BaseException] = []

        def work(base: str, annotator: str) -> None:
            try:
                for _ in range(2):
                    answer_queue(Client(base, annotator), store, "s1", annotator)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(b, a)) for b, a in ((base1, "a1"), (base2, "a2"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
    rows = _rows(store.path)
    expected = {(a, did, dim, score_for(a, did, dim)) for a in ("a1", "a2") for did, _ in store.queue("s1", a)
                for dim in DIMENSION_NAMES}
    assert len(rows) == len(expected) == 2 * 8 * 7 and set(rows) == expected
    assert store.progress("s1")[0]["done"] == 8


_CHILD = """
import sys
from pathlib import Path
from esc_eval.analysis.web.annotation_server import make_annotation_server
from esc_eval.analysis.web.annotation_service import AnnotationService
from esc_eval.analysis.annotation.store import AnnotationStore
store = AnnotationStore(Path(sys.argv[2]))
server = make_annotation_server(AnnotationService([Path(sys.argv[1])], store), "127.0.0.1", 0)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def test_server_killed_mid_answer_loses_no_saved_answer(run_with_study):
    """SIGKILL the server while two annotators send answers: every answer it acknowledged is in the
    store exactly once; re-sending the rest to a new server (what the page does with its queue)
    completes the study with no duplicate."""
    run, store, _ = run_with_study
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(run), str(store.path)], stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        port = int(child.stdout.readline())
        base = f"http://127.0.0.1:{port}"
        acked: set[tuple] = set()
        lock = threading.Lock()
        sent_enough = threading.Event()

        def work(annotator: str) -> None:
            client = Client(base, annotator)
            for pos, (did, _) in enumerate(store.queue("s1", annotator)):
                for dim in DIMENSION_NAMES:
                    body = {"study": "s1", "position": pos, "dimension": dim, "score": score_for(annotator, did, dim)}
                    try:
                        status, _ = client.call("/api/answer", body, timeout=5)
                    except OSError:
                        return  # the server is gone
                    if status == 200:
                        with lock:
                            acked.add((annotator, did, dim, body["score"]))
                            if len(acked) >= 40:
                                sent_enough.set()

        threads = [threading.Thread(target=work, args=(a,)) for a in ("a1", "a2")]
        for t in threads:
            t.start()
        assert sent_enough.wait(60), "the server answered too few requests"
        child.send_signal(signal.SIGKILL)  # mid-answer: both annotators are sending
        for t in threads:
            t.join(30)
    finally:
        child.kill()
        child.wait()
    con = sqlite3.connect(store.path)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    rows = _rows(store.path)
    assert acked <= set(rows) and len(rows) == len(set(rows))
    assert len(acked) < 2 * 8 * 7  # it really died mid-study
    # The page re-sends what it was not told was saved; a retry of a saved one replaces it.
    with serving([run]) as (base, _):
        for a in ("a1", "a2"):
            answer_queue(Client(base, a), store, "s1", a)
    rows = _rows(store.path)
    assert len(rows) == 2 * 8 * 7 and len({r[:3] for r in rows}) == len(rows)


def test_bad_input_gets_a_clear_message_and_writes_nothing(run_with_study, tmp_path):
    run, store, out = run_with_study
    before = _rows(store.path)
    with serving([run], require_tokens=False) as (base, _):
        a1 = Client(base, "a1")
        for score in (5, -1, 2.5, "x", None, True):
            status, body = a1.call("/api/answer", {"study": "s1", "position": 0, "dimension": "fluency", "score": score})
            assert status == 400 and "0-4" in body["error"], (score, body)
        status, body = a1.call("/api/answer", {"study": "s1", "position": 0, "dimension": "charm", "score": 2})
        assert status == 400 and "unknown dimension" in body["error"]
        status, body = a1.call("/api/answer", {"study": "s1", "position": 99, "dimension": "fluency", "score": 2})
        assert status == 400 and "outside a1's queue" in body["error"]
        status, body = Client(base, "zed").call("/api/answer", {"study": "s1", "position": 0, "dimension": "fluency",
                                                                "score": 2})
        assert status == 400 and "'zed' is not in study 's1'" in body["error"]
        status, body = Client(base).call("/api/answer", {"study": "s1", "position": 0, "dimension": "fluency", "score": 2})
        assert status == 403 and "only an annotator answers" in body["error"]
        status, body = Client(base, token="not-a-token").call("/api/answer", {"study": "s1", "position": 0,
                                                                              "dimension": "fluency", "score": 2})
        assert status == 401 and "unknown annotator token" in body["error"]
        status, body = a1.call("/api/answer", {"study": "nope", "position": 0, "dimension": "fluency", "score": 2})
        assert status == 400 and "no study 'nope'" in body["error"]
    assert _rows(store.path) == before == []
    # Directly on the store: a dialogue outside the annotator's queue.
    with pytest.raises(AnnotationStoreError, match="not in a1's queue"):
        store.save_answer("s1", "a1", "not-a-dialogue", "fluency", 2)
    assert _rows(store.path) == []


def test_tokens_off_loopback_open_only_ones_own_queue(run_with_study):
    """With tokens (any non-loopback bind): an annotator sees their own queue and answers only, no
    results, no model; the admin token sees results and answers nothing."""
    run, store, out = run_with_study
    tokens = out["tokens"]
    with serving([run], require_tokens=True) as (base, _):
        status, body = Client(base, "a1").call("/api/session")
        assert status == 401 and "needs a token" in body["error"]
        a1 = Client(base, token=tokens["a1"])
        # the header naming another annotator is ignored: the token decides who asks
        a1_as_a2 = Client(base, "a2", token=tokens["a1"])
        assert a1.ok("/api/session")["annotator"] == "a1"
        assert a1_as_a2.ok("/api/session")["annotator"] == "a1"
        answer_queue(a1, store, "s1", "a1", limit=2)
        item = a1.ok("/api/item?position=0")
        assert set(item) == {"study", "position", "total", "language", "turns", "answers", "note", "flagged", "skipped"}
        assert set(item["turns"][0]) == {"speaker", "text"} and len(item["answers"]) == 7
        assert a1.call("/api/results")[0] == 403
        assert [p["annotator"] for p in a1.ok("/api/progress")["annotators"]] == ["a1"]
        # overlap 2 of 2: a2 has the dialogue a1 just scored, and sees none of a1's answers
        a2 = Client(base, token=tokens["a2"])
        shared = [d for d, _ in store.queue("s1", "a2")].index(store.queue("s1", "a1")[0][0])
        assert a2.ok(f"/api/item?position={shared}")["answers"] == {}
        admin = Client(base, token=tokens["admin"])
        assert admin.ok("/api/results")["n_answers"] == 14
        assert admin.call("/api/answer", {"position": 0, "dimension": "fluency", "score": 1})[0] == 403
    # a loopback-bound server never serves without a loopback Host (DNS rebinding)
    with serving([run]) as (base, _):
        import urllib.request
        req = urllib.request.Request(base + "/api/session", headers={"Host": "evil.example"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=5)
        assert e.value.code == 403


def test_reissued_token_replaces_the_old(run_with_study):
    _, store, out = run_with_study
    new = store.reissue_token("s1", "a1")
    assert store.token_identity(out["tokens"]["a1"]) is None
    assert store.token_identity(new) == {"role": "annotator", "study": "s1", "annotator": "a1"}
    with pytest.raises(AnnotationStoreError, match="not in study"):
        store.reissue_token("s1", "zed")
