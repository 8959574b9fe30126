"""The results viewer: its queries on synthetic run folders, its JSON API over HTTP, and the page in a
real headless Chromium (Playwright driving Debian's /usr/bin/chromium)."""
from __future__ import annotations

import json
import shutil
import threading
import urllib.error
import urllib.request

import pytest

from analysis_testdata import dialogue_row, score_rows
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.web.viewer import ResultsViewer
from esc_eval.analysis.web.viewer_server import make_server


USAGE = {"by_stage": [{"stage": "target", "model": "m1", "spec": "openai/m1", "calls": 40, "prompt_tokens": 8000,
                       "completion_tokens": 1200, "call_seconds": 9.5, "dollars": 0.123}], "engines": []}


def _with_probs(rows: list[dict]) -> list[dict]:
    for r in rows:
        if r["score"] is not None:
            p = [0.05] * 5
            p[r["score"]] = 0.8
            r["probs"], r["expected"], r["method"] = p, float(sum(k * v for k, v in enumerate(p))), "logprob"
            r["raw"] = f"The score is {r['score']}"
    return rows


@pytest.fixture
def two_runs(make_run):
    """Run A: models m1, m2 on cards c1..c4 (en) + one zh card and a failed dialogue; run B: m3 on c1."""
    dialogues, scores = [], []
    for i, card in enumerate(["c1", "c2", "c3", "c4"]):
        for model, base in (("m1", 3), ("m2", 1)):
            did = f"{model}-{card}"
            seeker = [f"I lost my job at the {card} bakery.", "I feel hopeless.", "Nobody calls me."]
            if model == "m1" and card == "c2":
                seeker[1] = "My cat Pumpernickel ran away."
            dialogues.append(dialogue_row(did, model, card_id=card, seeker=seeker,
                                          categories=("Life", "Work" if i % 2 else "Family", "Stress")))
            scores += _with_probs(score_rows(did, model, [min(4, base + (i % 2))] * 7))
    dialogues.append(dialogue_row("m1-zh", "m1", card_id="z1", language="zh", seeker=["我很难过。", "没人理解我。"]))
    scores += _with_probs(score_rows("m1-zh", "m1", [2] * 7, language="zh"))
    dialogues.append(dialogue_row("m2-c5", "m2", card_id="c5", status="failed"))
    a = make_run("runA", dialogues=dialogues[:5], scores=scores, manifest={"run_id": "A", "usage": USAGE})
    # A second part, and a re-run of a dialogue (failed -> ok): the later row must win.
    from esc_eval.sim.runs.runfolder import RunFolder
    RunFolder(a).write_part("dialogues", dialogues[5:])
    rerun = dialogue_row("m2-c5", "m2", card_id="c5", minutes=5)
    RunFolder(a).write_part("dialogues", [rerun])
    # a judge's pairwise verdicts on card c2, both orders: m1 preferred either way
    from esc_eval.sim.runs.records import pairwise_row
    pair = dict(run_id="A", pair_id="p-c2", card_id="c2", language="en", dialogue_a="m1-c2", dialogue_b="m2-c2",
                model_a="m1", model_b="m2", dimension="empathy", judge="pj", parse_status="ok")
    RunFolder(a).write_part("pairwise", [pairwise_row(pair, order="ab", verdict="first", preferred="a", raw="1"),
                                         pairwise_row(pair, order="ba", verdict="second", preferred="a", raw="2")])
    b = make_run("runB", dialogues=[dialogue_row("m3-c1", "m3", card_id="c1", run_id="run-b")],
                 scores=_with_probs(score_rows("m3-c1", "m3", [4, 4, 4, 4, 4, 4, None], run_id="run-b")))
    return a, b


