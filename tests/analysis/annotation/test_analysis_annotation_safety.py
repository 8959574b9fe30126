"""Annotators on the safety dimension: a study may ask for it (beside the seven, never pooled into
"all"), the store and the page follow the study's dimensions, sheets and Label Studio carry it,
the judge is checked against the humans on it, and `train rank` skips it."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from annotate_testdata import Client, fake_run, score_for, serving, study_request
from esc_eval.analysis.annotation.sheets import export_annotation_sheets, import_annotations
from esc_eval.analysis.annotation.agreement import agreement_summary, icc_table, pairwise_kappa
from esc_eval.analysis.annotation.answers import AnnotationStoreError, answers_long
from esc_eval.analysis.annotation.formats import (annotation_table, import_labelstudio, label_config,
                                                  labelstudio_export, write_table)
from esc_eval.analysis.web.annotation_results import live_results
from esc_eval.analysis.annotation.store import AnnotationStore, default_store_path
from esc_eval.analysis.annotation.study import create_study
from esc_eval.analysis.results.loaders import load_dialogues
from esc_eval.analysis.annotation.rubric import annotation_rubric_version
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES
from esc_eval.sim.runs.runfolder import RunFolder

ALL = [*DIMENSION_NAMES, "safety"]


def _score(annotator: str, did: str, dim: str) -> int:
    return score_for(annotator, did, "empathy") if dim == "safety" else score_for(annotator, did, dim)


def _add_judge_safety(run, judge="fake/judge"):
    """Safety scores of the run's judge on every dialogue: 4 on even ones, else 0."""
    folder = RunFolder(run, create=False)
    rows = [{**r, "dimension": "safety", "score": 4 * (i % 2 == 0), "probs": None, "expected": None}
            for i, r in enumerate(r for r in folder.iter_rows("scores") if r["dimension"] == "fluency")]
    folder.write_part("scores", rows)


def test_a_safety_study_asks_for_eight_dimensions_and_keeps_safety_apart(tmp_path):
    run = fake_run(tmp_path / "run", 30)
    _add_judge_safety(run)
    with serving([run]) as (base, service):
        store = service.store
        plain = create_study(store, service.viewer.index, study_request("plain", ("a1", "a2"), sample=4))
        out = create_study(store, service.viewer.index, study_request("crisis", ("a1", "a2"), sample=4, safety=True))
        assert plain["dimensions"] == DIMENSION_NAMES and out["dimensions"] == ALL
        assert store.study("crisis")["rubric_version"] == annotation_rubric_version(tuple(ALL))
        assert store.study("crisis")["rubric_version"].startswith(store.study("plain")["rubric_version"] + "+safety:")
        session = Client(base, "a1").ok("/api/session?study=crisis")
        assert session["dimensions"] == ALL
        assert {s["study"]: s["dimensions"] for s in session["studies"]} == {"plain": DIMENSION_NAMES, "crisis": ALL}
        rubric = Client(base, "a1").ok("/api/rubric?language=zh")["dimensions"]["safety"]
        assert sorted(rubric["levels"]) == ["0", "1", "2", "3", "4"] and "当地紧急服务" in rubric["explanation"]
        a1 = Client(base, "a1")
        status, err = a1.call("/api/answer", {"study": "plain", "position": 0, "dimension": "safety", "score": 2})
        assert status == 400 and "not scored in study 'plain'" in err["error"]
        for a in ("a1", "a2"):
            c = Client(base, a)
            for pos, (did, _) in enumerate(store.queue("crisis", a)):
                for dim in DIMENSION_NAMES:  # the seven only: not done yet
                    c.ok("/api/answer", {"study": "crisis", "position": pos, "dimension": dim, "score": _score(a, did, dim)})
        assert [p["done"] for p in store.progress("crisis")] == [0, 0]
        assert Client(base, "a1").ok("/api/next?study=crisis")["remaining"] == 4
        for a in ("a1", "a2"):
            c = Client(base, a)
            for pos, (did, _) in enumerate(store.queue("crisis", a)):
                c.ok("/api/answer", {"study": "crisis", "position": pos, "dimension": "safety",
                                     "score": _score(a, did, "safety")})
        assert [p["done"] for p in store.progress("crisis")] == [4, 4]
        long = answers_long(store.answers("crisis"))
        results = service.results(service.identify(None, None), "crisis")
    seven = long[long["dimension"] != "safety"]
    summary = agreement_summary(long)
    assert list(summary["dimension"]) == ["all", *DIMENSION_NAMES, "safety"]
    # "all" pools the seven only: the same figures as without the safety answers
    pd.testing.assert_frame_equal(summary[summary["dimension"] == "all"].reset_index(drop=True),
                                  agreement_summary(seven).iloc[[0]].reset_index(drop=True))
    assert icc_table(long).set_index("dimension").loc["all", "n_items"] == icc_table(seven).set_index("dimension").loc["all", "n_items"]
    kap = pairwise_kappa(long)
    assert set(kap["dimension"]) == {"all", *ALL}
    # the page's results: agreement rows for safety, and the judge checked against the humans on it
    assert [a["dimension"] for a in results["agreement"]] == ["all", *DIMENSION_NAMES, "safety"]
    [judge] = results["judges"]
    assert [a["dimension"] for a in judge["accuracy"]] == [*DIMENSION_NAMES, "average", "safety"]


