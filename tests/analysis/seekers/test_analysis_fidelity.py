"""Is the simulated seeker like a person (analysis/seekers/fidelity*.py, esconv.py): features and
distances against hand-computed values, simulators that are and are not like people, bad inputs,
the command, the report's section and the speed at the paper's scale."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from typer.testing import CliRunner

from analysis_testdata import SHARED, dialogue_row, score_rows
from esc_eval.analysis.bench.fidelity import write_fake_humans, write_fake_simulated
from esc_eval.analysis.results.loaders import AnalysisInputError, load_dialogues
from esc_eval.analysis.seekers.esconv import HumanSeekers, read_human_seekers, sample_file
from esc_eval.analysis.seekers.fidelity import _boot_distances, _counts, compare_features
from esc_eval.analysis.seekers.fidelity_features import aligned_positions, dialogue_features
from esc_eval.analysis.seekers.fidelity_report import fidelity_card, seeker_fidelity
from esc_eval.cli.app import app
from esc_eval.sim.judging.distress_turns import seeker_runs

FAILED_ESCONV = SHARED / "data" / "esconv" / "FailedESConv.json"
HAND = ["Hi, I feel sad and lonely.", "Why do I feel so sad?", "I feel sad and lonely again.", "Maybe it is okay.",
        "Thanks, I feel better now."]


def _sim(rows: list[list[str]], role: str = "sim", strategy: str = "official", closed: bool = False) -> pd.DataFrame:
    """Simulated dialogue rows; closed: each ended by its seeker (else cut at the round cap, as runs are)."""
    end = {"termination_reason": "seeker_ended"} if closed else {}
    return pd.DataFrame([{**dialogue_row(f"{role}-{i}", "target", seeker=s, role_model=role), "strategy": strategy, **end}
                         for i, s in enumerate(rows)])


def _esconv(dialogues: list[list[tuple[str, str]]], before=4, after=3) -> list[dict]:
    return [{"experience_type": "Current Experience", "emotion_type": "anxiety", "problem_type": "job", "situation": "s",
             "survey_score": {"seeker": {"initial_emotion_intensity": str(before), "final_emotion_intensity": str(after)}},
             "dialog": [{"speaker": who, "annotation": {}, "content": text} for who, text in d]} for d in dialogues]


def test_rounds_are_aligned_from_the_first_to_the_last_seeker_turn():
    assert aligned_positions(5) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    assert aligned_positions(13) == [(0, 1), (3, 2), (6, 3), (9, 4), (12, 5)]  # floor(r x 12/4 + 0.5)
    assert aligned_positions(6) == [(0, 1), (1, 2), (3, 3), (4, 4), (5, 5)]  # 1.25 -> 1, 2.5 -> 3, 3.75 -> 4
    assert aligned_positions(3) == [(0, 1), (1, 3), (2, 5)]  # short: first at 1, last at 5, rounds between empty
    assert aligned_positions(1) == [(0, 1)] and aligned_positions(0) == []
    assert aligned_positions(13, align="first") == [(i, i + 1) for i in range(5)]
    with pytest.raises(AnalysisInputError, match="alignment 'middle'"):
        aligned_positions(5, align="middle")


def test_a_run_of_seeker_messages_is_one_seeker_turn():
    turns = [{"speaker": "seeker", "text": "hi"}, {"speaker": "seeker", "text": "are you there?"},
             {"speaker": "assistant", "text": "yes"}, {"speaker": "seeker", "text": "ok"}]
    assert seeker_runs(turns) == ["hi are you there?", "ok"]


def test_features_of_one_dialogue_by_hand():
    f = dialogue_features(_sim([HAND])).iloc[0]
    # words 6, 6, 6, 4, 5; "i" four times; one question; "thanks" in round 5 only
    assert f["words_per_turn"] == pytest.approx(27 / 5) and f["question_share"] == pytest.approx(1 / 5)
    assert f["first_person_share"] == pytest.approx(4 / 27)
    assert f["distinct_1"] == pytest.approx(100 * 17 / 27) and f["distinct_2"] == pytest.approx(100 * 16 / 22)
    assert f["repetition"] == pytest.approx(4 / 5)  # turns 1 and 3 share 4 of their 5 bigrams
    assert f["thanks_early"] == 0 and f["thanks_last"] == 1
    # negativity by round: sad/lonely +1, +1, +1, okay -1, better -1
    assert f["negativity_start"] == 1 and f["negativity_end"] == -1
    assert f["negativity_slope"] == pytest.approx(-0.6)  # sum((x-3)(y-0.2)) / sum((x-3)^2) = -6 / 10
    assert f["resolved_round"] == 4  # first negative round 1, first round after it with negativity < 0
    never = dialogue_features(_sim([["I am sad."] * 5])).iloc[0]
    assert never["resolved_round"] == 6 and never["repetition"] == pytest.approx(1.0)
    calm = dialogue_features(_sim([["Hello there."] * 5])).iloc[0]
    assert np.isnan(calm["resolved_round"])  # never negative: no resolution to time


def test_distance_shift_and_spread_by_hand():
    sim = pd.DataFrame({"dialogue_id": ["a", "b", "c"], "role_model": "r", "strategy": "s", "language": "en",
                        "words_per_turn": [1.0, 1.0, 1.0]})
    hum = pd.DataFrame({"dialogue_id": ["x", "y"], "language": "en", "words_per_turn": [0.0, 2.0]})
    feats, summary = compare_features(sim, hum, n_boot=0)
    r = feats.iloc[0]
    # W1: |F - G| is 0.5 on [0, 1) and on [1, 2) -> 1.0; people's sd = sqrt(2)
    assert r["distance"] == pytest.approx(1 / np.sqrt(2)) and r["shift"] == 0 and r["spread"] == 0
    assert r["ks"] == pytest.approx(0.5)  # the largest |F - G|: 0.5 on both steps
    assert r["direction"] == "n/a" and "n_boot=0" in r["note"]
    assert summary.iloc[0]["fidelity"] == pytest.approx(0.5)


def test_the_shifts_simultaneous_interval_is_welchs_and_needs_no_resamples():
    """Issue 53: the shift's percentile interval at the Bonferroni level (99.8%) was the extremes of a
    few hundred resamples, too narrow (people against other people: the shifts held 0 together in
    67-83% of replicates). Now Welch's t interval at that level, whatever n_boot is."""
    rng = np.random.default_rng(8)
    sim = pd.DataFrame({"dialogue_id": [f"s{i}" for i in range(25)], "role_model": "r", "strategy": "s", "language": "en",
                        "words_per_turn": rng.normal(20, 6, 25), "question_share": rng.uniform(0, 1, 25)})
    hum = pd.DataFrame({"dialogue_id": [f"h{i}" for i in range(79)], "language": "en",
                        "words_per_turn": rng.normal(20, 6, 79), "question_share": rng.uniform(0, 1, 79)})
    few, _ = compare_features(sim, hum, n_boot=50, seed=1)
    many, _ = compare_features(sim, hum, n_boot=2000, seed=2)
    named_at = 1 - 0.05 / (2 * 2)  # two features here
    for f in ("words_per_turn", "question_share"):
        x, y = sim[f].to_numpy(), hum[f].to_numpy()
        ci = stats.ttest_ind(x, y, equal_var=False).confidence_interval(confidence_level=named_at)
        for got in (few, many):
            r = got[got["feature"] == f].iloc[0]
            assert (r["shift_lo"], r["shift_hi"]) == pytest.approx((ci.low / y.std(ddof=1), ci.high / y.std(ddof=1)))