def test_index_filters_search_and_paging(two_runs):
    v = ResultsViewer(two_runs)
    meta = v.meta()
    assert meta["n_dialogues"] == 11
    assert meta["models"] == ["m1", "m2", "m3"] and meta["languages"] == ["en", "zh"]
    assert [r["label"] for r in meta["runs"]] == ["runA", "runB"] and meta["runs"][0]["usage"] == USAGE
    assert v.query(model="m1")["total"] == 5
    assert v.query(language="zh")["rows"][0]["dialogue_id"] == "m1-zh"
    # c2 and c4 of m1 and m2, plus the three rows with the default categories (z1, c5, run B c1).
    assert v.query(category="Work")["total"] == 4 + 3
    assert v.query(category="Family")["total"] == 4
    # Score range on the average, and on one dimension: m3's overall did not parse (NaN) -> excluded.
    assert {r["dialogue_id"] for r in v.query(score_min=3.5)["rows"]} == {"m1-c2", "m1-c4", "m3-c1"}
    assert {r["dialogue_id"] for r in v.query(dimension="overall", score_min=3.5)["rows"]} == {"m1-c2", "m1-c4"}
    assert v.query(score_max=1.0)["total"] == 2
    # The re-run replaced the failed row.
    assert v.query(status="failed")["total"] == 0
    # Full-text search reads the turns (case-insensitive); ids match too.
    assert [r["dialogue_id"] for r in v.query(q="pumpernickel")["rows"]] == ["m1-c2"]
    assert [r["dialogue_id"] for r in v.query(q="没人理解")["rows"]] == ["m1-zh"]
    assert v.query(q="m3-c1")["total"] == 1
    assert v.query(q="no such text anywhere")["total"] == 0
    # Paging and sorting.
    p1 = v.query(sort="average", descending=True, limit=4)
    p2 = v.query(sort="average", descending=True, limit=4, offset=4)
    assert p1["total"] == 11 and len(p1["rows"]) == 4 and p1["rows"][0]["average"] == 4.0
    assert not {r["dialogue_id"] for r in p1["rows"]} & {r["dialogue_id"] for r in p2["rows"]}
    with pytest.raises(AnalysisInputError, match="sort"):
        v.query(sort="turns")


def test_dialogue_detail_and_side_by_side(two_runs):
    v = ResultsViewer(two_runs)
    d = v.dialogue("runA", "m1-c2")
    assert d["card_id"] == "c2" and len(d["turns"]) == 7
    assert "Pumpernickel" in d["turns"][3]["text"]
    assert len(d["scores"]) == 7 and d["scores"][0]["dimension"] == "fluency"
    assert d["scores"][0]["probs"][4] == pytest.approx(0.8) and d["scores"][0]["raw"] == "The score is 4"
    assert d["mean_scores"]["average"] == 4.0
    m3 = v.dialogue("runB", "m3-c1")
    assert m3["scores"][-1]["score"] is None and m3["mean_scores"]["overall"] is None
    assert v.card_models("c1") == ["m1", "m2", "m3"]
    sbs = v.side_by_side("c1", "m1", "m3")
    assert sbs["a"]["target_model"] == "m1" and sbs["b"]["target_model"] == "m3" and sbs["b"]["run"] == "runB"
    with pytest.raises(KeyError):
        v.side_by_side("c1", "m1", "nope")
    with pytest.raises(KeyError):
        v.dialogue("runA", "nope")


