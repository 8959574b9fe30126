"""The panel's score per (dialogue, dimension): each rule on hand-made rows against hand-computed
values, the quorum and what it leaves out, the one-line errors, and the panel's rows going through
Table 2, calibration and PPI as one more judge."""
import numpy as np
import pandas as pd
import pytest

from panel_testdata import frame, row
from esc_eval.analysis.panels.panel_scores import panel_scores
from esc_eval.analysis.panels.panel_spec import PanelJudge, PanelSpec, panel_spec, parse_weights
from esc_eval.analysis.results.leaderboard import build_leaderboard
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

P_A = [0.1, 0.2, 0.3, 0.2, 0.2]  # expected 2.2, label 2


@pytest.fixture
def scores():
    return frame([
        # fluency: labels 1, 3, 4
        row("A", "d1", "fluency", 1), row("B", "d1", "fluency", 3), row("C", "d1", "fluency", 4),
        # expression: labels 0, 0, 4 (with C's weight 2, a majority tie between 0 and 4)
        row("A", "d1", "expression", 0), row("B", "d1", "expression", 0), row("C", "d1", "expression", 4),
        # empathy: A gives P(0..4), B a label, C failed to parse
        row("A", "d1", "empathy", 2, probs=P_A), row("B", "d1", "empathy", 3), row("C", "d1", "empathy", None),
    ])


def spec(rule: str, min_judges=None) -> PanelSpec:
    return PanelSpec((PanelJudge("A"), PanelJudge("B"), PanelJudge("C", weight=2.0)), rule=rule, min_judges=min_judges)


def values(result) -> dict:
    return result.scores.set_index("dimension")["score"].to_dict()


@pytest.mark.parametrize("rule, fluency, expression", [
    ("mean", (1 + 3 + 2 * 4) / 4, (0 + 0 + 2 * 4) / 4),
    ("median", 3.0, 0.0),  # cumulative weight 1, 2 of 4 reaches half at 3; at 0 already for (0, 0, 4)
    ("majority", 4.0, 0.0),  # C's weight 2 wins; 0 and 4 tie at 2 each: the lower label
    ("trimmed_mean", 3.0, 0.0),  # lowest (A) and highest (C) dropped: B alone
])
def test_each_rule_gives_the_hand_computed_score(scores, rule, fluency, expression):
    result = panel_scores(scores, spec(rule))
    got = values(result)
    assert got["fluency"] == pytest.approx(fluency) and got["expression"] == pytest.approx(expression)
    assert set(result.scores["judge"]) == {f"panel:{rule}"}
    assert "empathy" not in got  # C gave no usable score: below the quorum of all three judges


def test_the_quorum_leaves_items_out_and_counts_them(scores):
    cov = panel_scores(scores, spec("mean")).coverage.set_index("dimension")
    assert cov.loc["empathy", ["n_items", "n_scored", "n_left_out", "missing:C", "missing:A"]].tolist() == [1, 0, 1, 1, 0]
    assert cov.loc["all", ["n_items", "n_scored", "n_left_out"]].tolist() == [3, 2, 1]
    two = panel_scores(scores, spec("mean", min_judges=2)).scores.set_index("dimension")
    # A's expected score (2.2) where it gave P(0..4), B's label 3, equal weights
    assert two.loc["empathy", "score"] == pytest.approx((2.2 + 3) / 2)
    assert two.loc["empathy", "n_judges"] == 2
    np.testing.assert_allclose(two.loc["empathy", "probs"], (np.array(P_A) + np.eye(5)[3]) / 2)
    assert two.loc["empathy", "expected"] == pytest.approx(two.loc["empathy", "score"])


def test_median_and_majority_give_the_weighted_vote_as_probabilities(scores):
    m = panel_scores(scores, spec("majority")).scores.set_index("dimension")
    np.testing.assert_allclose(m.loc["fluency", "probs"], [0, 0.25, 0, 0.25, 0.5])


def test_trimmed_mean_drops_one_of_tied_extremes_only():
    s = frame([row(j, "d1", "fluency", v) for j, v in (("A", 2), ("B", 2), ("C", 2), ("D", 4))])
    sp = PanelSpec(tuple(PanelJudge(j) for j in "ABCD"), rule="trimmed_mean")
    assert values(panel_scores(s, sp))["fluency"] == pytest.approx(2.0)  # drop one 2 and the 4: (2 + 2) / 2
    s = frame([row(j, "d1", "fluency", v) for j, v in (("A", 1), ("B", 3), ("C", 3), ("D", 3))])
    assert values(panel_scores(s, sp))["fluency"] == pytest.approx(3.0)  # drop 1 and one 3


def test_the_panel_rows_go_through_table_2(scores):
    rows = panel_scores(scores, spec("mean")).scores
    lb = build_leaderboard(rows, n_boot=0)
    assert lb["judge"].tolist() == ["panel:mean"]
    assert lb.loc[0, "Fluency"] == pytest.approx(25 * 3.0) and lb.loc[0, "Expression"] == pytest.approx(25 * 2.0)