def test_the_vectorised_bootstrap_distance_is_scipys_on_each_resample():
    rng = np.random.default_rng(3)
    x, y = rng.normal(0, 1, 40).round(1), rng.normal(0.5, 2, 25).round(1)
    cx, cy = _counts(len(x), 7, rng), _counts(len(y), 7, rng)
    w1, ks = _boot_distances(x, cx, y, cy)
    assert np.allclose(w1, [stats.wasserstein_distance(x, y, u_weights=cx[b], v_weights=cy[b]) for b in range(7)])
    # KS of resample b is scipy's on the values repeated as often as drawn
    assert np.allclose(ks, [stats.ks_2samp(np.repeat(x, cx[b].astype(int)), np.repeat(y, cy[b].astype(int))).statistic
                            for b in range(7)])
    w1, ks = _boot_distances(x, np.ones((1, 40)), y, np.ones((1, 25)))
    assert np.allclose(w1, stats.wasserstein_distance(x, y)) and np.allclose(ks, stats.ks_2samp(x, y).statistic)
    assert (cx.sum(axis=1) == 40).all()  # each resample draws n dialogues


def _people(tmp_path: Path, n: int = 300) -> HumanSeekers:
    return read_human_seekers(write_fake_humans(tmp_path / "people.json", n, seed=5))


