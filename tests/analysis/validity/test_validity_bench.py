"""The validity bench (analysis/validity): the rates, their Monte-Carlo errors and the sizes it reads
off them, on outcomes made by hand; and a small run of it on the real planted runs (the CI version of
`esc-eval bench validity`: two seeds, small sizes, the cheap scenarios)."""
from __future__ import annotations

import json
import math

import pytest

from esc_eval.analysis.checks.floors import read_floors
from esc_eval.analysis.checks.registry import NULL, PLANTED, Outcome, VerdictCheck
from esc_eval.analysis.validity.bench import summarize
from esc_eval.analysis.validity.table import markdown, write_json

CHECK = VerdictCheck("made", "Made up", "f", ("section:x",), "duo", "gap", lambda r: Outcome(), flag="claims", interval="of x")


def _outcomes(flags: dict[int, float], covered: dict[int, float], n: int = 100) -> dict[int, list[Outcome]]:
    """n outcomes per size with the given share of flags raised and of intervals holding."""
    return {s: [Outcome(flag=i < round(flags[s] * n), covered=i < round(covered[s] * n)) for i in range(n)] for s in flags}


def test_the_sizes_a_check_holds_and_finds_its_effect_from():
    null = _outcomes({10: 0.20, 50: 0.08, 200: 0.04}, {10: 0.80, 50: 0.93, 200: 0.95})
    planted = _outcomes({10: 0.30, 50: 0.70, 200: 0.90}, {10: 0.85, 50: 0.95, 200: 0.96})
    s = summarize(CHECK, {NULL: null, PLANTED: planted, "effect_text": "a quarter point"})
    rows = {r["size"]: r for r in s["by_size"]}
    # 8% over 100 replicates: within 5% + 2.13 x 2.2% (the nominal's standard error, z for 3 sizes); 20% is not
    assert rows[50]["fpr_ok"] and not rows[10]["fpr_ok"] and rows[10]["coverage_ok"] is False
    assert rows[50]["fpr_se"] == pytest.approx(math.sqrt(0.08 * 0.92 / 100))
    assert rows[10]["coverage"] == pytest.approx(0.825)  # both variants' intervals together
    assert (s["valid_from"], s["power_from"]) == (50, 200) and s["status"] == "holds from 50; 80% power from 200"
    assert "false positives 20% (nominal 5%)" in s["below"] and "coverage 82%" in s["below"]
    bad = summarize(CHECK, {NULL: _outcomes({10: 0.5, 200: 0.3}, {10: 0.9, 200: 0.95}),
                            PLANTED: _outcomes({10: 1.0, 200: 1.0}, {10: 1.0, 200: 1.0})})
    assert bad["valid_from"] is None and bad["status"].startswith("fails: false positives 30%")
    floors = read_floors({"checks": [s, {**bad, "id": "bad"}]})
    assert floors["made"].valid_from == 50 and floors["made"].effect == "a quarter point"
    assert floors["bad"].valid_from is None and floors["bad"].failure == "false positives 30% (nominal 5%) at 200 cards"


def test_per_item_flags_and_several_intervals_per_replicate_are_pooled_with_the_replicates_spread():
    null = {20: [Outcome(items=(1, 10), intervals=(9, 10)), Outcome(items=(0, 10), intervals=(10, 10))]}
    planted = {20: [Outcome(items=(9, 10)), Outcome(items=(10, 10))]}
    r = summarize(CHECK, {NULL: null, PLANTED: planted})["by_size"][0]
    assert (r["fpr"], r["power"], r["coverage"]) == pytest.approx((0.05, 0.95, 0.95))
    assert r["fpr_se"] == pytest.approx(0.05) and r["n_null"] == 2  # the sd of 10% and 0% over sqrt(2)


