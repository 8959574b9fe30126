"""Planted runs through the real jobs (sim/bench/planted): chunked so every size is the first chunks,
each job's rows where the analyses read them, the truth planted beside them."""
from __future__ import annotations

from pathlib import Path

import pytest

from esc_eval.serve.backends import planted_math as pm
from esc_eval.sim.bench.planted import planted_runner, plan, scenario_truth
from esc_eval.sim.bench.planted.scenarios import people_offset
from esc_eval.sim.runs.runfolder import RunFolder


def _rows(paths, kind):
    return [r for p in paths for r in RunFolder(p, create=False).iter_rows(kind)]


def test_a_duo_replicate_is_simulated_scored_by_a_panel_judged_in_pairs_and_scored_by_people(tmp_path):
    runner = planted_runner(tmp_path)
    with runner("duo", "planted", 1, [4, 8]) as runs:
        assert sorted(runs) == [4, 8]
        small, big = runs[4]["paths"], runs[8]["paths"]
        assert len(small["runs"]) == 1 and len(big["runs"]) == 2 and big["runs"][0] == small["runs"][0]
        dialogues = _rows(big["runs"], "dialogues")
        assert len(dialogues) == 16 and {d["target_model"] for d in dialogues} == {"A", "B"}
        scores = _rows(big["runs"], "scores")
        assert {s["judge"] for s in scores} == {"J1", "J2", "J3"} and len(scores) == 3 * 16 * 7
        windowed = [s for s in scores if s["judge"] == "J2" and s["rounds_left_out"]]
        assert windowed and all(s["score"] is not None for s in windowed)  # J2's context: the real windowing ran
        assert len(_rows(big["runs"], "pairwise")) == 8 * 7 * 2
        truth = runs[8]["truth"]
        assert set(truth["reply_words"]) == {d["dialogue_id"] for d in dialogues}
        assert truth["judge_mean"]["J3"]["A"] - truth["judge_mean"]["J3"]["B"] == pytest.approx(0.25, abs=0.03)
        assert truth["first_share"]["P"] == 0.6 and "position" in runs[8]["effects"]
        assert Path(big["humans"][1]).read_text().count('"dimension"') % 7 == 0
        for d in dialogues:  # the quality each target planted, read back from its replies
            q = {t["q"] for t in pm.read_tags(" ".join(t["text"] for t in d["turns"])) if "q" in t}
            assert q == ({"2.500"} if d["target_model"] == "A" else {"2.250"})
    assert not any(tmp_path.rglob("dialogues"))  # removed once measured


def test_rounds_settings_and_people_replicates(tmp_path):
    from esc_eval.analysis.seekers.esconv import sample_file  # the test reads analysis's shipped people

    runner = planted_runner(tmp_path)
    with runner("rounds", "planted", 0, [3]) as runs:
        rounds = _rows(runs[3]["paths"]["rounds"], "dialogues")
        assert len(rounds) == 3 * 5 and {r["end_round"] for r in rounds} == {1, 2, 3, 4, 5}
        assert runs[3]["truth"]["round_mean"]["A"][1] > runs[3]["truth"]["round_mean"]["A"][5]
    with runner("settings", "null", 0, [3]) as runs:
        strategies = {d["strategy"] for d in _rows(runs[3]["paths"]["runs"], "dialogues")}
        assert strategies == {"official", "official+resistance=strong"}
    with runner("people", "planted", 0, [3, 100], str(sample_file())) as runs:
        assert sorted(runs) == [3, 8]  # capped at half the people file's 16 usable people
        dialogues = _rows(runs[8]["paths"]["runs"], "dialogues")
        spoiled = set(runs[8]["truth"]["spoiled_cards"])
        assert len(runs[8]["truth"]["reference_ids"]) == 8
        for d in dialogues:
            said = d["turns"][3]["text"]
            assert ("As an AI language model" in said) == (d["card_id"] in spoiled)
    with pytest.raises(ValueError, match="people's dialogues"):
        with runner("people", "null", 0, [3]):
            pass


