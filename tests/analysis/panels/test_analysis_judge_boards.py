"""Each judge's leaderboard beside the panel's: averages and ranks, Kendall's tau against the panel,
self-preference marked on a family match (and nowhere else) with the panel's rank without that judge,
and tested: a rank change flagged only where the judge's own-family offset's 95% CI excludes 0."""
import numpy as np
import pytest

from panel_testdata import constant_rows, frame, row
from esc_eval.analysis.panels.judge_boards import judge_boards
from esc_eval.analysis.panels.panel_scores import panel_scores
from esc_eval.analysis.panels.panel_spec import panel_spec
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

# j1 favours m-qwen, j2 m-llama, j3 ties them: panel mean m-qwen 7/3, m-llama 2 (m-qwen first);
# without j1: m-qwen 1.5, m-llama 2.5 (m-qwen falls to second); without j2: 3 and 1.5 (no change).
VALUES = {("j1", "m-qwen"): 4, ("j1", "m-llama"): 1, ("j2", "m-qwen"): 1, ("j2", "m-llama"): 3,
          ("j3", "m-qwen"): 2, ("j3", "m-llama"): 2}


def boards(families: dict, targets: dict):
    scores = constant_rows(VALUES)
    spec = panel_spec(scores, families=families)
    return judge_boards(scores, panel_scores(scores, spec).scores, spec, targets, n_boot=20)


def test_boards_rank_each_judge_and_the_panel_and_compare_rankings():
    b = boards({}, {})
    board = b.boards.set_index(["judge", "model"])
    assert board.loc[("panel:mean", "m-qwen"), "Average"] == pytest.approx(25 * 7 / 3)
    assert board.loc[("panel:mean", "m-qwen"), "rank"] == 1 and board.loc[("panel:mean", "m-llama"), "rank"] == 2
    assert board.loc[("j2", "m-llama"), "rank"] == 1 and board.loc[("j3", "m-llama"), "rank"] == 1.5  # a tie
    tau = b.taus.set_index("judge")["kendall_tau"]
    assert tau["j1"] == pytest.approx(1.0) and tau["j2"] == pytest.approx(-1.0) and tau.isna()["j3"]
    assert not board["self_preference"].any() and b.self_preference.empty


def test_self_preference_is_marked_on_a_family_match_only():
    b = boards({"j1": "qwen", "j2": "llama"}, {"m-qwen": "Qwen", "m-llama": "llama"})
    marked = set(b.boards.loc[b.boards["self_preference"], ["model", "judge"]].itertuples(index=False, name=None))
    assert marked == {("m-qwen", "j1"), ("m-llama", "j2")}
    sp = b.self_preference.set_index(["model", "judge"])
    assert sp.loc[("m-qwen", "j1"), ["judge_rank", "panel_rank", "panel_rank_without", "rank_change"]].tolist() == [1, 1, 2, 1]
    assert sp.loc[("m-qwen", "j1"), "panel_average_without"] == pytest.approx(25 * 1.5)
    assert sp.loc[("m-llama", "j2"), "rank_change"] == 0


@pytest.mark.parametrize("families, targets", [
    ({"j1": "qwen"}, {"m-qwen": "llama", "m-llama": "mistral"}),  # families known, none shared
    ({"j1": "qwen"}, {}),  # targets' families unknown
    ({}, {"m-qwen": "qwen"}),  # judges' families unknown
])
def test_no_mark_without_a_shared_family(families, targets):
    b = boards(families, targets)
    assert not b.boards["self_preference"].any() and b.self_preference.empty


def planted_panel(own: float, seed: int, n_cards: int = 40, gap: float = 0.0):
    """Two targets on n_cards cards (m-qwen `gap` below m-llama), three judges each the card's value plus their
    own noise (sd 0.5) per dimension, rounded; j1 (family qwen) adds `own` to m-qwen's scores."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(n_cards):
        card = rng.normal(2.0, 0.6)
        for model in ("m-qwen", "m-llama"):
            for judge in ("j1", "j2", "j3"):
                bias = (own if judge == "j1" else 0.0) - gap if model == "m-qwen" else 0.0
                for dim in DIMENSION_NAMES:
                    v = int(np.clip(np.rint(card + bias + rng.normal(0, 0.5)), 0, 4))
                    rows.append(row(judge, f"{model}-c{c}", dim, v, model=model, card=f"c{c}"))
    scores = frame(rows)
    spec = panel_spec(scores, families={"j1": "qwen", "j2": "llama-ish", "j3": "mistral"})
    b = judge_boards(scores, panel_scores(scores, spec).scores, spec, {"m-qwen": "qwen", "m-llama": "llama"},
                     n_boot=200, seed=seed)
    return b.self_preference.set_index(["model", "judge"]).loc[("m-qwen", "j1")]


def test_a_rank_change_without_evidence_is_not_flagged_and_a_planted_preference_is():
    """Equal targets: leaving j1 out reorders them now and then (the old flag: 25-42% of the validity bench's
    null runs), but the offset's 95% CI holds 0 (0 of 40 seeds here) and no rank change is flagged. j1 giving
    its relative 0.9 of a point, which lifts it 0.2 below m-llama to above it in the panel, is found
    ("favours its family", sized near 0.9 x25 less the rounding), and the rank change it causes flagged."""
    nulls = [planted_panel(0.0, seed) for seed in range(4)]
    assert not any(r["verdict"] != "no evidence" or r["rank_change_flagged"] for r in nulls)
    assert all(r["ci_low"] < r["estimate"] < r["ci_high"] for r in nulls) and nulls[0]["note"] == ""
    planted = planted_panel(0.9, 11, gap=0.2)
    assert planted["verdict"] == "favours its family" and 15 < planted["ci_low"] < 25 * 0.9 < planted["ci_high"] + 3
    assert planted["rank_change"] == 1 and planted["rank_change_flagged"]
