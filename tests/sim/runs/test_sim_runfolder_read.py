"""RunFolder.read at scale: one read per part and vectorised winners that follow the same rule as
the row-by-row reference (ok beats failed, then the latest timestamp, then the later part and row)."""
import datetime as dt
import random

import pyarrow.parquet as pq
import pytest

from esc_eval.sim.runs import runfolder as rf
from esc_eval.sim.runs.runfolder import RunFolder

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def score_row(did, dim, judge, status, at):
    return {"run_id": "r", "dialogue_id": did, "dimension": dim, "judge": judge, "parse_status": status,
            "score": 1 if status != "error" else None, "scored_at": None if at is None else T0 + dt.timedelta(seconds=at)}


def reference_winners(parts_rows, kind):
    """The rule of the module docstring, row by row (what the reader did before it was vectorised)."""
    ok_col, ok_value, ts_col = rf._RANK[kind]
    best = {}
    for pi, rows in enumerate(parts_rows):
        for ri, r in enumerate(rows):
            status = r.get(ok_col)
            ok = status == ok_value if ok_value is not None else status != "error"
            ts = r.get(ts_col).timestamp() if r.get(ts_col) is not None else float("-inf")
            key = tuple(r.get(k) for k in rf.KEYS[kind])
            rank = (ok, ts, pi, ri)
            if key not in best or rank > best[key]:
                best[key] = rank
    return sorted((pi, ri) for _, _, pi, ri in best.values())


@pytest.mark.parametrize("seed", range(5))
def test_vectorised_winners_follow_the_row_by_row_rule(tmp_path, seed):
    rng = random.Random(seed)
    run = RunFolder(tmp_path / "run")
    parts_rows = []
    for _ in range(rng.randint(1, 6)):
        # Few keys, many duplicates; null judges and timestamps, ties on the timestamp.
        rows = [score_row(f"d{rng.randint(0, 4)}", rng.choice(["fluency", "empathy"]), rng.choice(["j1", "j2", None]),
                          rng.choice(["ok", "error", "parse_failure", None]), rng.choice([None, 1, 2, 2, 3]))
                for _ in range(rng.randint(1, 12))]
        parts_rows.append(rows)
        run.write_part("scores", rows)
    parts = run.parts("scores")
    by_name = dict(zip(sorted(parts), parts_rows))  # part names sort in write order
    expected = reference_winners([by_name[p] for p in parts], "scores")
    got = [(pi, ri) for pi, rows in enumerate(run._winners("scores", parts)) for ri in rows]
    assert got == expected
    table = run.read("scores", columns=["dialogue_id", "dimension", "judge", "parse_status", "scored_at"])
    ordered = [by_name[p] for p in parts]
    assert table.to_pylist() == [{k: ordered[pi][ri][k] for k in table.column_names} for pi, ri in expected]
    assert run.read("scores").num_rows == len(expected)


def test_read_opens_each_part_once(tmp_path, monkeypatch):
    # A folder of many small parts (the batch layer flushes every 64 rows): reading each part twice
    # (once for the winners, once for the rows) doubled the time of every command on 8,500 dialogues.
    run = RunFolder(tmp_path / "run")
    for p in range(20):
        run.write_part("scores", [score_row(f"d{p}-{i}", "fluency", "j", "ok", p) for i in range(3)])
    opened = []
    real_file, real_table = pq.ParquetFile, pq.read_table
    monkeypatch.setattr(rf.pq, "ParquetFile", lambda path, *a, **k: opened.append(str(path)) or real_file(path, *a, **k))
    monkeypatch.setattr(rf.pq, "read_table", lambda path, *a, **k: opened.append(str(path)) or real_table(path, *a, **k))
    for columns in (None, ["dialogue_id", "score"]):
        opened.clear()
        table = run.read("scores", columns=columns)
        assert table.num_rows == 60
        assert sorted(opened) == sorted(run.storage.source(p) for p in run.parts("scores"))


def test_a_part_without_a_newer_column_reads_it_as_null(tmp_path):
    import pyarrow as pa

    run = RunFolder(tmp_path / "run")
    run.write_part("scores", [score_row("a", "fluency", "j", "ok", 1)])
    old = pa.table({"run_id": ["r"], "dialogue_id": ["b"], "dimension": ["fluency"], "judge": ["j"],
                    "parse_status": ["ok"], "scored_at": pa.array([T0], pa.timestamp("us", tz="UTC"))})
    pq.write_table(old, run.path / "scores" / "part-00000000T000000000000-old.parquet")
    rows = {r["dialogue_id"]: r for r in run.read("scores").to_pylist()}
    assert set(rows) == {"a", "b"} and rows["b"]["score"] is None and rows["a"]["score"] == 1
    assert run.read("scores").schema.equals(rf.SCHEMAS["scores"], check_metadata=False)
