"""The verdict of scores by round against planted truth (analysis/rounds/change_point.py): on curves
drawn with no change its false-positive rate stays within its nominal 5%; a step planted from round 4
is found and located at 4 (+-1); and through the real path on the fake backends (simulate, `score
--by-reply`, `analysis rounds`) a target whose replies turn bad from round 4 is located at round 4
(+-1) for at least 80% of seeds while a target that never changes holds."""
from __future__ import annotations

import numpy as np
import pandas as pd

from esc_eval.analysis.rounds.change_point import MIN_CARDS, cohort, curve_step, round_change_point


def curves(rng, cards: int, rounds: int, step_at: int | None = None, delta: float = 0.0, per_card: int = 1,
           reached: dict[int, int] | None = None) -> pd.DataFrame:
    """round_values' frame: a dialogue effect (sd 8) plus noise (sd 10) around 60, delta from round step_at."""
    rows = []
    for c in range(cards):
        for s in range(per_card):
            u, last = rng.normal(0, 8), (reached or {}).get(c, rounds)
            for k in range(1, last + 1):
                v = 60 + u + rng.normal(0, 10) + (delta if step_at and k >= step_at else 0.0)
                rows.append(("en", "t", "j", f"d{c}-{s}", k, f"c{c}", v))
    return pd.DataFrame(rows, columns=["language", "target_model", "judge", "dialogue", "round", "card_id", "value"])


def test_no_change_false_positives_within_nominal_and_a_step_at_4_is_found_there():
    rng = np.random.default_rng(0)

    def p_and_round(cards: int, delta: float, seed: int) -> tuple[float, float, dict]:
        x = 60 + rng.normal(0, 8, (cards, 1)) + rng.normal(0, 10, (cards, 6)) + np.r_[[0.0] * 3, [delta] * 3]
        step = curve_step(x, np.ones_like(x), n_boot=300, seed=seed)
        return step["p_value"], step["split"] + 1, step  # rounds 1..6: the split index is the round - 1

    n = 400  # seeds; the Monte-Carlo error of a 5% rate over 400 is 1.1 points
    fp = sum(p_and_round(MIN_CARDS, 0.0, i)[0] < 0.05 for i in range(n))
    assert fp / n <= 0.05 + 2 * (0.05 * 0.95 / n) ** 0.5, fp
    found = [p_and_round(20, -12.5, i) for i in range(100)]  # half a point on the 0-4 scale, 20 cards
    assert sum(p < 0.05 for p, _, s in found if s["change"] < 0) >= 80
    assert sum(abs(k - 4) <= 1 for _, k, _ in found) >= 80
    covered = sum(s["split_low"] + 1 <= 4 <= s["split_high"] + 1 for _, _, s in found)
    assert covered >= 85, covered
    # the frame's path says the same as the arrays'
    row = round_change_point(curves(rng, 20, 6, step_at=4, delta=-25.0), n_boot=300).iloc[0]
    assert row["verdict"] == "degrades" and row["change_round"] == 4 and row["round_low"] <= 4 <= row["round_high"]


def test_the_cohort_is_the_same_dialogues_at_every_round_and_few_cards_get_no_verdict():
    rng = np.random.default_rng(1)
    # cards 0-5 stop at round 2: 6 of 12 dialogues reached round 6, so the cohort is the 6 that did
    values = curves(rng, 12, 6, reached={c: 2 for c in range(6)})
    c, at = cohort(values)
    assert at == 6 and c["dialogue"].nunique() == 6 and set(c.groupby("round")["dialogue"].nunique()) == {6}
    row = round_change_point(values, n_boot=200).iloc[0]
    assert row["n_cards"] == 6 < MIN_CARDS and row["verdict"] == "n/a" and "at least 10" in row["note"]
    assert row["change_round"] in range(2, 7) and row["cohort_round"] == 6
    assert round_change_point(values, n_boot=200, cohort_at=2).iloc[0]["n_dialogues"] == 12
    one = round_change_point(curves(rng, 12, 1), n_boot=50).iloc[0]
    assert one["verdict"] == "n/a" and "one round" in one["note"]


def test_a_failure_planted_from_round_4_is_located_through_simulate_score_and_analysis(tmp_path):
    from esc_eval.analysis.rounds.by_round import write_rounds
    from esc_eval.serve.registry.ref import ModelRef
    from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
    from esc_eval.sim.jobs.simulation import run_simulation
    from esc_eval.sim.judging.config import JudgeConfig
    from esc_eval.sim.judging.panel import PanelConfig, PanelJudge
    from esc_eval.sim.launch.options import score_by_round_run
    from esc_eval.sim.pool.config import ExecutionConfig

    local = ExecutionConfig(executor="local")
    failing = "fake/fixed?reply=SOLID+I+hear+you.&bad_from=4&bad_reply=POOR+Whatever."
    steady = "fake/fixed?reply=SOLID+I+hear+you."
    run_simulation(SimulationConfig(cards="sample", languages=["en"], limit=12, rounds=5, role=ModelRef(model="fake/seeker?vary=1"),
                                    targets=[ModelRef(model=failing), ModelRef(model=steady)], execution=local),
                   tmp_path / "run")
    # ten judges, each one seed of a planted rater: 3 for a SOLID reply, 2 for a POOR one (a point), noise sd 0.7
    seeds = range(10)
    panel = PanelConfig(judges=[PanelJudge(judge=JudgeConfig(model=ModelRef(model=f"fake/judge?marks=SOLID:3,POOR:2&noise=0.7&seed={s}"),
                                                             name=f"seed{s}", dimensions=["overall"]))
                                for s in seeds])
    result = score_by_round_run(ScoringConfig(panel=panel, execution=local), str(tmp_path / "run"), str(tmp_path / "rounds"),
                                rule="reply", say=lambda _: None)
    assert result["failed"] == 0 and result["by_round"]["rule"] == "reply" and result["judges"][0] == "seed0:reply"
    paths, markdown = write_rounds([str(tmp_path / "rounds")], str(tmp_path / "an"), n_boot=200)
    change = pd.read_csv(paths["change_csv"])
    assert set(change["rule"]) == {"reply"} and set(change["n_cards"]) == {12} and len(change) == 20
    bad = change[change["target_model"] == failing]
    located = ((bad["verdict"] == "degrades") & ((bad["change_round"] - 4).abs() <= 1)).sum()
    assert located >= 0.8 * len(seeds), bad[["judge", "verdict", "change_round", "p_value"]]
    held = change[change["target_model"] == steady]
    assert (held["verdict"] == "holds").sum() >= 0.8 * len(seeds)
    assert "degrades from round 4" in markdown and "Survivors" in markdown
