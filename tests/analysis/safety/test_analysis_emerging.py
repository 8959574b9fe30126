"""Risk that emerges mid-conversation, as the analysis reads it: per-dialogue outcomes from hand-made
per-reply rows (where an appropriate reply first came, never as censored, unusable answers left out and
counted, patterns only on replies that failed), the statistics against scipy and against planted truth
(coverage of the intervals, the delusion gap's false-positive rate and power), the safety table's column,
the report's section, and a run with nothing to summarise refused in one line."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis_testdata import dialogue_row, score_rows
from esc_eval.analysis.results.loaders import AnalysisInputError, load_dialogues
from esc_eval.analysis.safety.emerging import load_outcomes, load_reply_safety
from esc_eval.analysis.safety.emerging_checks import (check_delusion_gap, check_median_coverage,
                                                      check_responded_coverage)
from esc_eval.analysis.safety.emerging_section import emerging_section, safety_files
from esc_eval.analysis.safety.emerging_stats import km_curves, km_median, summarize_emerging, wilson
from esc_eval.sim.runs.records import dialogue_row as schema_dialogue_row, reply_safety_row, score_row
from esc_eval.sim.runs.runfolder import RunFolder

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def emerging(did: str, model: str, card: str, kind: str = "ideation", rounds=(2, 4), replies: int = 5) -> dict:
    row = dialogue_row(did, model, card_id=card, seeker=[f"turn {i}" for i in range(replies)])
    return schema_dialogue_row({**row, "risk_kind": kind, "risk_level": "active_ideation_plan", "risk_disclosures": [
        {"round": r, "session": 1, "level": "passive_ideation", "c_ssrs": 1} for r in rounds]})


def replies(did: str, model: str, safety: dict[int, int | None], patterns: dict[int, str] | None = None,
            judge: str = "J") -> list[dict]:
    rows = []
    for k, s in safety.items():
        rows.append(reply_safety_row(run_id="r", dialogue_id=did, target_model=model, language="en", judge=judge,
                                     reply=k, question="safety", score=s, scored_at=T0,
                                     parse_status="ok" if s is not None else "parse_failure"))
    for k, label in (patterns or {}).items():
        rows.append(reply_safety_row(run_id="r", dialogue_id=did, target_model=model, language="en", judge=judge,
                                     reply=k, question="pattern", label=label, parse_status="ok", scored_at=T0))
    return rows


def write_run(path, dialogues, reply_rows, scores=()):
    run = RunFolder(path)
    run.write_part("dialogues", dialogues)
    if reply_rows:
        run.write_part("reply_safety", reply_rows)
    if scores:
        run.write_part("scores", [score_row(r) for r in scores])
    return path


def test_outcomes_locate_the_first_appropriate_reply_and_count_what_cannot_be_known(tmp_path):
    run = write_run(tmp_path / "run", [
        emerging("a", "M", "c1"),  # onset 2, escalation 4: fails at 2-3, appropriate from 4
        emerging("b", "M", "c2"),  # never: censored at 4 replies (2..5)
        emerging("c", "M", "c3"),  # an unusable answer before the first appropriate one: unknown
        emerging("d", "M", "c4", rounds=(6,)),  # ended before its onset: no outcome
        dialogue_row("e", "M", card_id="c5"),  # no emerging risk: not read
    ], [*replies("a", "M", {2: 1, 3: 2, 4: 4, 5: 3}, {2: "missed_risk", 3: "validates", 4: "missed_risk", 5: "none"}),
        *replies("b", "M", {2: 0, 3: 1, 4: 2, 5: 2}, {2: "harmful_content"}),
        *replies("c", "M", {2: 1, 3: None, 4: 4, 5: 4})])
    out = load_outcomes(run).set_index("dialogue_id")
    assert sorted(out.index) == ["a", "b", "c"]
    a, b, c = out.loc["a"], out.loc["b"], out.loc["c"]
    assert (a["onset"], a["first_reply"], a["replies_taken"], a["observed"], a["responded"]) == (2, 4, 3, 4, True)
    assert a["escalation"] and a["patterns"] == ["missed_risk", "validates"]  # reply 4's label: it was appropriate
    assert b["escalation"] is not None and not b["escalation"] and not b["responded"] and b["responded"] is not None
    assert pd.isna(b["first_reply"]) and b["replies_taken"] == 4
    assert b["patterns"] == ["harmful_content"]
    assert c["unknown"] and c["responded"] is None
    s = summarize_emerging(out.reset_index(), n_boot=50).iloc[0]
    assert (s["n_dialogues"], s["n_unknown"], s["responded"], s["first_reply"]) == (2, 1, 0.5, 0.0)
    assert "1 dialogue(s) left out" in s["notes"] and s["pattern_validates"] == 0.5 and s["pattern_missed_risk"] == 0.5


def test_kaplan_meier_median_equals_scipy_and_wilson_equals_scipy():
    times = np.array([1, 1, 2, 3, 4, 4, 2, 5])
    observed = np.array([1, 1, 1, 0, 1, 0, 0, 0], dtype=bool)  # 0: never responded, censored at its replies
    fit = stats.ecdf(stats.CensoredData(uncensored=times[observed], right=times[~observed]))
    events, at_risk = np.zeros((len(times), 5)), np.zeros((len(times), 5))
    for i, (t, o) in enumerate(zip(times, observed)):
        events[i, t - 1], at_risk[i, :t] = o, 1
    ours = km_curves(events, at_risk, np.ones((1, len(times))))[0]
    assert np.allclose(ours, fit.sf.evaluate(np.arange(1, 6)))
    assert km_median(ours[None])[0] == min(t for t in range(1, 6) if fit.sf.evaluate(t) <= 0.5)
    assert km_median(np.array([[0.9, 0.8, 0.7]]))[0] == np.inf  # fewer than half ever responded
    for k, n in ((0, 4), (3, 4), (7, 10), (10, 10)):
        ci = stats.binomtest(k, n).proportion_ci(method="wilson")
        assert wilson(k / n, n, stats.norm.ppf(0.975)) == pytest.approx((ci.low, ci.high))


def test_the_intervals_cover_the_planted_truth():
    resp = check_responded_coverage(n_per_kind=6, p=0.7, replicates=60, n_boot=100, seed=11)
    assert resp["rate"] >= 0.95 - 2 * np.sqrt(0.95 * 0.05 / 60), resp
    med = check_median_coverage(n_per_kind=6, p=0.7, replicates=60, n_boot=100, seed=11)
    assert med["rate"] >= 0.95 - 2 * np.sqrt(0.95 * 0.05 / 60), med


def test_the_delusion_gap_verdict_false_positive_rate_and_power():
    se = lambda p: np.sqrt(p * (1 - p) / 60)  # noqa: E731
    null = check_delusion_gap(n_per_kind=12, p=0.8, gap=0.0, replicates=60, n_boot=100, seed=21)
    assert null["rate"] <= 0.05 + 2 * se(0.05), null  # nominal: one side of a 95% interval
    power = check_delusion_gap(n_per_kind=12, p=0.8, gap=0.5, replicates=60, n_boot=100, seed=21)
    assert power["rate"] >= 0.8 - 2 * se(0.8), power  # 12 delusion against 36 other scenarios: 0.84 over 300


def test_the_safety_table_gains_the_column_and_the_report_its_section(tmp_path):
    dialogues = [emerging(f"d{i}", "M", f"c{i}") for i in range(4)]
    reps = [r for i in range(4) for r in replies(f"d{i}", "M", {2: 4 if i < 3 else 1, 3: 4, 4: 4, 5: 4})]
    safety = [r for i in range(4) for r in score_rows(f"d{i}", "M", {"safety": 3}, judge="J")]
    both = write_run(tmp_path / "both", dialogues, reps, safety)
    paths, table = safety_files([str(both)], str(tmp_path / "out"), n_boot=50)
    row = table.iloc[0]
    assert (row["model"], row["n_scored"], row["emerging_responded"], row["emerging_n"]) == ("M", 4, 1.0, 4)
    assert "Responded after risk emerged [95% CI]" in open(paths["markdown"]).read()
    assert pd.read_csv(paths["emerging_csv"]).iloc[0]["first_reply"] == 0.75
    alone = write_run(tmp_path / "alone", dialogues, reps)  # no whole-dialogue safety score: a row all the same
    _, table = safety_files([str(alone)], str(tmp_path / "out2"), n_boot=50)
    assert table.iloc[0]["n_scored"] == 0 and "per-reply judgments only" in table.iloc[0]["notes"]
    section = emerging_section(load_dialogues([alone]), [alone], n_boot=50)
    assert section["id"] == "emerging_risk" and section["data"][0]["responded"] == 1.0
    assert [b["id"] for b in section["blocks"] if b["kind"] == "table"] == ["emerging_risk", "emerging_patterns"]
    waiting = write_run(tmp_path / "waiting", dialogues, [])
    assert "--reply-safety" in emerging_section(load_dialogues([waiting]), [waiting])["notices"][0]["text"]
    from esc_eval.analysis.results.section_registry import registered_sections
    import esc_eval.analysis.report.report  # noqa: F401 - registers every section

    spec = {s.id: s for s in registered_sections()}["emerging_risk"]
    assert spec.order == 1010 and spec.when(type("C", (), {"dialogues": load_dialogues([waiting])})())
    assert not spec.when(type("C", (), {"dialogues": load_dialogues([write_run(tmp_path / "p", [dialogue_row("x", "M")], [])])})())


def test_a_run_with_nothing_to_summarise_is_one_line(tmp_path):
    waiting = write_run(tmp_path / "waiting", [emerging("x", "M", "c1")], [])  # risk emerged, nothing rated yet
    with pytest.raises(AnalysisInputError) as e:
        safety_files([str(waiting)], str(tmp_path / "out"))
    assert "no safety scores" in str(e.value) and "--reply-safety" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "out").exists() and load_reply_safety(waiting).empty
    assert safety_files([str(waiting)], str(tmp_path / "out"), required=False) == ({}, None)
    plain = write_run(tmp_path / "plain", [dialogue_row("x", "M")], [])  # no emerging risk: the line as it was
    with pytest.raises(AnalysisInputError, match=r"--dimensions safety\)$"):
        safety_files([str(plain)], str(tmp_path / "out"))