def test_coverage_error_is_over_seeds_where_a_seeds_two_variants_share_its_cards():
    """Issue 53: a seed's null and planted replicates share its cards' effects, so their intervals miss
    together; counted as independent draws, the error was too small. Here every miss is a seed whose
    two intervals both miss: the seeds' spread (the design effect 2) says so."""
    null = {25: [Outcome(covered=i >= 10) for i in range(100)]}
    planted = {25: [Outcome(covered=i >= 10) for i in range(100)]}
    r = summarize(CHECK, {NULL: null, PLANTED: planted})["by_size"][0]
    independent = math.sqrt(0.9 * 0.1 / 200)
    assert r["coverage"] == pytest.approx(0.9) and r["coverage_se"] == pytest.approx(math.sqrt(2) * independent, rel=0.02)
    assert r["coverage_design_effect"] == pytest.approx(2.0, rel=0.03)
    apart = {25: [Outcome(covered=i % 20 != 0) for i in range(100)]}  # misses on different seeds: no inflation
    shifted = {25: [Outcome(covered=i % 20 != 10) for i in range(100)]}
    r = summarize(CHECK, {NULL: apart, PLANTED: shifted})["by_size"][0]
    assert r["coverage_design_effect"] == pytest.approx(1.0)


def test_the_table_and_its_json(tmp_path):
    s = summarize(CHECK, {NULL: _outcomes({10: 0.0}, {10: 1.0}, 4), PLANTED: {10: [Outcome()] * 4}})
    result = {"date": "today", "machine": {"cpu": "x", "flags": "avx512f"}, "seeds": 4, "sizes": [10], "seconds": 1.0,
              "checks": [s], "unchecked": [{"covers": ["section:y"], "reason": "why", "prints_verdicts": True}]}
    md = markdown(result)
    assert "| made | claims | of x |" in md and "| section:y | why |" in md and "4 seeds per variant" in md
    assert json.loads(write_json(result, tmp_path / "v.json").read_text())["checks"][0]["by_size"][0]["power"] is None


def test_a_small_validity_run_through_the_real_jobs(tmp_path):
    """The CI version: two seeds, one small size, the rounds scenario (one target's replies judged in
    their context), the people scenario (the shipped people replayed) and a check on drawn data (a
    course's sessions): every number a rate, the planted failure from round 4 found and the spoiled
    flag found every time they were planted, no verdict with nothing planted."""
    from esc_eval.analysis.validity.run import run_validity
    from esc_eval.sim.bench.planted import planted_runner

    md = run_validity(planted_runner(tmp_path / "work"), seeds=2, sizes=(12,),
                      checks=["rounds-change", "spoiled", "session-change"], out=tmp_path / "v.json", n_boot=100,
                      say=lambda _: None)
    data = json.loads((tmp_path / "v.json").read_text())
    got = {c["id"]: c for c in data["checks"]}
    assert set(got) == {"rounds-change", "spoiled", "session-change"} and "| rounds-change |" in md
    assert "## By size" in md and "| session-change | 12 |" in md
    (rounds,) = got["rounds-change"]["by_size"]
    assert rounds["size"] == 12 and rounds["n_null"] == rounds["n_planted"] == 2 and got["rounds-change"]["n_errors"] == 0
    assert rounds["power"] == 1.0 and rounds["fpr"] == 0.0 and 0 <= rounds["coverage"] <= 1
    (spoiled,) = got["spoiled"]["by_size"]
    assert spoiled["size"] == 8 and spoiled["power"] == 1.0  # capped: half the shipped 16 people
    assert spoiled["n_planted"] == 2
    assert got["spoiled"]["effect_text"].startswith("the seeker says it is an AI")
    (sessions,) = got["session-change"]["by_size"]
    assert sessions["n_null"] == sessions["n_planted"] == 2 and sessions["fpr"] == 0.0


def test_the_checks_read_the_duo_scenarios_own_judges_and_families():
    """analysis may not import sim/bench/planted, so the checks name the duo's judges and families in
    analysis/checks/registry.py: they must be the scenario's, in both variants."""
    from esc_eval.analysis.checks.registry import DUO_FAMILIES, DUO_JUDGE, DUO_PANEL
    from esc_eval.sim.bench.planted.scenarios import duo

    for variant in (NULL, PLANTED):
        plan = duo(variant)
        assert tuple(plan.judges) == DUO_PANEL and DUO_JUDGE in plan.judges
        assert {name: t["family"] for name, t in plan.targets.items()} == DUO_FAMILIES
        assert plan.families["J1"] == DUO_FAMILIES["B"]  # the self-preference checks' judge is of B's family