def test_what_a_scenario_plants():
    assert plan("duo", "null").targets["B"]["q"] == 2.5 and plan("duo", "planted").targets["B"]["q"] == 2.25
    null = scenario_truth("duo", "null")
    assert null["judge_mean"]["J2"]["A"] == pytest.approx(null["people_mean"]["A"], abs=1e-6)  # people_offset
    assert abs(people_offset()) < 0.05 and null["length_slope"]["J2"] == 0.0
    planted = scenario_truth("duo", "planted")
    assert planted["length_slope"]["J2"] == pytest.approx(0.0025, rel=0.1)  # a quarter point per 100 words
    assert scenario_truth("settings", "planted")["setting_mean"]["official+resistance=strong"]["A"] == pytest.approx(2.0,
                                                                                                                  abs=0.02)
    with pytest.raises(ValueError, match="unknown planted scenario"):
        plan("nothing", "null")


def test_a_judges_expected_stated_score_is_the_mean_of_its_draws():
    """judge_expected (what a panel's mean rule reads) against a direct draw of the planted judge's P(0..4)."""
    import numpy as np

    from esc_eval.sim.bench.planted.truth import _model, _words

    j, t = _model("judge", plan("duo", "planted").judges["J2"]), _model("target", plan("duo", "planted").targets["B"])
    rng = np.random.default_rng(0)
    words = rng.choice(_words(t), 200_000)
    center = t.q + j.beta * words / 100 + j.offset + pm.center_sd(j.card_sd, j.sigma) * rng.normal(size=words.size)
    drawn = (pm.label_probs(center, pm.stated_spread(j.card_sd, j.sigma, j.people_sd), j.T) * np.arange(5)).sum(-1).mean()
    assert scenario_truth("duo", "planted")["judge_expected"]["J2"]["B"] == pytest.approx(drawn, abs=0.005)


def test_the_panels_population_coincidences_are_those_of_a_large_draw_of_its_judges():
    """panel_coincidence (exact) against 400,000 draws of the duo's three planted judges scoring shared cards:
    the matrix cell by cell and Krippendorff's alpha of the draws (the planted J3 is noisier, so its alpha is lower)."""
    import numpy as np

    from esc_eval.analysis.panels.agreement import alpha_from_coincidence, unit_coincidences
    from esc_eval.sim.bench.planted.truth import _bias, _model, _words

    rng = np.random.default_rng(1)
    alphas = {}
    for variant in ("null", "planted"):
        p = plan("duo", variant)
        judges, targets = [_model("judge", o) for o in p.judges.values()], [_model("target", o) for o in p.targets.values()]
        n = 200_000
        labels = []
        z = {t.family: rng.normal(size=n) for t in targets}
        words = {t.family: rng.choice(_words(t), n) for t in targets}
        for j in judges:
            rho, spread = pm.shrink(j.card_sd, j.sigma), pm.stated_spread(j.card_sd, j.sigma, j.people_sd)
            labels.append(np.concatenate([pm.argmax_label(t.q + _bias(j, t, words[t.family])
                                                          + rho * (j.card_sd * z[t.family] + j.sigma * rng.normal(size=n)),
                                                          spread) for t in targets]))
        drawn = unit_coincidences(np.array(labels, dtype=float)).sum(axis=0)
        exact = np.asarray(scenario_truth("duo", variant)["panel_coincidence"])
        assert exact.sum() == pytest.approx(1.0) and np.allclose(exact, exact.T)
        assert np.abs(drawn / drawn.sum() - exact).max() < 0.003
        alphas[variant] = float(alpha_from_coincidence(exact * 1e12))
        assert alphas[variant] == pytest.approx(float(alpha_from_coincidence(drawn)), abs=0.006)
    assert alphas["planted"] < alphas["null"] - 0.1
