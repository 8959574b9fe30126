import numpy as np
import pandas as pd
import pytest
from scipy import stats

from esc_eval.analysis.compare.paired import holm, paired_comparison, pairwise_comparisons
from esc_eval.analysis.results.loaders import AnalysisInputError

from analysis_testdata import score_rows


def scores(per_card: dict[str, list[tuple[int, int]]]) -> pd.DataFrame:
    """per_card: card -> [(score of A, score of B)]; one overall score per dialogue."""
    rows = []
    for card, pairs in per_card.items():
        for k, (a, b) in enumerate(pairs):
            for model, s in (("A", a), ("B", b)):
                r = score_rows(f"{model}-{card}-{k}", model, {"overall": s})
                for x in r:
                    x["card_id"] = card
                rows += r
    df = pd.DataFrame(rows)
    df["score"] = df["score"].astype(float)
    return df


def test_clear_difference_is_significant_and_matches_a_direct_sign_flip_test():
    rng = np.random.default_rng(0)
    a = rng.integers(2, 5, 40)
    b = np.clip(a - rng.integers(0, 3, 40), 0, 4)
    df = scores({f"c{i}": [(int(a[i]), int(b[i]))] for i in range(40)})
    r = paired_comparison(df, "A", "B", "overall", n_resamples=4000)
    d = (a - b) * 25.0
    assert r["n_pairs"] == 40 and r["diff"] == pytest.approx(d.mean())
    assert r["ci_lo"] < r["diff"] < r["ci_hi"] and r["ci_lo"] > 0
    assert r["p_value"] < 0.01
    ref = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
                                 vectorized=True, n_resamples=4000, rng=np.random.default_rng(1))
    assert r["p_value"] == pytest.approx(ref.pvalue, abs=0.01)
    boot = paired_comparison(df, "A", "B", "overall", method="bootstrap", n_resamples=4000)
    assert boot["p_value"] < 0.01


def test_no_difference_is_not_significant_and_unpaired_cards_are_ignored():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 5, 60)
    y = rng.integers(0, 5, 60)
    per = {f"c{i}": [(int(x[i]), int(y[i]))] for i in range(60)}
    df = scores(per)
    lonely = pd.DataFrame(score_rows("A-extra", "A", {"overall": 4})).assign(card_id="only-A")
    r = paired_comparison(pd.concat([df, lonely.astype({"score": float})]), "A", "B", "overall", n_resamples=2000)
    assert r["n_pairs"] == 60 and r["p_value"] > 0.05


def test_too_few_pairs_reports_instead_of_failing():
    r = paired_comparison(scores({"c1": [(4, 0)]}), "A", "B", "overall")
    assert r["n_pairs"] == 1 and np.isnan(r["p_value"]) and "no paired test" in r["note"]
    with pytest.raises(AnalysisInputError, match="no scores for model"):
        paired_comparison(scores({"c1": [(4, 0)]}), "A", "Z", "overall")
    with pytest.raises(AnalysisInputError, match="pairing columns"):
        paired_comparison(scores({"c1": [(4, 0)]}).drop(columns="card_id"), "A", "B")


def test_holm_by_hand_and_pairwise():
    assert holm([0.01, 0.04, 0.03, float("nan")])[:3] == pytest.approx([0.03, 0.06, 0.06])
    df = scores({f"c{i}": [(4, 0)] for i in range(6)})
    t = pairwise_comparisons(df, "overall", n_resamples=500)
    assert t[["model_a", "model_b"]].values.tolist() == [["A", "B"]] and t["diff"].item() == 100.0


@pytest.mark.parametrize("n", [3, 9, 12])
def test_sign_flip_p_is_exact_for_few_pairs(n):
    from esc_eval.analysis.compare.paired import sign_flip_pvalue

    rng = np.random.default_rng(n)
    a = rng.integers(1, 5, n).astype(float)
    b = np.clip(a - rng.integers(0, 2, n), 0, 4)
    ref = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
                                 vectorized=True, n_resamples=5000, rng=np.random.default_rng(0))
    assert sign_flip_pvalue(a - b, 5000, np.random.default_rng(1)) == pytest.approx(ref.pvalue, abs=1e-12)


def test_many_pairs_resample_in_bounded_memory():
    # 8,500 dialogues (the paper's size) paired: scipy's permutation_test held 5000 x n resamples of
    # both samples at once (5000 x 8500 x 8 bytes = 340 MB each); batches keep the peak well under one of them.
    import tracemalloc

    n = 8_500
    rng = np.random.default_rng(0)
    a = rng.integers(0, 5, n)
    b = np.clip(a + rng.integers(-1, 2, n), 0, 4)
    df = pd.DataFrame({"dialogue_id": [f"{m}-{i}" for m in "AB" for i in range(n)],
                       "target_model": ["A"] * n + ["B"] * n, "card_id": [f"c{i}" for i in range(n)] * 2,
                       "language": "en", "dimension": "overall", "score": np.concatenate([a, b]).astype(float)})
    tracemalloc.start()
    try:
        r = paired_comparison(df, "A", "B", "overall", n_resamples=5000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert r["n_pairs"] == n and r["ci_lo"] < r["diff"] < r["ci_hi"] and 0 <= r["p_value"] <= 1
    assert peak < 300e6, f"peak {peak / 1e6:.0f} MB"
