"""The pairs plan (sim/pairwise/plan.py) on hand-made dialogue rows: counts of all, round_robin
and reference on 4 targets x 3 cards (by hand: 6, 2 and 3 pairs a card), every pair equally often in
the round robin, canonical order, card groups, and the bad inputs in one line."""
from __future__ import annotations

from collections import Counter
from itertools import combinations

import pytest

from esc_eval.sim.pairwise.plan import circle_round, plan_pairs
from esc_eval.sim.runs.records import stable_id

TARGETS = ["m4", "m2", "m3", "m1"]  # given unsorted: the plan sorts them


def rows(cards=("c1", "c2", "c3"), targets=TARGETS, **over):
    out = []
    for c in cards:
        for t in targets:
            out.append({"dialogue_id": f"{c}-{t}", "card_id": c, "language": "en", "target_model": t, "role_model": "role",
                        "strategy": "default", "seed": 0, "status": "ok", **over})
    return out


def test_counts_of_each_plan_on_four_targets_and_three_cards():
    every = plan_pairs(rows(), "all", dimensions=7)
    assert len(every.pairs) == 3 * 6 and every.calls == 18 * 7 * 2  # C(4,2) = 6 a card; both orders
    assert every.summary() == {"plan": "all", "targets": ["m1", "m2", "m3", "m4"], "cards": 3, "card_groups": 3,
                               "pairs": 18, "dimensions": 7, "orders": 2, "judge_calls": 252}
    rr = plan_pairs(rows(), "round_robin", dimensions=2)
    assert len(rr.pairs) == 3 * 2 and rr.calls == 6 * 2 * 2  # 4 targets: 2 pairs a card
    ref = plan_pairs(rows(), "reference", reference="m2", dimensions=1)
    assert len(ref.pairs) == 3 * 3 and ref.calls == 9 * 2
    assert all("m2" in (p.model_a, p.model_b) for p in ref.pairs)
    assert Counter(p.model_b if p.model_a == "m2" else p.model_a for p in ref.pairs) == {"m1": 3, "m3": 3, "m4": 3}


def test_round_robin_each_target_meets_one_other_per_card_and_every_pair_equally_often():
    # 4 targets: over n-1 = 3 cards every one of the 6 pairs meets exactly once
    rr = plan_pairs(rows(), "round_robin")
    for card in ("c1", "c2", "c3"):
        met = [m for p in rr.pairs if p.card_id == card for m in (p.model_a, p.model_b)]
        assert sorted(met) == ["m1", "m2", "m3", "m4"]  # everyone once on each card
    assert Counter((p.model_a, p.model_b) for p in rr.pairs) == {pair: 1 for pair in combinations(["m1", "m2", "m3", "m4"], 2)}
    # 5 targets (a bye each round): 10 cards = 2 cycles of 5 rounds, every pair exactly twice, one target idle a card
    five = [f"t{i}" for i in range(5)]
    rr5 = plan_pairs(rows([f"c{k:02d}" for k in range(10)], five), "round_robin")
    assert Counter((p.model_a, p.model_b) for p in rr5.pairs) == {pair: 2 for pair in combinations(five, 2)}
    assert all(len([p for p in rr5.pairs if p.card_id == c]) == 2 for c in {p.card_id for p in rr5.pairs})
    assert circle_round(["x"], 0) == [] and circle_round(["x", "y"], 7) == [("x", "y")]


def test_canonical_order_and_pair_ids():
    for p in plan_pairs(rows(), "all").pairs:
        assert p.model_a < p.model_b
        assert p.dialogue_a == f"{p.card_id}-{p.model_a}" and p.dialogue_b == f"{p.card_id}-{p.model_b}"
        assert p.pair_id == stable_id("pair", p.dialogue_a, p.dialogue_b)
    ref = plan_pairs(rows(), "reference", reference="m3")  # the reference sorts into its place in each pair
    assert {(p.model_a, p.model_b) for p in ref.pairs} == {("m1", "m3"), ("m2", "m3"), ("m3", "m4")}


def test_only_dialogues_that_differ_in_the_target_meet():
    data = rows(cards=("c1",), targets=["m1", "m2"]) + rows(cards=("c1",), targets=["m3"], seed=1)
    data += rows(cards=("c2",), targets=["m1", "m2"], strategy="resistant") + rows(cards=("c2",), targets=["m3"], role_model="other")
    data += [{**rows(cards=("c3",), targets=["m1"])[0], "status": "failed"}] + rows(cards=("c3",), targets=["m2"])
    p = plan_pairs(data, "all")
    # c1 seed 0: m1-m2; c2 resistant: m1-m2; m3's dialogues (another seed, another role) and c3 (m1 failed) meet no one
    assert sorted((x.card_id, x.strategy, x.model_a, x.model_b) for x in p.pairs) == [
        ("c1", "default", "m1", "m2"), ("c2", "resistant", "m1", "m2")]
    assert p.groups == 2 and p.cards == 2 and p.targets == ["m1", "m2", "m3"]


def test_bad_input_is_one_line():
    with pytest.raises(ValueError, match="unknown pairs plan 'swiss'"):
        plan_pairs(rows(), "swiss")
    with pytest.raises(ValueError, match="at least 2 targets; the run has 1: m1"):
        plan_pairs(rows(targets=["m1"]), "all")
    with pytest.raises(ValueError, match="at least 2 targets; the run has 0"):
        plan_pairs([], "all")
    with pytest.raises(ValueError, match="no card was played by two targets"):
        plan_pairs(rows(cards=("c1",), targets=["m1"]) + rows(cards=("c2",), targets=["m2"]), "all")
    with pytest.raises(ValueError, match="reference model 'm9' is not a target of the run; its targets: m1, m2, m3, m4"):
        plan_pairs(rows(), "reference", reference="m9")
    with pytest.raises(ValueError, match="no card was played by both the reference 'm3'"):
        plan_pairs(rows(cards=("c1",), targets=["m1", "m2"]) + rows(cards=("c2",), targets=["m3"]), "reference", reference="m3")
