import pandas as pd
import pytest

from esc_eval.analysis.results.leaderboard import build_leaderboard
from esc_eval.analysis.figures.plots import (
    NothingToPlot,
    card_categories,
    dimension_bars,
    radar_plot,
    score_distributions,
    throughput_plot,
    win_rate_plot,
)
from esc_eval.analysis.seekers.roleplay import win_rates

from analysis_testdata import T0, dialogue_row, score_rows

PNG = b"\x89PNG\r\n\x1a\n"


def scores():
    df = pd.DataFrame(score_rows("d1", "A", [4, 3, 2, 1, 0, None, 3]) + score_rows("d2", "A", [2] * 7)
                      + score_rows("d3", "B", [1] * 7, language="zh"))
    return df.astype({"score": float})


def test_each_plot_writes_a_png(tmp_path):
    lb = build_leaderboard(scores(), n_boot=50)
    dialogues = pd.DataFrame([dialogue_row(f"d{i}", "A", card_id=f"c{i}", minutes=i) for i in range(3)])
    events = [{"kind": "simulation_start", "at": T0.isoformat()}]
    for path in (radar_plot(lb, tmp_path / "r.png"), dimension_bars(lb, tmp_path / "b.png"),
                 score_distributions(scores(), tmp_path / "d.png"), card_categories(dialogues, tmp_path / "c.png"),
                 throughput_plot(dialogues, events, tmp_path / "t.png"), throughput_plot(None, events, tmp_path / "e.png")):
        assert path.read_bytes()[:8] == PNG


def test_nothing_to_plot_is_a_clear_error(tmp_path):
    empty = build_leaderboard(scores().iloc[0:0])
    with pytest.raises(NothingToPlot, match="leaderboard is empty"):
        radar_plot(empty, tmp_path / "r.png")
    with pytest.raises(NothingToPlot, match="no score rows"):
        score_distributions(scores().iloc[0:0], tmp_path / "d.png")
    with pytest.raises(NothingToPlot, match="no finished dialogues and no manifest events"):
        throughput_plot(None, [], tmp_path / "t.png")
    assert not list(tmp_path.iterdir())


def test_win_rate_plot(tmp_path):
    rates = win_rates(pd.DataFrame({"agent_a": ["ESC-Role", "ESC-Role"], "agent_b": ["GPT-4", "source"],
                                    "winner": ["a", "tie"]}))
    assert win_rate_plot(rates, tmp_path / "w.png").read_bytes()[:8] == PNG
    with pytest.raises(NothingToPlot):
        win_rate_plot(rates.iloc[0:0], tmp_path / "x.png")