def test_a_simulator_too_long_that_resolves_in_round_one_is_named_so(tmp_path):
    people = _people(tmp_path)
    rng = np.random.default_rng(0)
    long = ("I have been feeling so anxious and overwhelmed about my job and my family and everything, I cannot "
            "sleep and I cry at night, it is all so hard and hopeless")
    fine = "Oh that is great advice, I feel so much better and relieved now, I am hopeful and calm about it"
    sim = _sim([[f"{long} ({rng.integers(1e6)})"] + [f"{fine} ({rng.integers(1e6)})"] * 4 for _ in range(120)],
               role="eager")
    result = seeker_fidelity(sim, people, n_boot=300)
    direction = result.features.set_index("feature")["direction"]
    assert "too long" in direction["words_per_turn"]
    assert "resolves too fast" in direction["resolved_round"]
    assert "cheers up faster than people" in direction["negativity_slope"]
    summary = result.summary.iloc[0]
    assert summary["fidelity_lo"] > 0.75 > 4 * summary["floor"] and "too long" in summary["directions"]
    card = fidelity_card(result)
    assert "Seeker fidelity of eager (official, en)" in card and "resolves too fast" in card


def _halves(tmp_path) -> tuple[HumanSeekers, list[list[str]]]:
    """400 people split in two: the first 200 as the people, the other 200 cut to their 5 aligned seeker
    turns, opening to closing (to be laid out as simulated dialogues their seekers closed)."""
    people = _people(tmp_path, 400)
    half_a, half_b = people.dialogues.iloc[:200], people.dialogues.iloc[200:]
    cut = []
    for _, d in half_b.iterrows():
        runs = seeker_runs(d["turns"])
        cut.append([runs[i] for i, _ in aligned_positions(len(runs))])
    return HumanSeekers(half_a.reset_index(drop=True), people.source, 200), cut


def test_a_simulator_drawn_from_the_people_is_not_named(tmp_path):
    """The people split in two halves; one half cut to 5 seeker turns (the aligned ones) and laid out
    as simulated dialogues (an opener, then seeker / assistant rounds): nothing to name."""
    humans, cut = _halves(tmp_path)
    sim = _sim(cut, role="drawn-from-people", closed=True)
    result = seeker_fidelity(sim, humans, n_boot=500)
    assert result.meta["align"] == "relative"  # closed by their seekers: read from the opening to the closing turn
    assert set(result.features["direction"]) == {"no clear difference"}, result.features[["feature", "direction"]]
    s = result.summary.iloc[0]
    assert s["directions"] == "" and s["fidelity_lo"] <= s["floor"]  # as far from these people as people are


