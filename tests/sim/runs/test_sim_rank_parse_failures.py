"""parse_failure_report: per-(judge, target model, dimension) failure rates of a run folder."""
import datetime as dt

import pytest

from esc_eval.sim.runs.parse_failures import COLUMNS, parse_failure_report
from esc_eval.sim.runs.runfolder import RunFolder
from esc_eval.sim.runs.storage import RunFolderError

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def row(dialogue, model, dim, status, judge="j", minutes=0):
    return {"run_id": "r", "dialogue_id": dialogue, "target_model": model, "language": "en", "dimension": dim,
            "score": 3 if status == "ok" else None, "parse_status": status, "judge": judge, "method": "generate",
            "parser": "strict", "scored_at": T0 + dt.timedelta(minutes=minutes)}


def test_rates_per_model_and_dimension_count_only_the_latest_attempt(tmp_path):
    run = RunFolder(tmp_path)
    run.write_part("scores", [
        row("d1", "m1", "fluency", "ok"), row("d2", "m1", "fluency", "parse_failure"),
        row("d3", "m1", "fluency", "parse_failure"), row("d4", "m1", "fluency", "error"),
        row("d1", "m1", "empathy", "ok"), row("e1", "m2", "fluency", "error"),
        row("d1", "m1", "fluency", "parse_failure", judge="other"),
    ])
    # a resumed run re-scored d4 and e1 (errors) successfully: only the newest row counts
    run.write_part("scores", [row("d4", "m1", "fluency", "ok", minutes=5), row("e1", "m2", "fluency", "ok", minutes=5)])
    report = parse_failure_report(tmp_path)
    assert list(report.columns) == COLUMNS
    by = {(r.judge, r.target_model, r.dimension): r for r in report.itertuples()}
    f = by[("j", "m1", "fluency")]
    assert (f.n_scores, f.ok, f.parse_failures, f.errors) == (4, 2, 2, 0)
    assert f.parse_failure_rate == pytest.approx(0.5) and f.failure_rate == pytest.approx(0.5)
    assert by[("j", "m2", "fluency")].failure_rate == 0.0 and by[("j", "m1", "empathy")].n_scores == 1
    assert by[("other", "m1", "fluency")].parse_failure_rate == 1.0
    assert report.iloc[0]["failure_rate"] == 1.0  # worst first
    only = parse_failure_report(tmp_path, judge="j")
    assert set(only["judge"]) == {"j"} and len(only) == 3


def test_empty_and_missing_run_folders(tmp_path):
    empty = parse_failure_report(tmp_path)
    assert empty.empty and list(empty.columns) == COLUMNS
    with pytest.raises(RunFolderError, match="does not exist"):
        parse_failure_report(tmp_path / "missing")
