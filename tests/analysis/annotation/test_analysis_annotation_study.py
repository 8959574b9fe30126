"""A study's sample and assignment: overlap, balance, per-annotator order, blinding, bad input."""
from __future__ import annotations

from collections import Counter

import pytest

from annotate_testdata import MODELS, Client, fake_run, serving, study_request
from esc_eval.analysis.annotation.answers import AnnotationStoreError
from esc_eval.analysis.web.annotation_service import AnnotationService
from esc_eval.analysis.annotation.store import AnnotationStore, default_store_path
from esc_eval.analysis.annotation.study import assign, create_study, select_dialogues, study_config


@pytest.fixture
def run(tmp_path):
    return fake_run(tmp_path / "run", 90)


@pytest.fixture
def service(run):
    return AnnotationService([run], AnnotationStore(default_store_path(run)))


@pytest.mark.parametrize("n_annotators,overlap", [(2, 2), (3, 2), (5, 3), (4, 1)])
def test_assignment_overlap_balance_and_order(n_annotators, overlap):
    ids = [f"d{i:03d}" for i in range(37)]
    names = [f"a{i}" for i in range(n_annotators)]
    queues = assign(ids, names, overlap, seed=7)
    per_dialogue = Counter(d for q in queues.values() for d in q)
    assert set(per_dialogue) == set(ids) and set(per_dialogue.values()) == {overlap}
    assert all(len(set(q)) == len(q) for q in queues.values())  # never the same dialogue twice to one person
    sizes = [len(q) for q in queues.values()]
    assert max(sizes) - min(sizes) <= 1
    if overlap >= 2:  # every pair shares dialogues, so every pairwise kappa has data
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                assert set(queues[a]) & set(queues[b]), (a, b)
    if n_annotators >= 2 and overlap == n_annotators:
        assert queues["a0"] != queues["a1"]  # same dialogues, each in its own order
    assert assign(ids, names, overlap, seed=7) == queues and assign(ids, names, overlap, seed=8) != queues


def test_stratified_sample_follows_the_strata(service):
    idx = service.viewer.index
    cfg = study_config(study_request(sample=30, strata=["target_model", "language"], seed=3))
    chosen = select_dialogues(idx, cfg)
    assert len(chosen) == 30 and chosen["dialogue_id"].is_unique
    by_model = chosen["target_model"].astype(str).value_counts()
    assert {m: by_model[m] for m in MODELS} == {m: 10 for m in MODELS}  # 90 = 30 per model -> 10 each
    share_zh = (chosen["language"] == "zh").mean()
    assert share_zh == pytest.approx((idx["language"] == "zh").mean(), abs=0.05)
    assert list(select_dialogues(idx, cfg)["dialogue_id"]) == list(chosen["dialogue_id"])  # seeded
    only = select_dialogues(idx, study_config(study_request(models=["m2"], languages=["en"])))
    assert set(only["target_model"].astype(str)) == {"m2"} and set(only["language"]) == {"en"}


def test_study_is_stored_with_queues_and_blinded_items(service, run):
    out = create_study(service.store, service.viewer.index, study_request(sample=24, overlap=2))
    assert out["n_dialogues"] == 24 and sum(out["queues"].values()) == 48
    assert set(out["tokens"]) == {"a1", "a2", "a3", "admin"}
    store = service.store
    assert store.study("s1")["config"]["sample"] == 24 and store.path == run / "annotations" / "annotations.sqlite"
    # reopened from the file: the same queues
    again = AnnotationStore(store.path, create=False)
    assert again.queue("s1", "a2") == store.queue("s1", "a2")
    with serving([run]) as (base, _):
        item = Client(base, "a1").ok("/api/item?position=0")
    blob = repr(item)
    did = store.queue("s1", "a1")[0][0]
    idx = service.viewer.index.set_index("dialogue_id")
    for secret in (did, str(idx.at[did, "target_model"]), str(idx.at[did, "card_id"]), "fake/seeker"):
        assert secret not in blob
    assert item["language"] == idx.at[did, "language"] and len(item["turns"]) == 11


def test_bad_studies_write_nothing(service, run, tmp_path):
    store, idx = service.store, service.viewer.index
    cases = [
        (study_request(dialogue_ids=["d-not-in-run", str(idx["dialogue_id"].iloc[0])]), "not ok dialogues of the run"),
        (study_request(sample=1000), "1000 dialogues asked, the run(s) hold 90"),
        (study_request(models=["gpt-9"]), "no ok dialogue of ['gpt-9']"),
        (study_request(annotators=["a1"], overlap=2), "overlap 2 needs at least 2 annotators"),
        (study_request(annotators=["a1", "a1"]), "annotator ids repeat"),
        (study_request(name="bad name!"), "study field name"),
        (study_request(strata=["colour"]), "study field strata"),
    ]
    for req, message in cases:
        with pytest.raises(AnnotationStoreError, match=message.replace("(", r"\(").replace(")", r"\)")
                           .replace("[", r"\[").replace("]", r"\]")):
            create_study(store, idx, req)
    assert store.studies() == []
    create_study(store, idx, study_request())
    with pytest.raises(AnnotationStoreError, match="already exists"):
        create_study(store, idx, study_request())
    assert len(store.studies()) == 1


def test_study_from_the_page(run):
    with serving([run]) as (base, service):
        local = Client(base)
        made = local.ok("/api/study", {"name": "web", "annotators": ["x", "y"], "overlap": 2, "sample": 6})
        assert made["n_dialogues"] == 6 and set(made["tokens"]) == {"x", "y", "admin"}
        assert [s["study"] for s in local.ok("/api/session")["studies"]] == ["web"]
        status, body = Client(base, "x").call("/api/study", {"name": "w2", "annotators": ["x"], "overlap": 1})
        assert status == 403 and "organiser" in body["error"]
        status, body = local.call("/api/study", {"name": "w3", "annotators": ["x"], "overlap": 1, "sample": 0})
        assert status == 400 and "sample" in body["error"]
        assert [s["study"] for s in service.store.studies()] == ["web"]
