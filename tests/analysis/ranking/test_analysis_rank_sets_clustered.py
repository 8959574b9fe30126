"""Rank-sets where a card has several dialogues of one target (seeds, strategies): the variance is
clustered by card. By hand on a small case; equal to the plain variance with one dialogue per card;
in a simulation with a strong card effect the clustered intervals cover the true means at about the
nominal level where the unclustered ones do not; on a run folder with seeds, the rows say so."""
from __future__ import annotations

import numpy as np
import pytest

from esc_eval.analysis.results.fake_runs import write_fake_run
from esc_eval.analysis.results.loaders import load_scores
from esc_eval.analysis.trust.ppi import clustered_variance, ppi_mean
from esc_eval.analysis.ranking.rank_sets import build_rank_sets, simultaneous_means

K, CARDS, SEEDS, REPS = 4, 40, 4, 300
MU = 2.0 + 0.4 * np.arange(K)


def test_the_clustered_variance_by_hand():
    # cards a: (1, 3) and b: (5, 7); mean 4; each card's share: (-3 - 1) / 4 = -1 and (1 + 3) / 4 = 1
    assert clustered_variance([1.0, 3.0, 5.0, 7.0], [], ["a", "a", "b", "b"], []) == pytest.approx(2.0)
    # the same values, one per card: var / n with ddof 0 = 5 / 4
    assert clustered_variance([1.0, 3.0, 5.0, 7.0], [], ["a", "b", "c", "d"], []) == pytest.approx(1.25)
    # a card's labelled and unlabelled dialogues fall in one term: labelled (0, 2) mean 1, unlabelled
    # (4, 8) mean 6; card a holds 0 and 4: -1/2 + -2/2 = -1.5; card b holds 2 and 8: 1/2 + 2/2 = 1.5
    assert clustered_variance([0.0, 2.0], [4.0, 8.0], ["a", "b"], ["a", "b"]) == pytest.approx(4.5)


def test_one_dialogue_per_card_gives_the_plain_ppi_interval():
    rng = np.random.default_rng(3)
    y = rng.normal(2, 1, 40)
    yhat = y + rng.normal(0, 0.5, 40)
    yhat_u = rng.normal(2, 1, 200)
    plain = ppi_mean(y, yhat, yhat_u)
    clustered = ppi_mean(y, yhat, yhat_u, clusters=[f"c{i}" for i in range(40)],
                         clusters_unlabeled=[f"u{i}" for i in range(200)])
    assert clustered.se == pytest.approx(plain.se) and clustered.estimate == plain.estimate


def _coverage(clustered: bool, seed: int = 11) -> float:
    rng = np.random.default_rng(seed)
    cards = np.repeat([f"card-{c}" for c in range(CARDS)], SEEDS)
    covered = 0
    for _ in range(REPS):
        # a card's seeker weighs on every dialogue of it: its seeds move together
        effect = np.repeat(rng.normal(0, 0.8, (K, CARDS)), SEEDS, axis=1)
        values = MU[:, None] + effect + rng.normal(0, 0.3, (K, CARDS * SEEDS))
        est = simultaneous_means(list(values), None, 0.95, [cards] * K if clustered else None)
        covered += all(e.lo <= m <= e.hi for e, m in zip(est, MU))
    return covered / REPS


def test_with_seeds_only_the_clustered_intervals_hold_the_true_means_together():
    clustered, plain = _coverage(True), _coverage(False)
    assert clustered >= 0.9, clustered  # nominal 0.95 (40 cards; CR0 runs a little narrow)
    assert plain < 0.6, plain  # four seeds counted as four independent dialogues: far too narrow


def test_a_run_with_seeds_gives_sets_clustered_by_card(tmp_path):
    write_fake_run(tmp_path / "run", 4 * 12 * 3, models=["m-a", "m-b", "m-c", "m-d"], seeds_per_card=3)
    scores = load_scores([tmp_path / "run"])
    table = build_rank_sets(scores)
    assert len(table) == 8 and all("clustered by card" in note for note in table["note"])
    # the same dialogues with the card ids made distinct: treated as independent (the fake run's seeds
    # are independent draws, so here the clustered intervals are not wider, only computed otherwise)
    apart = build_rank_sets(scores.assign(card_id=scores["dialogue_id"]))
    assert not any("clustered" in note for note in apart["note"])
    merged = table.merge(apart, on=["language", "model"], suffixes=("", "_apart"))
    assert len(merged) == len(table) and (merged["estimate"] == merged["estimate_apart"]).all()
    width, width_apart = merged["hi"] - merged["lo"], merged["hi_apart"] - merged["lo_apart"]
    assert (abs(width - width_apart) > 0.01).any()