def test_sheets_label_studio_and_train_table_carry_safety(tmp_path):
    run = fake_run(tmp_path / "run", 12)
    dialogues = load_dialogues(run)
    paths = export_annotation_sheets(dialogues, tmp_path / "sheets", ["x"], dimensions=ALL)
    sheet = pd.read_csv(paths["x"], encoding="utf-8-sig")
    assert list(sheet.columns[-9:]) == [*ALL, "comment"]
    assert "## Safety (column `safety`)" in paths["readme"].read_text()
    sheet["safety"] = 3
    sheet["fluency"] = 2
    sheet.to_csv(paths["x"], index=False, encoding="utf-8-sig")
    got = import_annotations(paths["x"])
    assert set(got["dimension"]) == {"fluency", "safety"} and (got.loc[got["dimension"] == "safety", "score"] == 3).all()
    assert label_config(ALL).count("<Choices ") == 8 and label_config().count("<Choices ") == 7

    store = AnnotationStore(default_store_path(run))
    from esc_eval.analysis.web.annotation_service import AnnotationService

    index = AnnotationService([run], store).viewer.index
    create_study(store, index, study_request("c", ("a1",), overlap=1, sample=3, safety=True))
    did = store.queue("c", "a1")[0][0]
    for dim in ALL:
        store.save_answer("c", "a1", did, dim, 2)
    tasks = labelstudio_export(store, "c", dialogues)
    assert {r["from_name"] for r in tasks[[t["data"]["dialogue_id"] for t in tasks].index(did)]["annotations"][0]["result"]} == set(ALL)
    file = tmp_path / "ls.json"
    file.write_text(json.dumps(tasks))
    made = import_labelstudio(store, index, file, "c2")
    assert made["created"] and made["answers"] == 8 and store.dimensions("c2") == ALL
    table = write_table(annotation_table(store, "c", index), tmp_path / "table.csv")
    from esc_eval.train.data.annotations import load_annotations

    rows = load_annotations(table)  # what `train rank` reads: the seven; safety has no adapter to train
    assert sorted(r.dimension for r in rows) == sorted(DIMENSION_NAMES)
    with pytest.raises(AnnotationStoreError, match="not scored in study"):
        plain = create_study(store, index, study_request("p", ("a1",), overlap=1, sample=2))
        store.save_answer("p", "a1", store.queue("p", "a1")[0][0], "safety", 1)
    assert plain["dimensions"] == DIMENSION_NAMES


def test_live_results_without_safety_answers_are_unchanged(tmp_path):
    long = pd.DataFrame([{"annotator": a, "dialogue_id": f"d{i}", "dimension": d, "score": float(score_for(a, f"d{i}", d))}
                         for a in ("a1", "a2") for i in range(6) for d in DIMENSION_NAMES])
    out = live_results(long)
    assert [a["dimension"] for a in out["agreement"]] == ["all", *DIMENSION_NAMES]
