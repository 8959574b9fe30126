"""Does the ranking depend on the simulator: each target's score and rank per role model, Kendall's
tau between the rankings and the pooled ranking against hand-computed values; the bootstrap over
cards; runs with one role model each, compared through the CLI and the report."""
from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from analysis_testdata import dialogue_row, score_rows
from esc_eval.analysis.report.report import write_report
from esc_eval.analysis.seekers.rankings import bootstrap_rankings
from esc_eval.analysis.seekers.simulators import POOLED, simulator_rankings, simulator_values


def _values(table, strategy="official"):
    """(role model, model, card, value) -> dialogue_scores layout."""
    return pd.DataFrame([{"judge": "j", "dialogue_id": f"{r}{m}{c}", "language": "en", "target_model": m,
                          "role_model": r, "strategy": strategy, "card_id": c, "value": float(v)}
                         for r, m, c, v in table])


def _constant(means: dict[str, dict[str, float]], cards=("1", "2", "3")):
    return _values([(r, m, c, v) for r, per in means.items() for m, v in per.items() for c in cards])


def test_three_targets_two_role_models_by_hand():
    # role A ranks m1 > m2 > m3, role B m2 > m1 > m3: one discordant pair of three -> tau = (2 - 1) / 3
    ranked, taus = simulator_rankings(simulator_values(_constant({"A": {"m1": 3, "m2": 2, "m3": 1},
                                                                  "B": {"m1": 2, "m2": 3, "m3": 1}})), n_boot=200)
    s = ranked.set_index(["simulator", "model"])
    assert s.loc["A", "score"].tolist() == [75.0, 50.0, 25.0] and s.loc["A", "rank"].tolist() == [1, 2, 3]
    assert s.loc["B", "score"].tolist() == [50.0, 75.0, 25.0] and s.loc["B", "rank"].tolist() == [2, 1, 3]
    # pooled: the mean over role models of each target's score; m1 and m2 tie at 62.5 and share rank 1.5
    assert s.loc[POOLED, "score"].tolist() == [62.5, 62.5, 25.0] and s.loc[POOLED, "rank"].tolist() == [1.5, 1.5, 3]
    [t] = taus.to_dict(orient="records")
    assert (t["simulator_a"], t["simulator_b"], t["n_cards"], t["n_models"]) == ("A", "B", 3, 3)
    assert t["kendall_tau"] == pytest.approx(1 / 3)
    # every card says the same: every resample too, zero-width intervals
    assert (t["kendall_tau_lo"], t["kendall_tau_hi"]) == (pytest.approx(1 / 3), pytest.approx(1 / 3))
    assert (s.loc[("A", "m1"), "score_lo"], s.loc[("A", "m1"), "score_hi"]) == (75.0, 75.0)


def test_reversed_and_identical_rankings_give_minus_one_and_one():
    order = {"a": 4, "b": 3, "c": 2, "d": 1}
    _, taus = simulator_rankings(simulator_values(_constant({"A": order, "B": {m: 5 - v for m, v in order.items()},
                                                             "C": order})), n_boot=50)
    got = {(r["simulator_a"], r["simulator_b"]): r["kendall_tau"] for r in taus.to_dict(orient="records")}
    assert got == {("A", "B"): pytest.approx(-1.0), ("A", "C"): pytest.approx(1.0), ("B", "C"): pytest.approx(-1.0)}


def test_pooled_mean_and_its_bootstrap_interval_by_hand():
    # m1 under A: cards (4, 2) -> 3 (75); under B: (2, 2) -> 2 (50); pooled 2.5 -> 62.5. Resampling the two
    # cards gives {1,1}, {1,2}, {2,2} with chances 1/4, 1/2, 1/4: A's mean 4, 3, 2 (interval [50, 100]),
    # the pooled mean (4+2)/2, (3+2)/2, (2+2)/2 = 3, 2.5, 2 (interval [50, 75]).
    v = _values([("A", "m1", "1", 4), ("A", "m1", "2", 2), ("B", "m1", "1", 2), ("B", "m1", "2", 2),
                 ("A", "m2", "1", 1), ("A", "m2", "2", 1), ("B", "m2", "1", 1), ("B", "m2", "2", 1)])
    s = simulator_rankings(simulator_values(v), n_boot=4000)[0].set_index(["simulator", "model"])
    assert s.loc[(POOLED, "m1"), "score"] == 62.5 and s.loc[(POOLED, "m2"), "score"] == 25.0
    assert (s.loc[("A", "m1"), "score_lo"], s.loc[("A", "m1"), "score_hi"]) == (50.0, 100.0)
    assert (s.loc[(POOLED, "m1"), "score_lo"], s.loc[(POOLED, "m1"), "score_hi"]) == (50.0, 75.0)


