"""The length-bias audit: a judge that rewards length is caught (its within-model slope, near the
planted one) and the leaderboard with length held fixed gives back the true order that length had
turned over; a judge that does not is not flagged and its order stands. The closed-form fit
matches numpy's least squares with model dummies; words are counted per script; the CLI writes
Markdown and JSON, and refuses an unknown judge before writing."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from typer.testing import CliRunner

from analysis_testdata import dialogue_row, make_turns
from esc_eval.analysis.results.loaders import AnalysisInputError, load_dialogues, load_scores
from esc_eval.analysis.ranking.length_bias import count_words, length_audit, length_frame, words_per_turn
from esc_eval.cli.app import app
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

QUALITY = {"m-short": 2.0, "m-mid": 1.6, "m-long": 1.2}  # the true order: short > mid > long
LENGTH = {"m-short": 40.0, "m-mid": 80.0, "m-long": 140.0}  # mean words per turn
BETA = 0.012  # score points per word the judge adds: 30 x25-points per 100 words


def _frame(beta: float, n: int = 150, seed: int = 0) -> pd.DataFrame:
    """Average scores = quality + beta x words per turn + noise (0-4, continuous), one judge."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in QUALITY:
        x = LENGTH[m] + rng.normal(0, 25, n)
        y = np.clip(QUALITY[m] + beta * x + rng.normal(0, 0.4, n), 0, 4)
        rows += [{"language": "en", "judge": "j", "model": m, "dialogue_id": f"{m}-{i}", "dimension": "average",
                  "score": float(y[i]), "words_per_turn": float(x[i])} for i in range(n)]
    return pd.DataFrame(rows)


def test_a_judge_that_rewards_length_is_caught_and_the_fixed_length_board_recovers_the_true_order():
    assoc, adjusted = length_audit(_frame(BETA), n_boot=400, seed=1)
    a = assoc.iloc[0]
    assert a["detected"] and a["slope_within_lo"] > 0
    assert a["slope_within_lo"] < 100 * 25 * BETA < a["slope_within_hi"]  # the planted 30 per 100 words
    assert a["rho"] > 0.3 and a["rho_lo"] > 0
    by = adjusted.set_index("model")
    # length turned the order over: the longest model tops the raw board ...
    assert by["raw_rank"].to_dict() == {"m-long": 1.0, "m-mid": 2.0, "m-short": 3.0}
    # ... and with length held fixed the true order comes back
    assert by["adjusted_rank"].to_dict() == {"m-short": 1.0, "m-mid": 2.0, "m-long": 3.0}
    assert by["rank_change"].to_dict() == {"m-short": 2.0, "m-mid": 0.0, "m-long": -2.0}
    assert (by["adjusted_lo"] <= by["adjusted"]).all() and (by["adjusted"] <= by["adjusted_hi"]).all()
    # the adjusted means at the overall mean length: quality + beta x mean length (x25), up to noise
    xbar = np.mean(list(LENGTH.values()))
    for m, q in QUALITY.items():
        assert by.loc[m, "adjusted"] == pytest.approx(25 * (q + BETA * xbar), abs=2.5)


def test_a_judge_that_ignores_length_is_not_flagged_and_its_order_stands():
    assoc, adjusted = length_audit(_frame(0.0), n_boot=400, seed=1)
    a = assoc.iloc[0]
    assert not a["detected"] and a["slope_within_lo"] < 0 < a["slope_within_hi"]
    by = adjusted.set_index("model")
    assert by["raw_rank"].to_dict() == by["adjusted_rank"].to_dict() == {"m-short": 1.0, "m-mid": 2.0, "m-long": 3.0}
    assert (by["rank_change"] == 0).all()


def test_the_closed_form_fit_is_least_squares_with_model_dummies_and_spearman_is_scipys():
    f = _frame(BETA, n=40, seed=3)
    assoc, adjusted = length_audit(f, n_boot=0)
    models = sorted(f["model"].unique())
    design = np.column_stack([(f["model"] == m).to_numpy(float) for m in models] + [f["words_per_turn"]])
    coef = np.linalg.lstsq(design, f["score"].to_numpy(), rcond=None)[0]
    a = assoc.iloc[0]
    assert a["slope_within"] == pytest.approx(coef[-1] * 100 * 25)
    assert a["slope"] == pytest.approx(stats.linregress(f["words_per_turn"], f["score"]).slope * 100 * 25)
    assert a["rho"] == pytest.approx(stats.spearmanr(f["words_per_turn"], f["score"]).statistic)
    xbar = f["words_per_turn"].mean()
    fitted = {m: 25 * (coef[i] + coef[-1] * xbar) for i, m in enumerate(models)}
    assert adjusted.set_index("model")["adjusted"].to_dict() == pytest.approx(fitted)
    assert np.isnan(a["slope_within_lo"]) and "n_boot=0" in a["note"]


