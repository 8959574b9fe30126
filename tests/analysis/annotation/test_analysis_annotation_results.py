"""Live results equal the analysis functions on the same table; ICC(1) against the published
example; the rubrics the page shows."""
from __future__ import annotations

import math
import statistics

import pandas as pd

from annotate_testdata import Client, answer_queue, fake_run, serving, study_request
from esc_eval.analysis.annotation.agreement import agreement_summary, icc_oneway, icc_table, pairwise_kappa
from esc_eval.analysis.annotation.formats import annotation_table
from esc_eval.analysis.annotation.study import create_study
from esc_eval.analysis.trust.correlation import correlation_table, scores_wide
from esc_eval.analysis.trust.correlation_ci import human_wide
from esc_eval.analysis.trust.judge_accuracy import judge_accuracy
from esc_eval.analysis.results.loaders import load_scores
from esc_eval.analysis.annotation.rubric import annotation_rubric, annotation_rubric_version
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES


def _close(a, b) -> bool:
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or (isinstance(b, float) and math.isnan(b))
    return b is not None and abs(a - b) < 1e-9


def test_results_equal_the_analysis_functions_on_the_exported_table(tmp_path):
    run = fake_run(tmp_path / "run", 45)
    with serving([run]) as (base, service):
        create_study(service.store, service.viewer.index, study_request(sample=18, overlap=2))
        for a in ("a1", "a2", "a3"):
            answer_queue(Client(base, a), service.store, "s1", a)
        got = Client(base).ok("/api/results")
        table = annotation_table(service.store, "s1", service.viewer.index)
    long = table[["annotator", "dialogue_id", "dimension", "score"]].astype({"score": float})
    assert got["n_answers"] == len(long) == 18 * 2 * 7
    want = agreement_summary(long).set_index("dimension")
    for row in got["agreement"]:
        w = want.loc[row["dimension"]]
        assert row["n_items"] == w["n_items"]
        assert _close(row["mean_pairwise_kappa"], w["mean_pairwise_kappa"])
        assert _close(row["krippendorff_alpha"], w["krippendorff_alpha"])
    assert 0 < want.loc["all", "krippendorff_alpha"] < 1  # the scores agree partly: a real figure
    assert len(got["pairs"]) == len(pairwise_kappa(long))
    icc = icc_table(long).set_index("dimension")
    for row in got["icc"]:
        assert _close(row["icc"], icc.loc[row["dimension"], "icc"]) and _close(row["ci_lo"], icc.loc[row["dimension"], "ci_lo"])
    # Table 4 against the low median of each dialogue's annotators; Table 3 against their mean.
    scores = load_scores([run])
    ref = (long.groupby(["dialogue_id", "dimension"])["score"].agg(lambda s: statistics.median_low(list(s)))
           .reset_index())
    acc = judge_accuracy(scores, ref).set_index("dimension")
    [judge] = got["judges"]
    assert judge["judge"] == "fake/judge"
    for row in judge["accuracy"]:
        assert _close(row["ACC"], acc.loc[row["dimension"], "ACC"])
        assert _close(row["ACC_soft"], acc.loc[row["dimension"], "ACC_soft"])
    corr = correlation_table(scores_wide(scores), human_wide(long), pairing="matched", label="fake/judge")
    got_corr = {(c["human"], c["method"]): c["r"] for c in judge["correlation"] if c["level"] == "sample"}
    assert len(got_corr) == len(corr) == 8 * 3
    for c in corr.itertuples():
        assert _close(got_corr[(c.human, c.method)], c.r)
    dataset = [c for c in judge["correlation"] if c["level"] == "dataset"]
    assert dataset and all(set(c) == {"metric", "human", "method", "level", "r", "p", "n", "note"} for c in dataset)
    assert "m1" not in repr(got)  # no model name in the results
    progress = {p["annotator"]: p for p in got["progress"]}
    assert all(p["done"] == p["assigned"] == 12 for p in progress.values())


def test_icc_matches_shrout_and_fleiss():
    """Shrout & Fleiss (1979) Table 2: 6 targets x 4 judges; ICC(1,1) = .17, ICC(1,4) = .44
    (95% CIs as pingouin's documentation prints them for this table: [-0.13, 0.72], [-0.88, 0.91])."""
    data = [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]]
    rows = pd.DataFrame([{"annotator": f"j{j}", "dialogue_id": f"t{i}", "dimension": "overall", "score": v}
                         for i, r in enumerate(data) for j, v in enumerate(r)])
    got = icc_oneway(rows, "overall")
    assert round(got["icc"], 2) == 0.17 and round(got["icc_k"], 2) == 0.44 and got["k"] == 4 and got["n_items"] == 6
    assert (round(got["ci_lo"], 2), round(got["ci_hi"], 2)) == (-0.13, 0.72)
    assert (round(got["ci_k_lo"], 2), round(got["ci_k_hi"], 2)) == (-0.88, 0.91)
    # unequal scores per item: items with one score drop out; exact agreement has no ICC
    single = pd.concat([rows, pd.DataFrame([{"annotator": "j0", "dialogue_id": "t9", "dimension": "overall", "score": 3}])])
    assert icc_oneway(single, "overall")["n_items"] == 6
    same = rows.assign(score=rows["dialogue_id"].str[1:].astype(int))
    assert math.isnan(icc_oneway(same, "overall")["icc"]) and "within-item variance is 0" in icc_oneway(same, "overall")["note"]


def test_rubrics_the_page_shows():
    en, zh = annotation_rubric("en"), annotation_rubric("zh")
    assert list(en) == DIMENSION_NAMES
    for dim in DIMENSION_NAMES:
        assert sorted(en[dim]["levels"]) == ["0", "1", "2", "3", "4"] and en[dim]["explanation"]
        assert len(en[dim]["table16"]) == 5
    # Figure 12 (English fluency) names Chinese replies; Figure 13 (Chinese fluency) does not.
    assert "In particular" in en["fluency"]["levels"]["1"] and "In particular" not in zh["fluency"]["levels"]["1"]
    assert en["overall"]["table16"]["4"] == "I will use it myself and recommend it to friends."
    assert annotation_rubric_version().startswith("paper-fig12-19+table16:")
