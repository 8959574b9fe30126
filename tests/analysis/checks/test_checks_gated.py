"""Verdicts from fewer cards than their planted-truth check needs, in the analyses that print them:
withheld (n/a, NaN intervals) with the reason, or said to rest on too few cards, in the data every
output (terminal, report, JSON) is made from; the validity bench itself measures them ungated."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from esc_eval.analysis.checks import floors
from esc_eval.analysis.checks.floors import read_floors
from esc_eval.analysis.pairwise.fake_verdicts import fake_verdict_frame


def _floor(check: str, valid_from: int | None, power_from: int | None = None, effect: str = "the effect") -> dict:
    return {"id": check, "effect_text": effect, "by_size": [{"size": 10}, {"size": 655}], "valid_from": valid_from,
            "power_from": power_from, "below": "false positives 30% (nominal 5%) at 10 cards"}


@pytest.fixture
def published(monkeypatch):
    def use(*checks: dict) -> None:
        monkeypatch.setattr(floors, "published", lambda: read_floors({"checks": list(checks)}))
    return use


def test_position_bias_and_bradley_terry_from_too_few_cards(published):
    from esc_eval.analysis.pairwise.bradley_terry import bt_ratings
    from esc_eval.analysis.pairwise.position_bias import POOLED, bias_rows, position_bias
    from esc_eval.analysis.pairwise.verdicts import combine_orders

    rows = fake_verdict_frame(12, ["m1", "m2"], position_bias=0.9, seed=1)
    published(_floor("position-bias", 50), _floor("bt-order", 50))
    table = position_bias(rows)
    pooled = table[table["dimension"] == POOLED].iloc[0]
    assert bool(pooled["biased"]) and pooled["verdict"] == "n/a"  # the test found it; its check says not from 12
    assert "withheld from 12 cards" in pooled["verdict_note"] and "n/a (withheld" in bias_rows(table)[-1][-1]
    ratings = bt_ratings(combine_orders(rows).table, n_boot=50)
    assert ratings.ratings["rank_lo"].isna().all() and any("withheld from 12 cards" in n for n in ratings.notes)
    published(_floor("position-bias", 10, power_from=400, effect="a 60% first-shown share"))
    fair = position_bias(fake_verdict_frame(12, ["m1", "m2"], seed=2))
    row = fair[fair["dimension"] == POOLED].iloc[0]
    assert row["verdict"] == "no" and "too few to find a 60% first-shown share (80% power from 400)" in row["verdict_note"]
    with floors.measuring():  # what the validity bench sees: the test's own answer
        assert position_bias(rows).query("dimension == @POOLED")["verdict"].iloc[0] == "yes"


def test_paired_comparison_and_fidelity_from_too_few(published):
    from esc_eval.analysis.compare.paired import paired_comparison

    scores = pd.DataFrame([{"target_model": m, "dialogue_id": f"{m}{c}", "dimension": "fluency", "score": s,
                            "language": "en", "card_id": f"c{c}", "judge": "j", "parse_status": "ok"}
                           for c in range(8) for m, s in (("A", 3), ("B", 1 + c % 2))])
    published(_floor("paired-comparison", 20))
    out = paired_comparison(scores, "A", "B", n_resamples=200)
    assert math.isnan(out["p_value"]) and math.isnan(out["ci_lo"]) and "withheld from 8 cards" in out["note"]
    published()
    assert paired_comparison(scores, "A", "B", n_resamples=200)["p_value"] < 0.05
    published(_floor("fidelity", None))
    shown, note = floors.gate("fidelity", 500, "too long", finds=True)
    assert shown == "too long" and note.startswith("unreliable: its planted-truth check found")
