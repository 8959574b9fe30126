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


def _panel_scores(n_cards: int, seed: int = 4) -> pd.DataFrame:
    """Two targets (m-qwen, m-llama) on n_cards cards, three equal judges: the card's value plus each
    judge's noise, rounded to 0-4, on the seven dimensions."""
    import datetime as dt

    import numpy as np

    from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

    rng, rows = np.random.default_rng(seed), []
    for c in range(n_cards):
        card = rng.normal(2.0, 0.6)
        for model in ("m-qwen", "m-llama"):
            for judge in ("j1", "j2", "j3"):
                for dim in DIMENSION_NAMES:
                    v = float(np.clip(np.rint(card + rng.normal(0, 0.5)), 0, 4))
                    rows.append({"run_id": "r", "dialogue_id": f"{model}-c{c}", "card_id": f"c{c}", "target_model": model,
                                 "language": "en", "dimension": dim, "score": v, "probs": None, "expected": None,
                                 "raw": str(v), "parse_status": "ok", "judge": judge, "method": "generate",
                                 "scored_at": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), "run_dir": "runs/r"})
    return pd.DataFrame(rows)


def test_table_two_rank_sets_length_and_the_panel_say_when_their_cards_are_too_few(published):
    """Issue 53: Table 2, the rank-sets, the length audit and the panel call the floors too: an
    interval from fewer cards than its check holds from says it is unchecked there; a flag is withheld."""
    from esc_eval.analysis.panels.agreement import panel_agreement
    from esc_eval.analysis.panels.judge_boards import judge_boards
    from esc_eval.analysis.panels.panel_scores import panel_scores
    from esc_eval.analysis.panels.panel_spec import panel_spec
    from esc_eval.analysis.ranking.length_bias import length_audit
    from esc_eval.analysis.ranking.rank_sets import build_rank_sets
    from esc_eval.analysis.results.leaderboard import build_leaderboard

    scores = _panel_scores(12)
    one = scores[scores["judge"] == "j1"]
    words = {d: 20.0 + i for i, d in enumerate(sorted(scores["dialogue_id"].unique()))}
    avg = one.groupby(["language", "judge", "target_model", "dialogue_id"], as_index=False)["score"].mean()
    length = avg.rename(columns={"target_model": "model"}).assign(dimension="average",
                                                                  words_per_turn=avg["dialogue_id"].map(words))
    spec = panel_spec(scores, families={"j1": "qwen", "j2": "llama-ish", "j3": "mistral"})

    def outputs():
        board = judge_boards(scores, panel_scores(scores, spec).scores, spec, {"m-qwen": "qwen", "m-llama": "llama"},
                             n_boot=100, seed=1)
        return (build_leaderboard(one, n_boot=100), build_rank_sets(one), length_audit(length, n_boot=100)[0].iloc[0],
                panel_agreement(scores, spec, n_boot=100, seed=1),
                board.self_preference.set_index(["model", "judge"]).loc[("m-qwen", "j1")])

    published(*(_floor(c, 25) for c in ("leaderboard-ci", "rank-sets", "length-bias", "panel-agreement",
                                         "self-preference")))
    lb, sets, audit, agreement, mine = outputs()
    unchecked = "unchecked at 12 cards: its planted-truth check holds from 25 cards"
    assert all(f"CI {unchecked}" in n for n in lb["notes"]) and lb["Average_lo"].notna().all()  # shown, with the note
    assert all(f"rank-set {unchecked}" in n for n in sets["note"])
    assert audit["verdict"] == "n/a" and not audit["detected"] and "withheld from 12 cards" in audit["note"]
    alpha = agreement["alpha"].set_index("dimension").loc["all"]
    assert f"interval {unchecked}" in alpha["note"] and alpha["alpha_lo"] == alpha["alpha_lo"]
    assert agreement["most_disagreeing"] is None and agreement["note"].startswith("no judge named: withheld from 12")
    assert mine["verdict"] == "n/a" and "withheld from 12 cards" in mine["note"]
    published(*(_floor(c, 10, power_from=400, effect="a quarter point") for c in ("length-bias", "self-preference")))
    lb, sets, audit, agreement, mine = outputs()
    assert not any("unchecked" in n for n in [*lb["notes"], *sets["note"], agreement["alpha"]["note"].str.cat()])
    assert audit["verdict"] == "no" and "too few to find a quarter point (80% power from 400)" in audit["note"]
    assert mine["verdict"] == "no evidence" and "too few to find a quarter point" in mine["note"]
