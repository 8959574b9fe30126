import math

import numpy as np
import pandas as pd
import pytest

import krippendorff
from esc_eval.analysis.annotation.sheets import AnnotationError, export_annotation_sheets, import_annotations
from esc_eval.analysis.annotation.agreement import agreement_markdown, agreement_summary, krippendorff_alpha, pairwise_kappa, quadratic_weighted_kappa
from esc_eval.analysis.results.loaders import load_dialogues
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

from analysis_testdata import dialogue_row


@pytest.fixture
def dialogues(make_run):
    run = make_run("r", dialogues=[dialogue_row(f"d{i}", "secret-model") for i in range(4)]
                   + [dialogue_row("dfail", "secret-model", status="failed")])
    return load_dialogues(run)


def fill(path, scores_by_dialogue):
    df = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    for i, r in df.iterrows():
        for dim, v in scores_by_dialogue.get(r["dialogue_id"], {}).items():
            df.loc[i, dim] = v
    df.to_csv(path, index=False)


def test_export_writes_blind_shuffled_sheets_with_the_rubric(dialogues, tmp_path):
    paths = export_annotation_sheets(dialogues, tmp_path, annotators=["ann", "bob"])
    a = pd.read_csv(paths["ann"], encoding="utf-8-sig")
    b = pd.read_csv(paths["bob"], encoding="utf-8-sig")
    assert sorted(a["dialogue_id"]) == ["d0", "d1", "d2", "d3"]  # failed dialogue left out
    assert a["dialogue_id"].tolist() != b["dialogue_id"].tolist() or len(a) < 2
    assert set(DIMENSION_NAMES) <= set(a.columns) and a["fluency"].isna().all()
    assert "secret-model" not in paths["ann"].read_text(encoding="utf-8-sig")
    assert "Seeker: I feel so anxious about work." in a["dialogue"].iloc[0]
    rub = pd.read_csv(paths["rubric"], encoding="utf-8-sig")
    assert len(rub) == 35 and "There is no apparent difference from human friends." in rub["description"].tolist()
    assert "As a large language model" in paths["readme"].read_text()


def test_round_trip_and_blank_cells(dialogues, tmp_path):
    paths = export_annotation_sheets(dialogues, tmp_path, annotators=2)
    fill(paths["a1"], {"d0": {"fluency": "3", "overall": "4"}, "d1": {"fluency": "2"}})
    fill(paths["a2"], {"d0": {"fluency": "3.0"}})
    ann = import_annotations(tmp_path)
    assert len(ann) == 4
    got = ann.set_index(["annotator", "dialogue_id", "dimension"])["score"]
    assert got[("a1", "d0", "overall")] == 4.0 and got[("a2", "d0", "fluency")] == 3.0


def test_bad_rows_are_all_reported_with_file_and_line(tmp_path):
    p = tmp_path / "annotate_x.csv"
    p.write_text("dialogue_id,fluency,warmth\nd1,5,1\nd2,abc,\n,1,\nd3,2.5,\n", encoding="utf-8")
    with pytest.raises(AnnotationError) as e:
        import_annotations(p)
    msg = str(e.value)
    assert "unknown dimension column 'warmth'" in msg
    assert f"{p}:2: fluency: score '5' outside the integers 0-4" in msg
    assert f"{p}:3: fluency: score 'abc' is not a number" in msg
    assert f"{p}:4: empty dialogue_id" in msg and "2.5" in msg


def test_long_format_unknown_dimension_and_duplicates(tmp_path):
    p = tmp_path / "long.csv"
    p.write_text("annotator,dialogue_id,dimension,score\nx,d1,fluency,1\nx,d1,kindness,2\nx,d1,fluency,2\n")
    with pytest.raises(AnnotationError) as e:
        import_annotations(p)
    assert "unknown dimension 'kindness'" in str(e.value) and "more than once" in str(e.value)
    ok = tmp_path / "ok.csv"
    ok.write_text("annotator,dialogue_id,dimension,score\nx,d1,diversity,1\n")
    assert import_annotations(ok)["dimension"].tolist() == ["expression"]


def test_quadratic_kappa_by_hand():
    # observed mean squared disagreement 0.5; expected 1.375 from the marginals -> 1 - 0.5/1.375
    assert quadratic_weighted_kappa([0, 1, 2, 2], [0, 2, 2, 1]) == pytest.approx(1 - 0.5 / 1.375)
    assert quadratic_weighted_kappa([0, 1, 4], [0, 1, 4]) == pytest.approx(1.0)
    assert quadratic_weighted_kappa([0, 4], [4, 0]) == pytest.approx(-1.0)
    assert math.isnan(quadratic_weighted_kappa([2, 2], [2, 2]))
    with pytest.raises(ValueError, match="0..4"):
        quadratic_weighted_kappa([5], [1])


def ann_frame(table: dict[str, list[float | None]], dimension="overall"):
    rows = []
    for annotator, scores in table.items():
        for i, s in enumerate(scores):
            if s is not None:
                rows.append({"annotator": annotator, "dialogue_id": f"d{i}", "dimension": dimension, "score": s})
    return pd.DataFrame(rows)


def test_pairwise_kappa_uses_shared_items_only():
    ann = ann_frame({"a": [0, 1, 2, 2, 4], "b": [0, 2, 2, 1, None], "c": [None, None, None, None, 4]})
    k = pairwise_kappa(ann).set_index(["annotator_a", "annotator_b", "dimension"])
    assert k.loc[("a", "b", "all"), "n"] == 4
    assert k.loc[("a", "b", "overall"), "kappa"] == pytest.approx(1 - 0.5 / 1.375)
    assert "1 item(s)" in k.loc[("a", "c", "all"), "note"]


def test_krippendorff_alpha_matches_the_package_and_handles_degenerate_cases():
    table = {"a": [0, 1, 2, 3, 4, 2], "b": [0, 1, 3, 3, 4, None], "c": [1, 1, 2, 3, None, 2]}
    alpha, note = krippendorff_alpha(ann_frame(table))
    ref = krippendorff.alpha(reliability_data=np.array([[np.nan if v is None else v for v in r] for r in table.values()],
                                                       dtype=float), level_of_measurement="ordinal",
                             value_domain=[0, 1, 2, 3, 4])
    assert alpha == pytest.approx(ref) and note == "" and 0.5 < alpha <= 1
    assert krippendorff_alpha(ann_frame({"a": [1, 2, 3], "b": [1, 2, 3]}))[0] == pytest.approx(1.0)
    assert krippendorff_alpha(ann_frame({"a": [1, 2]}))[1] == "fewer than 2 annotators"
    assert "same value" in krippendorff_alpha(ann_frame({"a": [2, 2], "b": [2, 2]}))[1]


def test_agreement_summary_and_markdown():
    ann = pd.concat([ann_frame({"a": [0, 1, 2, 3], "b": [0, 1, 2, 4]}, "fluency"),
                     ann_frame({"a": [4, 3, 2, 1], "b": [0, 1, 2, 3]}, "overall")])
    s = agreement_summary(ann).set_index("dimension")
    assert s.loc["fluency", "mean_pairwise_kappa"] > 0.8 > s.loc["all", "mean_pairwise_kappa"]
    assert s.loc["overall", "krippendorff_alpha"] < 0
    md = agreement_markdown(s.reset_index(), pairwise_kappa(ann))
    assert "| Fluency | 2 | 4 |" in md and "| a / b | overall | 4 |" in md
