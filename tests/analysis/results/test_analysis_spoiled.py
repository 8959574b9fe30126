"""Spoiled dialogues in analysis: stored flags read back, the same rule computed for rows without
them (old parts without the columns load), the viewer's JSON and filter, the report's count per
target x role model, and `leaderboard --exclude-spoiled` printing both tables with hand-computed
values."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from analysis_testdata import ESC_DATA, dialogue_row, needs_shared_data, score_rows
from esc_eval.analysis.report.report import write_report
from esc_eval.analysis.results.loaders import load_dialogues
from esc_eval.analysis.results.spoiled import COMPUTED, NO_CARD, STORED, spoiled_dialogues, spoiled_flags
from esc_eval.analysis.seekers.spoiled_section import spoiled_counts
from esc_eval.analysis.web.viewer import ResultsViewer
from esc_eval.sim.runs.records import DIALOGUE_SCHEMA
from esc_eval.sim.runs.runfolder import RunFolder, part_name

CLEAN = ["I feel so anxious about work.", "My boss keeps yelling at me in front of everyone.", "I can't sleep."]
REPEATS = ["My boss keeps yelling at me in front of everyone.", "I lost sleep over it again.",
           "My boss keeps yelling at me in front of everyone."]
AI = ["As an AI language model, I have no boss.", "Work is fine.", "Nothing else."]


def _run(make_run, name="run", stored: bool = False):
    """m1: two clean dialogues scored 4, two that repeat themselves scored 0; m2: one clean (2), one AI (0).
    stored: the rows carry the flags (as a simulate run writes them); else the columns are null."""
    dialogues, scores = [], []
    for did, model, seeker, score in (("m1-a", "m1", CLEAN, 4), ("m1-b", "m1", CLEAN, 4), ("m1-c", "m1", REPEATS, 0),
                                      ("m1-d", "m1", REPEATS, 0), ("m2-a", "m2", CLEAN, 2), ("m2-b", "m2", AI, 0)):
        row = dialogue_row(did, model, card_id=did[-1], seeker=seeker)
        if stored:
            reasons = {"m1-c": ["repeats_itself"], "m1-d": ["repeats_itself"], "m2-b": ["out_of_character"]}.get(did, [])
            row.update(spoiled=bool(reasons), spoiled_reasons=reasons)
        dialogues.append(row)
        scores += score_rows(did, model, [score] * 7)
    dialogues.append(dialogue_row("m2-x", "m2", card_id="x", status="failed"))
    return make_run(name, dialogues=dialogues, scores=scores)


def test_stored_flags_are_read_back_and_missing_ones_computed_alike(make_run):
    stored = spoiled_dialogues(_run(make_run, "stored", stored=True)).set_index("dialogue_id")
    computed = spoiled_dialogues(_run(make_run, "computed")).set_index("dialogue_id")
    assert set(stored["flag_source"].dropna()) == {STORED}
    assert set(computed["flag_source"].dropna()) == {NO_CARD}  # no card file in the manifest: ignores_card unchecked
    for frame in (stored, computed):
        assert frame["spoiled"].drop("m2-x").to_dict() == {"m1-a": False, "m1-b": False, "m1-c": True, "m1-d": True,
                                                           "m2-a": False, "m2-b": True}
        assert frame.loc["m1-c", "spoiled_reasons"] == ["repeats_itself"]
        assert frame.loc["m2-b", "spoiled_reasons"] == ["out_of_character"]
        assert pd.isna(frame.loc["m2-x", "spoiled"])  # a failed dialogue is not judged


def test_a_part_written_before_the_columns_still_loads_and_is_flagged(make_run, tmp_path):
    run = RunFolder(tmp_path / "old")
    rows = [dialogue_row("d1", "m1", seeker=REPEATS), dialogue_row("d2", "m1", seeker=CLEAN)]
    old_schema = pa.schema([f for f in DIALOGUE_SCHEMA if f.name not in ("spoiled", "spoiled_reasons")])
    (tmp_path / "old" / "dialogues").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=old_schema), tmp_path / "old" / "dialogues" / part_name("old"))
    assert run.read("dialogues").column("spoiled").to_pylist() == [None, None]
    assert run.read("dialogues", columns=["dialogue_id", "spoiled"]).column("spoiled").null_count == 2
    d = load_dialogues(tmp_path / "old")
    assert list(d["dialogue_id"]) == ["d1", "d2"] and d["spoiled"].isna().all()
    flags = spoiled_flags(d, {(str(tmp_path / "old"), "c1"): "Occupation: teacher\nProblem: the boss yells at work"})
    assert flags["spoiled_reasons"].tolist() == [["repeats_itself"], []]
    assert set(flags["flag_source"]) == {COMPUTED}
    v = ResultsViewer([tmp_path / "old"])  # the viewer computes them for the part too
    assert v.query(status="spoiled")["total"] == 1


def test_the_viewer_json_carries_the_flag_and_filters_on_it(make_run):
    from esc_eval.analysis.web.viewer_server import make_server

    run = _run(make_run, stored=True)
    v = ResultsViewer([run])
    meta = v.meta()
    assert meta["statuses"] == ["failed", "ok", "spoiled", "not spoiled", "spoiled: out_of_character",
                                "spoiled: repeats_itself"]
    assert {r["dialogue_id"] for r in v.query(status="spoiled")["rows"]} == {"m1-c", "m1-d", "m2-b"}
    assert {r["dialogue_id"] for r in v.query(status="spoiled: out_of_character")["rows"]} == {"m2-b"}
    assert v.query(status="not spoiled")["total"] == 3 and v.query(status="failed")["total"] == 1
    d = v.dialogue("run", "m1-c")
    assert d["spoiled"] is True and d["spoiled_reasons"] == ["repeats_itself"]
    server = make_server(v, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        page = json.loads(urllib.request.urlopen(f"{base}/api/dialogues?status=spoiled&sort=card_id").read())
        assert [(r["dialogue_id"], r["spoiled"], r["spoiled_reasons"]) for r in page["rows"]] == [
            ("m2-b", True, ["out_of_character"]), ("m1-c", True, ["repeats_itself"]), ("m1-d", True, ["repeats_itself"])]
        one = json.loads(urllib.request.urlopen(f"{base}/api/dialogue?run=run&id=m1-a").read())
        assert one["spoiled"] is False and one["spoiled_reasons"] == []
    finally:
        server.shutdown()


def test_report_counts_per_target_and_role_model(make_run, tmp_path):
    run = _run(make_run, stored=True)
    counts = spoiled_counts(spoiled_dialogues(run)).set_index("target_model")
    assert counts.loc["m1", ["n_dialogues", "n_spoiled", "repeats_itself"]].tolist() == [4, 2, 2]
    assert counts.loc["m2", ["n_dialogues", "n_spoiled", "out_of_character"]].tolist() == [2, 1, 1]
    assert counts.loc["m1", "spoiled_share"] == 0.5
    md = write_report([run], tmp_path / "rep", n_boot=0)["markdown"].read_text()
    section = md.split("## Dialogues the simulator spoiled")[1].split("\n## ")[0]
    assert "| en | m1 | fake/role | 4 | 2 | 50.0% | 0 | 0 | 2 | 0 | 0 | 0 | stored 4 |" in section
    # m1: 4, 4, 0, 0 -> Average 50; without its two spoiled dialogues 100
    assert "| en | m1 | judge-a | 4 | 2 | 50.00 | 100.00 | 50.00 |" in section
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert {r["target_model"]: r["n_spoiled"] for r in report["spoiled"]["counts"]} == {"m1": 2, "m2": 1}


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "esc_eval.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=180)


def test_leaderboard_exclude_spoiled_prints_both_tables(make_run, tmp_path):
    run = _run(make_run)  # flags computed on the fly
    out = tmp_path / "out"
    proc = _cli("leaderboard", run, "-o", out, "--n-boot", "20", "--exclude-spoiled")
    assert proc.returncode == 0, proc.stderr
    paths = json.loads(proc.stdout)
    assert {"markdown", "without_spoiled_markdown", "without_spoiled_csv", "without_spoiled_change_csv"} <= set(paths)
    change = pd.read_csv(out / "leaderboard_spoiled_change.csv").set_index("model")
    assert change.loc["m1", ["n_all", "n_kept", "average_all", "average_kept", "change"]].tolist() == [4, 2, 50.0, 100.0, 50.0]
    assert change.loc["m2", ["n_all", "n_kept", "average_all", "average_kept"]].tolist() == [2, 1, 25.0, 50.0]
    md = (out / "leaderboard_without_spoiled.md").read_text()
    assert "Left out 3 of 6 scored dialogues the simulator spoiled (out of character 1, repeats itself 2" in md
    assert "| en | m1 | judge-a | 4 | 2 | 50.00 | 100.00 | +50.00 |" in md
    kept = pd.read_csv(out / "leaderboard_without_spoiled.csv").set_index("model")
    assert kept.loc["m1", "n_dialogues"] == 2 and kept.loc["m1", "Average"] == 100.0
    assert pd.read_csv(out / "leaderboard.csv").set_index("model").loc["m1", "Average"] == 50.0  # the full one, unchanged


def test_terminal_shows_the_table_with_and_without(make_run, tmp_path):
    proc = _cli("leaderboard", _run(make_run), "-o", tmp_path / "o", "--n-boot", "0", "--exclude-spoiled")
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert "Leaderboard: mean score x 25" in text and "Leaderboard without the dialogues the simulator spoiled" in text


@needs_shared_data("scores")
def test_exclude_spoiled_without_dialogues_is_one_line(tmp_path):
    proc = _cli("leaderboard", ESC_DATA / "scores", "-o", tmp_path / "o", "--exclude-spoiled")
    assert proc.returncode == 2 and proc.stdout == "" and not (tmp_path / "o").exists()
    assert proc.stderr.strip().startswith("error: --exclude-spoiled: none of the scored dialogues has its turns in")
    assert len(proc.stderr.strip().splitlines()) == 1
    # with the official dialogue JSON beside the scores, the release's dialogues are judged on the fly
    ok = _cli("leaderboard", ESC_DATA / "scores", ESC_DATA / "dialogues", "-o", tmp_path / "o2", "--n-boot", "0",
              "--exclude-spoiled")
    assert ok.returncode == 0, ok.stderr
    assert "Left out 0 of 12 scored dialogues" in (tmp_path / "o2" / "leaderboard_without_spoiled.md").read_text()


def test_every_leaderboard_says_how_many_of_each_rows_dialogues_are_spoiled(make_run, tmp_path):
    """m1: 2 of 4 spoiled, m2: 1 of 2 (the failed one is not scored): beside each row in the terminal,
    leaderboard.md/.csv, the report's table and the table by category."""
    run = _run(make_run)
    proc = _cli("leaderboard", run, "-o", tmp_path / "lb", "--n-boot", "0")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split("│")[3].strip(): [c.strip() for c in line.split("│")[1:-1]]
            for line in proc.stderr.splitlines() if line.count("│") > 8 and "m" in line.split("│")[3]}
    assert rows["m1"][3:5] == ["4", "2"] and rows["m2"][3:5] == ["2", "1"]  # n, Spoiled
    csv = pd.read_csv(tmp_path / "lb" / "leaderboard.csv").set_index("model")
    assert csv.loc["m1", ["n_dialogues", "n_spoiled"]].tolist() == [4, 2] and csv.loc["m2", "n_spoiled"] == 1
    md = (tmp_path / "lb" / "leaderboard.md").read_text()
    assert "| Language | Group | Model | Judge | n | Spoiled |" in md and "| m1 | judge-a | 4 | 2 |" in md
    assert "Spoiled: how many of the row's dialogues the simulator spoiled" in md
    by = _cli("leaderboard", run, "-o", tmp_path / "by", "--n-boot", "0", "--by", "category")
    assert by.returncode == 0, by.stderr
    assert "| m1 | judge-a | 4 | 2 |" in (tmp_path / "by" / "leaderboard_by_category.md").read_text()
    write_report([run], tmp_path / "rep", n_boot=0)
    report = (tmp_path / "rep" / "report.md").read_text()
    assert "| Spoiled |" in report and "| m1 | judge-a | 4 | 2 |" in report


def test_scores_without_their_dialogues_say_not_known():
    from esc_eval.analysis.results.leaderboard import build_leaderboard, leaderboard_markdown

    scores = pd.DataFrame(score_rows("d1", "m", [3] * 7) + score_rows("d2", "m", [2] * 7))
    table = build_leaderboard(scores, n_boot=0)
    assert table["n_spoiled"].isna().all() and "| m | judge-a | 2 | n/a |" in leaderboard_markdown(table)
    flagged = build_leaderboard(scores, n_boot=0, spoiled={"d1": True, "d2": False, "other": True})
    assert flagged.loc[0, "n_spoiled"] == 1