def test_words_are_counted_per_script_and_only_the_targets_turns_count():
    assert count_words("I hear you, it's hard - really hard.") == 7  # the lone dash is no word
    assert count_words("我很难过 today") == 5  # each Han character a word, then one English word
    d = pd.DataFrame({"dialogue_id": ["d"], "turns": [make_turns(["one two three four five six"], ["a b c d"])]})
    # the greeting "Hello, I'm your personal assistant." (5 words) and the answer (4): 4.5 per turn
    assert words_per_turn(d).to_dict() == {"d": 4.5}


def _run(make_run, beta: float, n: int = 30, seed: int = 0):
    """Two models; the judge's integer scores rise with the target's answer length by beta per word."""
    rng = np.random.default_rng(seed)
    dialogues, scores = [], []
    for model, base in (("m1", 1.0), ("m2", 1.5)):
        for i in range(n):
            did = f"{model}-{i}"
            words = int(rng.integers(5, 60))
            answer = " ".join(["word"] * words)
            dialogues.append({**dialogue_row(did, model, card_id=f"c{i}"),
                              "turns": make_turns(["I feel low.", "Work is hard."], [answer, answer])})
            for dim in DIMENSION_NAMES:
                score = int(np.clip(round(base + beta * words + rng.normal(0, 0.5)), 0, 4))
                scores.append({"run_id": "run-a", "dialogue_id": did, "target_model": model, "language": "en",
                               "dimension": dim, "score": score, "probs": None, "expected": None, "raw": str(score),
                               "parse_status": "ok", "judge": "judge-a", "method": "generate", "parser": "strict",
                               "error": None, "prompt_tokens": 10, "latency_s": 0.1,
                               "scored_at": dialogue_row(did, model)["started_at"]})
    return make_run("run", dialogues=dialogues, scores=scores)


def test_length_frame_joins_scores_with_the_dialogues_lengths_and_refuses_scores_without_turns(make_run):
    run = _run(make_run, 0.04)
    frame = length_frame(load_scores([run]), load_dialogues([run]))
    assert set(frame["dimension"]) == {*DIMENSION_NAMES, "average"}
    assert len(frame) == 60 * 8
    avg = frame[frame["dimension"] == "average"].set_index("dialogue_id")
    one = load_scores([run]).query("dialogue_id == 'm1-0'")["score"].mean()
    assert avg.loc["m1-0", "score"] == pytest.approx(one)
    with pytest.raises(AnalysisInputError, match="has the target's turns"):
        length_frame(load_scores([run]), load_dialogues([run]).iloc[0:0])


def test_the_cli_writes_markdown_and_json_and_refuses_an_unknown_judge(make_run, tmp_path):
    run = _run(make_run, 0.04)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["analysis", "length-bias", str(run), "-o", str(out), "--n-boot", "200"])
    assert res.exit_code == 0, res.output
    data = json.loads((out / "length_bias.json").read_text())
    avg = [a for a in data["association"] if a["dimension"] == "average"][0]
    assert avg["detected"] is True and avg["slope_within_lo"] > 0  # 0.04 per word: 100 x25-points per 100 words
    assert "## Leaderboard with length held fixed" in (out / "length_bias.md").read_text()
    bad = CliRunner().invoke(app, ["analysis", "length-bias", str(run), "-o", str(tmp_path / "no"), "--judge", "zz"])
    assert bad.exit_code != 0 and "--judge zz" in str(bad.exception) + bad.output
    assert not (tmp_path / "no").exists()


def test_the_report_section_warns_of_a_judge_that_rewards_length(make_run, tmp_path):
    from esc_eval.analysis.results.section_registry import ReportContext
    from esc_eval.analysis.ranking.bias_sections import length_section

    run = _run(make_run, 0.04)
    scores, dialogues = load_scores([run]), load_dialogues([run])
    ctx = ReportContext(paths=[run], out=tmp_path, manifests={}, dialogues=dialogues, scores=scores, all_scores=scores,
                        board=scores, leaderboard=pd.DataFrame(), n_boot=200)
    s = length_section(ctx)
    assert any("Judge judge-a (en) rewards length" in n["text"] for n in s["notices"])
    assert [b["id"] for b in s["blocks"] if b["kind"] == "table"] == ["judge-length-table", "judge-length-adjusted"]
    assert len(s["data"]["association"]) == 8 and len(s["data"]["adjusted"]) == 16