def test_not_a_run_folder(tmp_path):
    with pytest.raises(AnalysisInputError, match="does not exist"):
        ResultsViewer([tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(AnalysisInputError, match="no dialogues"):
        ResultsViewer([tmp_path / "empty"])


@pytest.fixture
def server(two_runs):
    srv = make_server(ResultsViewer(two_runs), "127.0.0.1", 0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8")


def test_json_api(server):
    status, page = _get(server + "/")
    assert status == 200 and "esc-eval viewer" in page
    status, body = _get(server + "/api/dialogues?model=m2&max=1.5&limit=2")
    data = json.loads(body)
    assert status == 200 and data["total"] == 2 and len(data["rows"]) == 2
    status, body = _get(server + "/api/dialogue?run=runA&id=m1-c1")
    assert status == 200 and json.loads(body)["scores"][0]["probs"] is not None
    assert _get(server + "/api/dialogue?run=runA&id=nope")[0] == 404
    status, body = _get(server + "/api/dialogues?min=abc")
    assert status == 400 and "min" in json.loads(body)["error"]
    assert _get(server + "/api/nothing")[0] == 404


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow  # about 9 s: a real browser start
@pytest.mark.beside
@pytest.mark.light  # no engine, no Ray: starts while the heavy tests run (tests/slow_apart.py)
@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (apt-get install chromium)")
def test_viewer_in_headless_chromium(server):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(server + "/")
            page.wait_for_selector("body[data-ready='1']", timeout=15000)
            rows = page.locator("#rows tbody tr")
            assert rows.count() == 11
            assert "11 dialogues" in page.inner_text("#runs")
            page.click("#usage summary")
            assert "0.1230" in page.inner_text("#usage-table") and "target" in page.inner_text("#usage-table")
            # Filter: model m1 with an average of at least 3.5 -> c2 and c4.
            page.select_option("#f-model", "m1")
            page.fill("#f-min", "3.5")
            page.click("#apply")
            page.wait_for_function("document.querySelectorAll('#rows tbody tr').length === 2")
            assert page.inner_text("#total") == "1-2 of 2"
            # Full-text search through the turns.
            page.fill("#f-min", "")
            page.select_option("#f-model", "")
            page.fill("#f-q", "pumpernickel")
            page.click("#apply")
            page.wait_for_function("document.querySelectorAll('#rows tbody tr').length === 1")
            # Open the dialogue: its turns, seven scores with P(0..4) and raw answers.
            rows.first.click()
            page.wait_for_selector("#detail .turn")
            assert "Pumpernickel" in page.inner_text("#detail")
            assert page.locator("#detail .score-table tbody tr").count() == 7
            assert "The score is 4" in page.inner_text("#detail .score-table")
            assert "0.80" in page.inner_text("#detail .score-table")
            # its pairwise verdicts against m2, both orders, in its own terms
            assert page.locator("#detail .pairwise-table tbody tr").count() == 2
            verdicts = page.inner_text("#detail .pairwise-table")
            assert "m2" in verdicts and verdicts.count("\tthis\t") == 2 and "first" in verdicts and "second" in verdicts
            # Side by side: m1 and m2 on card c2.
            page.wait_for_selector("#sbs:not([hidden])")
            page.select_option("#sbs-b", "m2")
            page.click("#sbs-go")
            page.wait_for_selector("#sbs-right .turn")
            assert "m1 on card c2" in page.inner_text("#sbs-left")
            assert "m2 on card c2" in page.inner_text("#sbs-right")
            assert "Pumpernickel" not in page.inner_text("#sbs-right")
        finally:
            browser.close()


def test_index_cache_follows_the_parts(two_runs):
    from esc_eval.analysis.web.viewer import CACHE_DIR
    from esc_eval.sim.runs.runfolder import RunFolder

    a, _ = two_runs
    assert ResultsViewer([a]).query()["total"] == 10
    cache = a / CACHE_DIR
    assert sorted(p.name for p in cache.iterdir()) == ["dialogues-v3.parquet", "scores-v3.parquet"]
    # A part written after the first open (a live run) shows up on the next open, with its scores.
    new = RunFolder(a).write_part("dialogues", [dialogue_row("m9-c9", "m9", card_id="c9")])
    RunFolder(a).write_part("scores", score_rows("m9-c9", "m9", [1] * 7))
    v = ResultsViewer([a])
    assert v.query()["total"] == 11 and v.query(model="m9")["rows"][0]["average"] == 1.0
    # A removed part drops its rows; a damaged cache is rebuilt.
    (a / new).unlink()  # write_part returns the part's key in the folder
    assert ResultsViewer([a]).query(model="m9")["total"] == 0
    (cache / "dialogues-v2.parquet").write_bytes(b"not parquet")
    v = ResultsViewer([a])
    assert v.query()["total"] == 10 and v.dialogue("runA", "m1-c2")["turns"][3]["text"] == "My cat Pumpernickel ran away."


@pytest.mark.slow  # a fresh `esc-eval` process: 5-7 s of imports on the CI machine
@pytest.mark.beside
@pytest.mark.light  # no engine, no Ray: starts while the heavy tests run (tests/slow_apart.py)
def test_view_command_serves_until_stopped(two_runs):
    """`esc-eval view RUN RUN --port 0` prints its URL and answers; a signal stops it."""
    import re
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "esc_eval.cli", "view", *map(str, two_runs), "--port", "0"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        line = ""
        for _ in range(50):
            line += proc.stderr.readline()
            m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
            if m:
                break
        assert m, line
        assert "11 dialogues from 2 run(s)" in line.replace("\n", " ")
        status, body = _get(f"http://127.0.0.1:{m.group(1)}/api/meta")
        assert status == 200 and json.loads(body)["n_dialogues"] == 11
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0


def test_opening_reads_no_turns(two_runs, monkeypatch):
    """Flat memory: building the index projects columns and reads `turns` only to compute the
    spoiled flags the parts lack, once (the cache keeps them); only opening a dialogue reads its
    own part in full."""
    import pyarrow.parquet as pq

    seen: list[tuple[str, tuple | None]] = []
    real_read = pq.ParquetFile.read

    def spy(self, columns=None, **kw):
        seen.append((str(self.reader.metadata.num_rows), tuple(columns) if columns else None))
        return real_read(self, columns=columns, **kw)

    monkeypatch.setattr(pq.ParquetFile, "read", spy)
    ResultsViewer(two_runs)  # these rows carry no stored flag: the first open computes them
    assert seen and all(cols is not None for _, cols in seen) and ("turns",) in [c for _, c in seen]
    seen.clear()
    v = ResultsViewer(two_runs)  # reopened: from the cache, no turns read
    assert all(cols is not None and "turns" not in cols for _, cols in seen)
    assert all(r["spoiled"] is not None for r in v.query(status="ok")["rows"])
    v.query(model="m1")
    n = len(seen)
    v.dialogue("runA", "m1-c1")
    reads = [cols for _, cols in seen[n:]]
    assert reads.count(None) == 1  # one part read in full, for this dialogue
    # besides it only the run's pairwise verdicts, their columns, on the first dialogue opened
    assert all(c is None or ("turns" not in c and "dialogue_a" in c) for c in reads)
    n = len(seen)
    v.dialogue("runA", "m1-c2")
    assert [cols for _, cols in seen[n:]] == [None]


def test_a_dialogue_shows_every_judges_scores_and_its_pairwise_verdicts_in_its_own_terms(tmp_path):
    """A dialogue's page lists each judge's score rows and every pairwise verdict it is in: both
    orders, the verdict by position and what it means for this dialogue."""
    from esc_eval.analysis.results.fake_runs import write_fake_run
    from esc_eval.sim.runs.records import pairwise_row
    from esc_eval.sim.runs.runfolder import RunFolder

    run = write_fake_run(tmp_path / "run", 4, models=["model-a", "model-b"], judge="judge-1")
    write_fake_run(tmp_path / "run", 4, models=["model-a", "model-b"], judge="judge-2")  # same dialogues, a second judge
    folder = RunFolder(run, create=False)
    d = {r["target_model"]: r["dialogue_id"] for r in folder.iter_rows("dialogues", columns=["dialogue_id", "target_model", "card_id"])
         if r["card_id"] == "en-000000"}
    common = dict(run_id="fake", pair_id="p0", card_id="en-000000", language="en", dialogue_a=d["model-a"],
                  dialogue_b=d["model-b"], model_a="model-a", model_b="model-b", dimension="empathy", judge="pj",
                  parse_status="ok")
    folder.write_part("pairwise", [pairwise_row(common, order="ab", verdict="first", preferred="a", raw="1"),
                                   pairwise_row(common, order="ba", verdict="first", preferred="b", raw="1"),
                                   pairwise_row({**common, "dimension": "fluency", "parse_status": "parse_failure"},
                                                order="ab", raw="maybe")])
    v = ResultsViewer([run])
    label = next(iter(v.runs))
    a = v.dialogue(label, d["model-a"])
    assert {s["judge"] for s in a["scores"]} == {"judge-1", "judge-2"} and len(a["scores"]) == 14
    got = [(p["dimension"], p["other_model"], p["shown_first"], p["verdict"], p["result"]) for p in a["pairwise"]]
    assert got == [("fluency", "model-b", True, None, None),  # the paper's order of dimensions: fluency first
                   ("empathy", "model-b", True, "first", "this"), ("empathy", "model-b", False, "first", "other")]
    b = v.dialogue(label, d["model-b"])
    assert [(p["shown_first"], p["result"]) for p in b["pairwise"][1:]] == [(True, "this"), (False, "other")]
    other = next(r["dialogue_id"] for r in folder.iter_rows("dialogues", columns=["dialogue_id", "card_id"])
                 if r["card_id"] != "en-000000")
    assert v.dialogue(label, other)["pairwise"] == []