def test_people_are_read_from_esconvs_layouts(tmp_path):
    path = tmp_path / "failed_layout.json"
    path.write_text(json.dumps(_esconv([[("speaker", "hi"), ("speaker", "anyone?"), ("listener", "yes, hello"),
                                         ("speaker", "i feel bad")]])), encoding="utf-8")
    h = read_human_seekers(path)
    d = h.dialogues.iloc[0]
    assert [t["speaker"] for t in d["turns"]] == ["seeker", "seeker", "assistant", "seeker"]
    assert d["initial_intensity"] == 4 and d["final_intensity"] == 3 and d["language"] == "en"
    sample = read_human_seekers(sample_file())
    assert len(sample.dialogues) == 16 and sample.dialogues["initial_intensity"].notna().all()
    readme = " ".join((sample_file().parent / "README.md").read_text().split())
    assert "this project's own writing" in readme and "It is **not** ESConv" in readme


@pytest.mark.skipif(not FAILED_ESCONV.exists(), reason=f"shared data {FAILED_ESCONV} is absent")
def test_failed_esconv_reads_whole():
    h = read_human_seekers(FAILED_ESCONV)
    assert len(h.dialogues) == 196 and h.n_rejected == 0 and set(h.dialogues["language"]) == {"en"}
    assert h.dialogues["final_intensity"].notna().sum() == 142  # 54 surveys hold no after


def _fails(args, out: Path) -> str:
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code != 0 and isinstance(res.exception, ValueError), res.output
    message = str(res.exception)
    assert "\n" not in message and not out.exists(), message
    return message


def test_bad_input_is_one_line_and_writes_nothing(tmp_path, make_run):
    run = make_run("run", dialogues=[dialogue_row("d1", "m1")])
    out = tmp_path / "out"
    cards = tmp_path / "cards.json"
    cards.write_text(json.dumps([{"id": "c1", "card": "A student worried about exams."}]), encoding="utf-8")
    assert "not ESConv's format" in _fails(["analysis", "fidelity", run, "--humans", cards, "-o", out], out)
    no_seeker = tmp_path / "no_seeker.json"
    no_seeker.write_text(json.dumps(_esconv([[("supporter", "hello?"), ("supporter", "anyone?")]])), encoding="utf-8")
    assert "no dialogue with a seeker turn" in _fails(["analysis", "fidelity", run, "--humans", no_seeker, "-o", out], out)
    assert "no such file" in _fails(["analysis", "fidelity", run, "--humans", tmp_path / "nope.json", "-o", out], out)
    empty = make_run("empty", dialogues=[dialogue_row("d2", "m1", status="failed")])
    humans = write_fake_humans(tmp_path / "people.json", 10)
    assert "no completed dialogue" in _fails(["analysis", "fidelity", empty, "--humans", humans, "-o", out,
                                              "--judge", "fake/judge"], out)
    assert not (empty / "distress").exists()
    assert "--align 'middle'" in _fails(["analysis", "fidelity", run, "--humans", humans, "--align", "middle",
                                         "-o", out], out)


def test_the_command_writes_the_comparison_and_the_judges_course_resumes(tmp_path):
    run = write_fake_simulated(tmp_path / "run", 24)
    humans = write_fake_humans(tmp_path / "people.json", 12)
    local = tmp_path / "distress.yaml"  # this process, no Ray: the pool's local executor
    local.write_text("execution: {executor: local}\n", encoding="utf-8")
    args = ["analysis", "fidelity", run, "--humans", humans, "--judge", "fake/judge", "--config", local, "--n-boot", "100",
            "--no-embedding"]  # the embedding has its own tests (tests/analysis/realism)
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    assert "| Judge's distress in round 1 (0-4) |" in res.output and "first round vs initial intensity" in res.output
    data = json.loads((run / "report" / "fidelity.json").read_text())
    assert {r["role_model"] for r in data["summary"]} == {"role-a", "role-b"}
    assert data["meta"]["judge"] == "fake/judge:distress:logprob" and len(data["judge_check"]) == 3
    n_turns = sum(len(seeker_runs(t)) for t in load_dialogues([run])["turns"])
    n_turns += sum(len(seeker_runs(t)) for t in read_human_seekers(humans).dialogues["turns"])
    rated = pd.read_parquet(run / "distress" / "scores")
    assert len(rated) == n_turns and (rated["parse_status"] == "ok").all()
    again = CliRunner().invoke(app, [str(a) for a in args])
    assert again.exit_code == 0, again.output
    assert len(pd.read_parquet(run / "distress" / "scores")) == n_turns  # resumed: nothing rated twice
    manifest = json.loads((run / "distress" / "manifest.json").read_text())
    assert manifest["distress"]["last"]["skipped_done"] == 24 + 12