@pytest.mark.parametrize("kwargs, message", [
    ({"judges": ["A", "A"]}, "named twice"),
    ({"judges": ["A", "X"]}, "judge X: not in the runs' score rows"),
    ({"judges": ["A"]}, "at least 2 judges"),
    ({"weights": {"A": 0.0}}, "A=0.0: a weight must be a positive number"),
    ({"weights": {"B": -1.0}}, "a weight must be a positive number"),
    ({"weights": {"Z": 1.0}}, "--weight Z: not a judge of the panel"),
    ({"rule": "vote"}, "--rule 'vote'"),
    ({"min_judges": 4}, "--min-judges 4"),
])
def test_bad_panels_fail_in_one_line(scores, kwargs, message):
    with pytest.raises(AnalysisInputError, match=message) as e:
        panel_spec(scores, **kwargs)
    assert "\n" not in str(e.value)


def test_weights_and_families_come_from_the_manifest_unless_named(scores):
    manifests = {"r": {"scoring": {"panel": {"rule": "median", "judges": [
        {"judge": "A", "weight": 2.0, "family": "qwen", "model": "Qwen/Qwen2-7B"}, {"judge": "B", "weight": 1.0}]}},
        "families": {"targets": {"m1": "qwen"}, "judges": {"B": "llama"}}}}
    sp = panel_spec(scores, manifests)
    assert sp.names == ["A", "B"] and sp.weights == [2.0, 1.0] and sp.rule == "median"
    assert [j.family for j in sp.judges] == ["qwen", "llama"] and sp.judges[0].model == "Qwen/Qwen2-7B"
    sp = panel_spec(scores, manifests, judges=["A", "B", "C"], weights={"A": 0.5}, families={"B": "mistral"}, rule="mean")
    assert sp.weights == [0.5, 1.0, 1.0] and [j.family for j in sp.judges] == ["qwen", "mistral", None]
    bad = {"r": {"scoring": {"panel": {"judges": [{"judge": "A", "weight": 0}, {"judge": "B"}]}}}}
    with pytest.raises(AnalysisInputError, match="positive"):
        panel_spec(scores, bad)
    assert panel_spec(scores).names == ["A", "B", "C"]  # no panel entry: every judge, weight 1
    with pytest.raises(AnalysisInputError, match="--weight A=x"):
        parse_weights(["A=x"])


def test_calibration_and_ppi_take_the_panel_as_one_more_judge():
    from esc_eval.analysis.trust.calibration import ece
    from esc_eval.analysis.trust.calibration_runs import calibrate
    from esc_eval.analysis.trust.human_leaderboard import human_anchored
    from esc_eval.analysis.trust.human_scores import HumanScores
    from esc_eval.analysis.trust.ppi import ppi_mean

    rng = np.random.default_rng(3)
    n = 40
    truth = rng.integers(0, 5, (n, len(DIMENSION_NAMES)))
    rows, probs = [], {}
    for j in ("A", "B"):
        p = rng.dirichlet(np.ones(5), (n, len(DIMENSION_NAMES))) * 0.5 + 0.5 * np.eye(5)[truth]
        probs[j] = p
        for i in range(n):
            for d, dim in enumerate(DIMENSION_NAMES):
                rows.append(row(j, f"d{i:02d}", dim, int(p[i, d].argmax()), probs=p[i, d].tolist()))
    scores = frame(rows)
    panel = panel_scores(scores, panel_spec(scores)).scores
    humans = HumanScores(pd.DataFrame([{"annotator": "ana", "dialogue_id": f"d{i:02d}", "dimension": dim,
                                        "score": int(truth[i, d])} for i in range(24) for d, dim in enumerate(DIMENSION_NAMES)]),
                         "test")
    result = calibrate(panel, humans, judges=["panel:mean"], n_boot=0, folds=2)
    t = result.table.set_index("dimension")
    mix = (probs["A"][:24, 0] + probs["B"][:24, 0]) / 2  # the panel's P(0..4) on fluency: the two judges' mixture
    assert t.loc["fluency", "ece"] == pytest.approx(ece(mix, truth[:24, 0]))
    anchored = human_anchored(panel, humans, build_leaderboard(panel, n_boot=0))
    fl = anchored[anchored["column"] == "Fluency"].iloc[0]
    yhat = 25 * (probs["A"][:, 0] @ np.arange(5) + probs["B"][:, 0] @ np.arange(5)) / 2
    assert fl["ppi"] == pytest.approx(ppi_mean(25 * truth[:24, 0], yhat[:24], yhat[24:]).estimate)


def test_the_analysis_knows_the_rules_the_scoring_config_takes():
    from esc_eval.analysis.panels.panel_spec import RULES
    from esc_eval.sim.judging.panel import PANEL_RULES, PanelConfig

    assert RULES == PANEL_RULES == PanelConfig.model_fields["rule"].annotation.__args__
