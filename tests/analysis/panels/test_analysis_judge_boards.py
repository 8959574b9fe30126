"""Each judge's leaderboard beside the panel's: averages and ranks, Kendall's tau against the panel,
self-preference marked on a family match (and nowhere else) with the panel's rank without that judge."""
import pytest

from panel_testdata import constant_rows
from esc_eval.analysis.panels.judge_boards import judge_boards
from esc_eval.analysis.panels.panel_scores import panel_scores
from esc_eval.analysis.panels.panel_spec import panel_spec

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