def test_the_report_compares_with_people_and_says_when_no_human_scores_stand_beside_the_judge(tmp_path, make_run):
    rows = [dialogue_row(f"d{i}", f"m{i % 2}", card_id=f"c{i // 2}", seeker=HAND) for i in range(8)]
    scores = [r for i in range(8) for r in score_rows(f"d{i}", f"m{i % 2}", [2, 3, 2, 3, 2, 3, 2])]
    run = make_run("run", dialogues=rows, scores=scores)
    humans = write_fake_humans(tmp_path / "people.json", 20)
    res = CliRunner().invoke(app, ["report", str(run), "--n-boot", "50", "--human-seekers", str(humans)])
    assert res.exit_code == 0, res.output
    assert "No human scores beside judge judge-a" in res.output
    md = (run / "report" / "report.md").read_text()
    section = md.split("## Is the simulated seeker like a person?")[1].split("\n## ")[0]
    assert "| fake/role | zero_shot | en | 8 | 20 |" in section and "Words per seeker turn" in section
    board = md.split("## Leaderboard (Table 2 layout)")[1].split("\n## ")[0]
    assert "No human scores beside judge judge-a" in board
    assert "No human scores beside judge judge-a" in (run / "report" / "leaderboard.md").read_text()
    assert json.loads((run / "report" / "report.json").read_text())["seeker_fidelity"]["summary"]
    # a recalibrated judge has human scores beside it: no line
    cal = make_run("cal", dialogues=rows, scores=[{**s, "judge": "judge-a+cal:temperature"} for s in scores])
    res = CliRunner().invoke(app, ["leaderboard", str(cal), "--n-boot", "50"])
    assert res.exit_code == 0 and "No human scores" not in res.output
    assert "No human scores" not in (cal / "report" / "leaderboard.md").read_text()
    res = CliRunner().invoke(app, ["leaderboard", str(run), "--n-boot", "50"])
    assert "No human scores beside judge judge-a" in res.output
    res = CliRunner().invoke(app, ["leaderboard", str(run), "--n-boot", "50", "--by", "category"])
    assert res.exit_code == 0 and "No human scores beside judge judge-a" in res.output
    assert "No human scores beside judge judge-a" in (run / "report" / "leaderboard_by_category.md").read_text()


def test_the_calibration_tag_is_the_one_calibration_writes():
    from esc_eval.analysis.results.leaderboard import CALIBRATED_TAG
    from esc_eval.analysis.trust.calibration_runs import CAL_TAG

    assert CALIBRATED_TAG == CAL_TAG


def test_8500_simulated_against_1300_people_within_the_target(tmp_path):
    """The bound behind `esc-eval bench fidelity`'s figure: reading, features and the comparison with
    1,000 resamples, generous (the target is 30 s; this CPU takes about half of it)."""
    run = write_fake_simulated(tmp_path / "run", 8_500)
    humans = write_fake_humans(tmp_path / "people.json", 1_300)
    t0 = time.perf_counter()
    result = seeker_fidelity(load_dialogues([run]), read_human_seekers(humans))
    took = time.perf_counter() - t0
    assert result.meta["n_simulated"] == 8_500 and result.meta["n_human"] == 1_300
    assert took < 60, f"{took:.1f} s"


