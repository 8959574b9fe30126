import json

import pandas as pd
import pytest

from esc_eval.analysis.trust.judge_accuracy import accuracy_markdown, judge_accuracy, write_accuracy
from esc_eval.analysis.results.loaders import AnalysisInputError


def long(rows):
    return pd.DataFrame(rows, columns=["dialogue_id", "dimension", "score"])


def test_acc_and_soft_acc_by_hand(tmp_path):
    ref = long([("d1", "fluency", 3), ("d2", "fluency", 2), ("d3", "fluency", 0), ("d4", "fluency", 4),
                ("d1", "empathic", 1), ("d2", "empathic", 1)])
    pred = long([("d1", "fluency", 3), ("d2", "fluency", 3), ("d3", "fluency", 4), ("d4", "fluency", None),
                 ("d1", "empathy", 1), ("d2", "empathy", 0)])
    acc = judge_accuracy(pred, ref).set_index("dimension")
    # fluency: exact on d1 only; within 1 on d1, d2; d4 unparsed counts as wrong
    assert acc.loc["fluency", "ACC"] == 25.0 and acc.loc["fluency", "ACC_soft"] == 50.0
    assert acc.loc["fluency", "n_unparsed"] == 1 and acc.loc["fluency", "MAE"] == pytest.approx(5 / 3)
    assert acc.loc["empathy", "ACC"] == 50.0 and acc.loc["empathy", "ACC_soft"] == 100.0
    assert acc.loc["average", "ACC"] == pytest.approx(37.5)
    assert acc.loc["average", "ACC_soft"] == pytest.approx(75.0)
    paths = write_accuracy(acc.reset_index(), tmp_path, judge="ESC-RANK")
    data = json.loads(paths["json"].read_text())
    assert data["judge"] == "ESC-RANK" and data["dimensions"][-1]["ACC"] == pytest.approx(37.5)
    assert "| Fluency | ESC-RANK | 4 | 25.00 | 50.00 |" in paths["markdown"].read_text()


def test_missing_reference_is_skipped_not_counted():
    ref = long([("d1", "overall", 2), ("d2", "overall", None)])
    pred = long([("d1", "overall", 2), ("d2", "overall", 0)])
    acc = judge_accuracy(pred, ref).set_index("dimension")
    assert acc.loc["overall", "n"] == 1 and acc.loc["overall", "ACC"] == 100.0


@pytest.mark.parametrize("ref, match", [
    (long([("d1", "fluency", 7)]), "outside 0-4"),
    (long([("d1", "warmth", 1)]), "unknown dimension"),
    (long([("d1", "fluency", 1), ("d1", "fluency", 2)]), "several rows"),
    (pd.DataFrame({"dialogue_id": ["d1"], "score": [1]}), "lack columns"),
    (long([("zz", "fluency", 1)]), "no item"),
])
def test_bad_inputs(ref, match):
    with pytest.raises(AnalysisInputError, match=match):
        judge_accuracy(long([("d1", "fluency", 1)]), ref)


def test_markdown_lists_every_dimension_row():
    acc = judge_accuracy(long([("d1", "fluency", 1), ("d1", "tech", 2)]), long([("d1", "fluency", 1), ("d1", "tech", 0)]))
    md = accuracy_markdown(acc, "j")
    assert "| Skillful | j | 1 | 0.00 | 0.00 | 2.00 | 0 |" in md and "| Average |" in md


def test_reference_items_without_a_judge_row_are_counted_apart():
    ref = long([("d1", "fluency", 2), ("d2", "fluency", 2)])
    acc = judge_accuracy(long([("d1", "fluency", 2)]), ref).set_index("dimension")
    assert acc.loc["fluency", "n"] == 1 and acc.loc["fluency", "n_unjudged"] == 1 and acc.loc["fluency", "ACC"] == 100.0
