"""Cooperative vs worst-case seekers: each model's change and the ranking's change with intervals,
against hand-computed values; unpaired arms; a run without worst-case seekers is one line."""
from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from analysis_testdata import dialogue_row, score_rows
from esc_eval.analysis.report.report import write_report
from esc_eval.analysis.seekers.seeker_kinds import ALL_WORST, dialogue_values, ranking_shift, seeker_shift


def _values(table):
    """(model, card, strategy, value) -> dialogue_values layout."""
    kinds = {"official": "cooperative", "zero_shot": "cooperative", "resistant": "worst_case", "volatile": "worst_case"}
    return pd.DataFrame([{"judge": "j", "dialogue_id": f"{m}{c}{s}", "language": "en", "target_model": m,
                          "kind": kinds[s], "strategy": s, "card_id": c, "value": float(v)} for m, c, s, v in table])


def test_change_is_paired_by_card_and_matches_hand_computation():
    # model a: cards 1, 2 (cooperative 4, 2; worst-case 1, 1) and card 3 cooperative only (not paired)
    v = _values([("a", "1", "official", 4), ("a", "2", "official", 2), ("a", "3", "official", 0),
                 ("a", "1", "resistant", 1), ("a", "2", "resistant", 1), ("a", "1", "volatile", 3),
                 ("a", "2", "volatile", 3)])
    shift = seeker_shift(v, n_boot=2000).set_index("seeker")
    pooled = shift.loc[ALL_WORST]
    # per card: worst-case = mean of resistant and volatile = 2 on both; paired on cards 1, 2 only
    assert pooled["paired"] and pooled["n_paired"] == 2 and pooled["n_cooperative_cards"] == 3
    assert pooled["cooperative"] == pytest.approx(3 * 25) and pooled["worst_case"] == pytest.approx(2 * 25)
    assert pooled["change"] == pytest.approx(-25.0)
    # two paired cards: differences -2 and 0, resamples give -2, -1, 0 (x25): the interval is [-50, 0]
    assert (pooled["change_lo"], pooled["change_hi"]) == (pytest.approx(-50.0), pytest.approx(0.0))
    assert "paired on the 2 cards" in pooled["note"]
    assert shift.loc["resistant", "change"] == pytest.approx((1 - 3) * 25)
    assert shift.loc["volatile", "change"] == pytest.approx((3 - 3) * 25)


def test_arms_without_shared_cards_are_resampled_apart():
    v = _values([("a", "1", "official", 4), ("a", "2", "official", 2), ("a", "3", "resistant", 1),
                 ("a", "4", "resistant", 1)])
    r = seeker_shift(v, n_boot=500).iloc[0]
    assert not r["paired"] and r["n_paired"] == 0 and "unpaired" in r["note"]
    assert r["change"] == pytest.approx((1 - 3) * 25)
    assert r["change_lo"] == pytest.approx(-75.0) and r["change_hi"] == pytest.approx(-25.0)


def test_ranking_change_and_kendall_tau():
    table = []
    for c in ("1", "2", "3"):
        table += [("a", c, "official", 4), ("a", c, "resistant", 1), ("b", c, "official", 3), ("b", c, "resistant", 3),
                  ("c", c, "official", 1), ("c", c, "resistant", 0)]
    ranks = ranking_shift(_values(table), n_boot=300).set_index("model")
    assert ranks["rank_cooperative"].to_dict() == {"a": 1, "b": 2, "c": 3}
    assert ranks["rank_worst_case"].to_dict() == {"a": 2, "b": 1, "c": 3}
    assert ranks["rank_change"].to_dict() == {"a": 1, "b": -1, "c": 0}
    # tau of (1, 2, 3) vs (2, 1, 3): one discordant pair of three -> 1/3; constant per card: zero-width intervals
    assert ranks["kendall_tau"].iloc[0] == pytest.approx(1 / 3)
    assert (ranks.loc["a", "rank_change_lo"], ranks.loc["a", "rank_change_hi"]) == (1, 1)
    assert ranks.loc["a", "n_cards"] == 3


def _run(make_run, strategies):
    dialogues, scores = [], []
    for m, (coop, worst) in (("model-a", (4, 1)), ("model-b", (3, 3))):
        for c in range(4):
            for s in strategies:
                did = f"{m}-{c}-{s}"
                dialogues.append({**dialogue_row(did, m, card_id=f"c{c}"), "strategy": s})
                scores += score_rows(did, m, [worst if s == "resistant" else coop] * 7)
    return make_run("-".join(strategies), dialogues=dialogues, scores=scores)


def test_report_section_and_cli(make_run, tmp_path):
    run = _run(make_run, ("official", "resistant"))
    assert set(dialogue_values(pd.DataFrame(), pd.DataFrame())) >= {"value", "kind"}
    md = write_report([run], tmp_path / "rep", n_boot=100)["markdown"].read_text()
    section = md.split("## Cooperative vs worst-case seekers")[1].split("\n## ")[0]
    assert "| model-a | worst-case (all) | 4 | 100.00 [100.0, 100.0] | 25.00 [25.0, 25.0] | -75.00" in section
    assert "| model-a | 4 | 1 [1, 1] | 2 [2, 2] | +1.0 [+1.0, +1.0] |" in section
    out = tmp_path / "cli"
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "analysis", "seekers", str(run), "-o", str(out),
                           "--n-boot", "50"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert pd.read_csv(out / "seekers.csv").set_index(["model", "seeker"]).loc[("model-b", ALL_WORST), "change"] == 0
    assert pd.read_csv(out / "seekers_ranking.csv")["rank_change"].tolist() == [1, -1]


def test_seekers_of_a_run_without_worst_case_seekers_compares_its_strategies(make_run, tmp_path):
    # Two cooperative strategies: no worst-case comparison, but two simulators (by strategy) to rank under.
    run = _run(make_run, ("official", "zero_shot"))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "analysis", "seekers", str(run), "-o", str(out),
                           "--n-boot", "20"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (out / "simulators.md").exists() and not (out / "seekers.md").exists()
    assert pd.read_csv(out / "simulators_tau.csv")[["simulator_a", "simulator_b"]].values.tolist() == [["official", "zero_shot"]]
    assert "No model met both" in write_report([run], tmp_path / "rep", n_boot=0)["markdown"].read_text()


def test_seekers_of_a_run_with_one_role_model_and_one_strategy_is_one_line(make_run, tmp_path):
    run = _run(make_run, ("official",))
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "analysis", "seekers", str(run), "-o",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and not (tmp_path / "out").exists() and proc.stdout == ""
    assert proc.stderr.strip() == (f"error: {run}: one role model (fake/role) and one strategy (official): no second "
                                   "simulator to rank the targets under, and no target met both cooperative and "
                                   "worst-case seekers; simulate the same cards and targets with a second role model, "
                                   "or with strategies: [official, resistant, low_engagement, volatile]")
    md = write_report([run], tmp_path / "rep", n_boot=0)["markdown"].read_text()
    assert "One role model (fake/role) and one strategy (official): no second simulator" in md
