"""Both orders combined (verdicts.py) and the position-bias audit (position_bias.py), on hand-made
rows and on fake verdicts written with the real run-folder writer."""
import pandas as pd
import pytest

from esc_eval.analysis.pairwise.fake_verdicts import write_fake_verdicts
from esc_eval.analysis.pairwise.position_bias import POOLED, position_bias
from esc_eval.analysis.pairwise.verdicts import combine_orders
from esc_eval.analysis.results.loaders import AnalysisInputError, load_pairwise


def _rows(answers: dict[str, tuple]) -> pd.DataFrame:
    """answers: pair id -> (preferred when a is shown first, preferred when b is); None = unusable."""
    out = []
    for pid, (ab, ba) in answers.items():
        for order, pref in (("ab", ab), ("ba", ba)):
            if pref == "missing":
                continue
            first = "a" if order == "ab" else "b"
            out.append({"judge": "j", "dimension": "empathy", "pair_id": pid, "card_id": "c" + pid, "language": "en",
                        "model_a": "m1", "model_b": "m2", "order": order, "preferred": pref,
                        "verdict": None if pref is None else "tie" if pref == "tie" else
                        "first" if pref == first else "second",
                        "parse_status": "ok" if pref is not None else "parse_failure"})
    return pd.DataFrame(out)


def test_each_kind_of_pair_is_combined_as_documented():
    rows = _rows({"p1": ("a", "a"), "p2": ("a", "b"), "p3": ("tie", "b"), "p4": ("tie", "tie"),
                  "p5": ("b", "b"), "p6": ("a", None), "p7": ("a", "missing")})
    out = combine_orders(rows)
    got = out.table.set_index("pair_id")[["score_a", "kind"]]
    assert got.to_dict("index") == {"p1": {"score_a": 1.0, "kind": "agree"}, "p2": {"score_a": 0.5, "kind": "flip"},
                                    "p3": {"score_a": 0.25, "kind": "lean"}, "p4": {"score_a": 0.5, "kind": "tie"},
                                    "p5": {"score_a": 0.0, "kind": "agree"}}
    c = out.counts.iloc[0]
    assert (c["agree"], c["lean"], c["tie"], c["flip"], c["dropped"], c["pairs"]) == (2, 1, 1, 1, 2, 7)


def test_no_rows_or_a_bad_order_is_one_line():
    with pytest.raises(AnalysisInputError, match="no pairwise verdict rows"):
        combine_orders(pd.DataFrame())
    rows = _rows({"p1": ("a", "a")}).assign(order=["ab", "xy"])
    with pytest.raises(AnalysisInputError, match="order must be"):
        combine_orders(rows)


def test_the_audit_counts_flips_and_first_picks_by_hand():
    # p1 agrees (first, second), p2 flips (first, first), p3 flips (first, first), p4 tie + first
    rows = _rows({"p1": ("a", "a"), "p2": ("a", "b"), "p3": ("a", "b"), "p4": ("tie", "b")})
    r = position_bias(rows).set_index("dimension").loc["empathy"]
    assert (r["pairs_both"], r["flips"], r["answers"], r["ties"], r["first"]) == (4, 2, 8, 1, 6)
    assert r["flip_rate"] == 0.5 and r["first_share"] == pytest.approx(6 / 7)
    # Wilson 95% for 6/7: (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), by hand
    z, n, p = 1.959963984540054, 7, 6 / 7
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    assert (r["first_lo"], r["first_hi"]) == pytest.approx((centre - half, centre + half))


def test_a_judge_that_always_picks_the_first_shown_is_flagged_and_a_fair_one_is_not(tmp_path):
    models = ["m1", "m2", "m3", "m4"]
    write_fake_verdicts(tmp_path / "run", 20, models, position_bias=1.0, judge="first-picker", seed=1)
    write_fake_verdicts(tmp_path / "run", 20, models, position_bias=0.0, tie_rate=0.2, judge="fair", seed=2)
    audit = position_bias(load_pairwise([tmp_path / "run"])).set_index(["judge", "dimension"])
    biased, fair = audit.loc[("first-picker", POOLED)], audit.loc[("fair", POOLED)]
    assert biased["first_share"] == 1.0 and biased["flip_rate"] == 1.0 and biased["biased"]
    assert biased["pairs_both"] == 20 * 6 * 7 and biased["ties"] == 0
    assert not fair["biased"] and fair["first_lo"] < 0.5 < fair["first_hi"]
    assert audit.xs("first-picker", level="judge")["biased"].all()  # every dimension too
    assert not audit.xs("fair", level="judge")["biased"].any()
