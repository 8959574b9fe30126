"""analysis/rounds/by_round.py on score rows made by hand: the mean per round (the cohort's and the
survivors'), the earlier change from the first round to the whole dialogue paired by dialogue (kept
for comparison), and the markdown with the verdict from the curve, checked by hand."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from esc_eval.analysis.rounds.by_round import round_change, round_table, round_values, rounds_markdown
from esc_eval.analysis.rounds.change_point import round_change_point
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES


def scores(values: dict[tuple[str, str, int], int]) -> pd.DataFrame:
    """(target, dialogue, round) -> the label every dimension got."""
    rows = []
    for (target, did, k), label in values.items():
        for dim in DIMENSION_NAMES:
            rows.append({"run_id": "r", "dialogue_id": f"{did}@r{k:02d}", "target_model": target, "language": "en",
                         "judge": "j", "dimension": dim, "score": float(label), "card_id": f"card-{did}"})
    return pd.DataFrame(rows)


def test_a_target_that_degrades_and_one_that_holds():
    # A: 3 -> 2 -> 1 on four cards (one 2 -> 1 -> 1); B: 2 at every round
    table = {**{("A", f"a{i}", k): 4 - k for i in range(3) for k in (1, 2, 3)},
             ("A", "a3", 1): 2, ("A", "a3", 2): 1, ("A", "a3", 3): 1,
             **{("B", f"b{i}", k): 2 for i in range(4) for k in (1, 2, 3)}}
    values = round_values(scores(table))
    assert len(values) == 24 and set(values["round"]) == {1, 2, 3}
    by_round = round_table(values, n_boot=500, seed=0).set_index(["target_model", "round"])
    assert by_round.loc[("A", 1), "mean"] == pytest.approx((3 * 75 + 50) / 4)  # labels x 25
    assert by_round.loc[("A", 3), "mean"] == pytest.approx(25.0) and by_round.loc[("A", 3), "n"] == 4
    assert by_round.loc[("B", 2), "mean"] == 50.0 and by_round.loc[("B", 2), "ci_low"] == by_round.loc[("B", 2), "ci_high"] == 50.0
    change = round_change(values, n_boot=500, seed=0).set_index("target_model")
    assert change.loc["A", "change"] == pytest.approx((-50 * 3 - 25) / 4) and change.loc["A", "verdict"] == "degrades"
    assert change.loc["A", "ci_high"] < 0 and change.loc["A", "first_round"] == 1 and change.loc["A", "last_round_median"] == 3
    assert change.loc["B", "change"] == 0 and change.loc["B", "verdict"] == "holds"
    md = rounds_markdown(round_table(values, n_boot=0), round_change_point(values, n_boot=0))
    # 4 cards: the step is shown (round 1 | rounds 2-3), no verdict
    assert "| en | A | j | prefix | 4 reached round 3 | 4 | 2 | 68.8 | 34.4 | -34.4 | - | n/a | 4 cards: a verdict needs at least 10" in md
    assert "| en | A | j | prefix | 2 | 4 | 43.8 | 4 | 43.8 |" in md  # every dialogue reached round 3: cohort = survivors


def test_rows_that_are_not_prefixes_or_not_scored_are_left_out():
    frame = scores({("A", "a0", 1): 3, ("A", "a0", 2): 1})
    frame.loc[frame["dimension"] == DIMENSION_NAMES[0], "score"] = np.nan  # a parse failure: not a zero
    whole = frame.assign(dialogue_id="a0")  # the whole dialogue's own rows (no @rNN)
    values = round_values(pd.concat([frame, whole]))
    assert len(values) == 2 and values["value"].tolist() == [75.0, 25.0]
    assert round_values(pd.DataFrame()).empty
