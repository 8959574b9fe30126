"""What the page asks the service: the next open dialogue (skips, wrap-around), the results'
refresh, and the opening time the bench measures."""
from __future__ import annotations

from annotate_testdata import Client, fake_run, score_for, serving, study_request
from esc_eval.analysis.bench.annotation import bench_annotation
from esc_eval.analysis.web.annotation_service import Identity
from esc_eval.analysis.annotation.study import create_study
from esc_eval.analysis.results.fake_runs import write_fake_run
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES


def test_next_skips_done_and_skipped_dialogues_and_wraps_round(tmp_path):
    run = fake_run(tmp_path / "run", 30)
    with serving([run]) as (base, service):
        create_study(service.store, service.viewer.index, study_request(annotators=("a1",), overlap=1, sample=5))
        a1 = Client(base, "a1")
        queue = service.store.queue("s1", "a1")
        assert a1.ok("/api/next?after=-1") == {"position": 0, "remaining": 5}
        for dim in DIMENSION_NAMES:  # position 1 done
            a1.ok("/api/answer", {"position": 1, "dimension": dim, "score": score_for("a1", queue[1][0], dim)})
        a1.ok("/api/mark", {"position": 2, "skipped": True})
        assert a1.ok("/api/next?after=0") == {"position": 3, "remaining": 3}
        assert a1.ok("/api/next?after=4")["position"] == 0  # wraps round
        a1.ok("/api/answer", {"position": 1, "dimension": "overall", "score": 0})  # a changed mind: still complete
        assert a1.ok("/api/next?after=0")["position"] == 3
        status, body = Client(base, "zed").call("/api/next?after=-1")
        assert status == 400 and "not in study" in body["error"]
        # the organiser's results follow the answers (recomputed once they change)
        before = service.results(Identity("local"), "s1")
        assert before["n_answers"] == 7 and before["stale"] is False
        a1.ok("/api/answer", {"position": 0, "dimension": "fluency", "score": 2})
        service._results["s1"] = (*service._results["s1"][:2], 0.0)  # past the throttle window
        assert service.results(Identity("local"), "s1")["n_answers"] == 8


def test_bench_opens_the_next_dialogue_fast(tmp_path):
    run = fake_run(tmp_path / "run", 120)
    out = bench_annotation([run], dialogues=4, annotators=4)
    assert out["n_dialogues"] == 120 and out["queue_length"] == 60
    assert out["open_next"]["p95_ms"] < 100, out


def test_a_server_over_other_runs_says_so(tmp_path):
    run_a = fake_run(tmp_path / "a", 12)
    store_path = tmp_path / "store.sqlite"
    with serving([run_a], store_path) as (_, service):
        create_study(service.store, service.viewer.index, study_request(annotators=("a1",), overlap=1, sample=3))
    run_c = write_fake_run(tmp_path / "c", 12, models=["x1", "x2"])  # other models: other dialogue ids
    with serving([run_c], store_path) as (base, _):
        status, body = Client(base, "a1").call("/api/item?position=0")
        assert status == 404 and "not in the run(s) this server was started with" in body["error"]