def test_the_bootstrap_resamples_the_same_cards_in_every_arm():
    import numpy as np

    a = np.array([[4.0, 0.0], [0.0, 4.0]])  # cards x models
    boot = bootstrap_rankings([a, a], n_boot=300, seed=1)
    assert (boot.boot_means[:, 0] == boot.boot_means[:, 1]).all()  # one resample serves both arms
    tau, draws = boot.tau(0, 1)
    assert np.isnan(tau)  # the point ranking is a tie: no order to agree with
    assert np.nanmin(draws) == pytest.approx(1.0)  # the same cards -> the same order, whenever there is one


def test_targets_and_cards_not_met_under_every_simulator_are_left_out():
    v = _values([("A", "m1", "1", 4), ("A", "m1", "2", 4), ("B", "m1", "1", 3), ("B", "m1", "2", 3),
                 ("A", "m2", "1", 1), ("A", "m2", "2", 1), ("B", "m2", "1", 1), ("B", "m2", "2", 1),
                 ("A", "m1", "3", 0), ("A", "m2", "3", 0),  # card 3: role A only
                 ("A", "m3", "1", 2), ("A", "m3", "2", 2)])  # m3: role A only
    ranked, taus = simulator_rankings(simulator_values(v), n_boot=50)
    assert set(ranked["model"]) == {"m1", "m2"} and set(ranked["n_cards"]) == {2}
    assert "left out (not met under every simulator): m3" in taus.iloc[0]["note"]
    assert ranked.set_index(["simulator", "model"]).loc[("A", "m1"), "score"] == 100.0  # card 3 not counted


def test_strategies_are_simulators_when_the_role_model_is_one():
    v = pd.concat([_values([("R", m, c, x) for m, x in (("m1", 4), ("m2", 2)) for c in "12"], "official"),
                   _values([("R", m, c, x) for m, x in (("m1", 1), ("m2", 3)) for c in "12"], "zero_shot")])
    assert set(simulator_values(v)["simulator"]) == {"official", "zero_shot"}
    assert set(simulator_values(v, "role_model")["simulator"]) == {"R"}
    assert simulator_rankings(simulator_values(v), n_boot=0)[1].iloc[0]["kendall_tau"] == pytest.approx(-1.0)


def _role_run(make_run, name, role, levels):
    dialogues, scores = [], []
    for m, level in levels.items():
        for c in range(3):
            did = f"{role}-{m}-{c}"
            dialogues.append(dialogue_row(did, m, card_id=f"c{c}", role_model=role))
            scores += score_rows(did, m, [level] * 7)
    return make_run(name, dialogues=dialogues, scores=scores)


def test_two_runs_one_role_model_each_through_the_cli_and_the_report(make_run, tmp_path):
    a = _role_run(make_run, "roleA", "role-a", {"m1": 4, "m2": 2, "m3": 0})
    b = _role_run(make_run, "roleB", "role-b", {"m1": 2, "m2": 4, "m3": 0})
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "analysis", "seekers", str(a), str(b), "-o", str(out),
                           "--n-boot", "100"], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert set(json.loads(proc.stdout)) == {"simulators_markdown", "simulators_csv", "simulators_tau_csv"}
    tau = pd.read_csv(out / "simulators_tau.csv").iloc[0]
    assert (tau["simulator_a"], tau["simulator_b"]) == ("role-a", "role-b") and tau["kendall_tau"] == pytest.approx(1 / 3)
    pooled = pd.read_csv(out / "simulators.csv").query("simulator == 'pooled'").set_index("model")["score"]
    assert pooled.to_dict() == {"m1": 75.0, "m2": 75.0, "m3": 0.0}
    assert "| m1 | 100.0 [100.0, 100.0] (rank 1 [1, 1]) | 50.0 [50.0, 50.0] (rank 2 [2, 2]) |" in proc.stderr
    md = write_report([a, b], tmp_path / "rep", n_boot=50)["markdown"].read_text()
    section = md.split("## Does the ranking depend on the simulator?")[1].split("\n## ")[0]
    assert "| en | judge-a | role-a | role-b | 3 | 3 | +0.33 [+0.33, +0.33] |" in section
    assert "75.0 [75.0, 75.0] (rank 1.5 [1.5, 1.5])" in section
    bad = subprocess.run([sys.executable, "-m", "esc_eval.cli", "analysis", "seekers", str(a), str(b), "--by", "strategy",
                          "-o", str(tmp_path / "none")], capture_output=True, text=True, timeout=180)
    assert bad.returncode == 2 and not (tmp_path / "none").exists()
    assert "one strategy (zero_shot): no second simulator" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
