"""bench panel: one judge, then a panel, over the same fake dialogues on one pool; the panel's calls
are N times one judge's, and its figures come from the runs' own counts."""
import pytest

from esc_eval.sim.bench.loops.panel import bench_panel, write_fake_dialogues
from esc_eval.sim.runs.runfolder import RunFolder


def test_the_panel_makes_n_times_the_calls_and_reports_the_wall_time_per_call():
    r = bench_panel(dialogues=30, judges=3, latency=0.001, workers=1, concurrency=8, executor="local")
    assert r["one_judge"]["calls"] == 30 * 7 and r["panel"]["calls"] == 3 * 30 * 7
    assert r["calls_ratio"] == 3.0 and r["one_judge"]["failed"] == r["panel"]["failed"] == 0
    per_call = (r["panel"]["wall_s"] / r["panel"]["calls"]) / (r["one_judge"]["wall_s"] / r["one_judge"]["calls"])
    assert r["wall_per_call_ratio"] == pytest.approx(per_call, abs=1e-3)
    assert r["meets_target"] == (r["wall_per_call_ratio"] <= 1.2)


def test_the_fake_set_holds_n_distinct_completed_dialogues(tmp_path):
    run = write_fake_dialogues(tmp_path / "run", 45, targets=4, part_rows=10)
    rows = list(RunFolder(run.location, create=False).iter_rows("dialogues", columns=["dialogue_id", "status", "target_model"]))
    assert len({r["dialogue_id"] for r in rows}) == 45 and {r["status"] for r in rows} == {"ok"}
    assert len(run.parts("dialogues")) == 5 and len({r["target_model"] for r in rows}) == 4


def test_a_panel_of_one_is_refused():
    with pytest.raises(ValueError, match="at least 2 judges"):
        bench_panel(dialogues=2, judges=1, executor="local")