def test_the_floor_is_the_noise_of_a_comparison_of_the_same_sizes(tmp_path):
    """Few simulated dialogues sit further from the people by chance than many: the floor follows the
    comparison's sizes (resampled from the people), and a simulator drawn from the people stays within
    it at both sizes."""
    humans, cut = _halves(tmp_path)
    few = seeker_fidelity(_sim(cut[:16], role="few", closed=True), humans, n_boot=300).summary.iloc[0]
    many = seeker_fidelity(_sim(cut, role="many", closed=True), humans, n_boot=300).summary.iloc[0]
    assert (few["n_sim"], many["n_sim"]) == (16, 200)
    assert few["floor"] > 1.5 * many["floor"]  # KS noise grows as 1/sqrt(n): 16 vs 200 simulated
    assert few["fidelity_lo"] <= few["floor"] and many["fidelity_lo"] <= many["floor"]


def _as_run(turns: list[dict], rounds: int = 5) -> list[dict]:
    """A person's dialogue written the way a simulation is: the opener, their first `rounds` seeker turns
    (consecutive messages joined) and the supporter's replies, stopped there (cut, not closed)."""
    out = [{"speaker": "assistant", "text": "Hello, how can I help you today?"}]
    seen = 0
    for t in turns:
        if t["speaker"] == out[-1]["speaker"]:
            if len(out) > 1:
                out[-1] = {**out[-1], "text": out[-1]["text"] + " " + t["text"]}
            continue
        seen += t["speaker"] == "seeker"
        if seen > rounds:
            break
        out.append(dict(t))
    return out


@pytest.mark.parametrize("source", ["FailedESConv", "sample"])
def test_people_written_as_five_round_runs_are_not_told_from_people(source):
    """Half of the people cut to a 5-round run (status ok, stopped at the round cap as a run is) against
    the other half whole, with every default: nothing named (relative alignment had named "closes
    with thanks less than people": a person's goodbye set beside a cut; 95% intervals per feature
    had named a spread on the sample's 8 against 8)."""
    if source == "FailedESConv" and not FAILED_ESCONV.exists():
        pytest.skip(f"shared data not present at {FAILED_ESCONV}")
    people = read_human_seekers(FAILED_ESCONV if source == "FailedESConv" else sample_file())
    d = people.dialogues
    whole, cut = d.iloc[::2].reset_index(drop=True), d.iloc[1::2].reset_index(drop=True)
    runs = pd.DataFrame([{"dialogue_id": f"run-{i}", "role_model": "people-as-runs", "strategy": "official",
                          "language": r["language"], "turns": _as_run(r["turns"]), "status": "ok",
                          "termination_reason": "completed"} for i, r in cut.iterrows()])
    result = seeker_fidelity(runs, HumanSeekers(whole, people.source, len(whole)))
    assert result.meta["align"] == "first" and "round cap" in result.meta["align_reason"]
    named = result.features[result.features["direction"] != "no clear difference"]
    assert named.empty, named[["feature", "shift_lo", "shift_hi", "spread_lo", "spread_hi", "direction"]]
    s = result.summary.iloc[0]
    assert s["directions"] == "" and s["fidelity_lo"] <= s["floor"]
    assert "5 rounds, aligned 'first' (auto: the simulated dialogues stop at the round cap" in fidelity_card(result)


def test_auto_alignment_reads_an_ending_only_where_the_seeker_closed_the_dialogue():
    from esc_eval.analysis.seekers.fidelity_features import resolve_alignment

    cut, closed = _sim([HAND] * 2), _sim([HAND] * 2, closed=True)
    assert resolve_alignment("auto", cut)[0] == "first"
    assert resolve_alignment("auto", closed)[0] == "relative"
    assert resolve_alignment("auto", pd.concat([cut, closed]))[0] == "first"  # one cut is enough
    assert resolve_alignment("auto", cut.drop(columns="termination_reason"))[0] == "first"  # the release's JSON
    assert resolve_alignment("relative", cut) == ("relative", "as asked")
    with pytest.raises(AnalysisInputError, match="alignment 'end'"):
        resolve_alignment("end", cut)
