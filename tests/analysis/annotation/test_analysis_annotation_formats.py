"""The study's answers out and in: the training table (read by train's own reader and joined by
`train rank`'s data step), Label Studio JSON and JSON_MIN both ways, and the CLI around them."""
from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from annotate_testdata import Client, answer_queue, fake_run, serving, study_request
from esc_eval.analysis.annotation.answers import AnnotationStoreError
from esc_eval.analysis.annotation.formats import (annotation_table, import_labelstudio, label_config,
                                                  labelstudio_export, read_labelstudio)
from esc_eval.analysis.annotation.store import AnnotationStore
from esc_eval.analysis.annotation.study import create_study
from esc_eval.analysis.results.loaders import load_dialogues
from esc_eval.cli.app import app


@pytest.fixture
def answered(tmp_path):
    """A run, a study of 9 dialogues x 2 annotators, a1 done, a2 half done with a note, a flag and a skip."""
    run = fake_run(tmp_path / "run", 30)
    with serving([run]) as (base, service):
        create_study(service.store, service.viewer.index, study_request(annotators=("a1", "a2"), sample=9))
        answer_queue(Client(base, "a1"), service.store, "s1", "a1")
        answer_queue(Client(base, "a2"), service.store, "s1", "a2", limit=4)
        a2 = Client(base, "a2")
        a2.ok("/api/mark", {"position": 0, "note": "the assistant repeats itself", "flagged": True})
        a2.ok("/api/mark", {"position": 5, "skipped": True})
        yield run, service


def test_table_reads_back_with_trains_reader_and_joins_the_run(answered, tmp_path):
    from esc_eval.train.data.annotations import load_annotations
    from esc_eval.train.config import AnnotationSourceConfig, DialogueSourceConfig, RankDataConfig, RankJobConfig
    from esc_eval.train.jobs.rank import judge_examples

    run, service = answered
    for suffix in (".csv", ".parquet", ".json", ".jsonl"):
        out = tmp_path / f"ann{suffix}"
        res = CliRunner().invoke(app, ["annotate", "export", str(run), "--study", "s1", "-o", str(out)])
        assert res.exit_code == 0, res.output
        rows = load_annotations(out)
        assert len(rows) == (9 + 4) * 7 == json.loads(res.stdout)["rows"]
        assert {r.annotator for r in rows} == {"a1", "a2"} and all(r.target_model in ("m1", "m2", "m3") for r in rows)
    table = annotation_table(service.store, "s1", service.viewer.index)
    assert set(table["rubric_version"]) == {service.store.study("s1")["rubric_version"]}
    assert table["seconds"].notna().all()
    # `train rank`'s data step: the exported table joined with the run's own dialogues, split 7:1:2.
    cfg = RankJobConfig(data=RankDataConfig(dialogues=[DialogueSourceConfig(path=run)],
                                            annotations=[AnnotationSourceConfig(path=tmp_path / "ann.csv")]))
    splits = judge_examples(cfg)
    assert sum(len(v) for v in splits.values()) == 9 * 7  # one (median) label per dialogue and dimension


def test_labelstudio_round_trip_full_and_min(answered, tmp_path):
    run, service = answered
    dialogues = load_dialogues([run])
    tasks = labelstudio_export(service.store, "s1", dialogues)
    assert len(tasks) == 9 and all({"id", "data", "annotations"} <= set(t) for t in tasks)
    t0 = tasks[0]
    assert set(t0["data"]) == {"dialogue", "dialogue_id", "language"} and set(t0["data"]["dialogue"][0]) == {"author", "text"}
    assert "m1" not in json.dumps(tasks) and "m2" not in json.dumps(tasks)  # files for annotators stay blind
    regions = [r for t in tasks for a in t["annotations"] for r in a["result"]]
    assert {r["type"] for r in regions} == {"choices", "textarea"}
    assert any(r["value"] == {"text": ["the assistant repeats itself"]} for r in regions)
    assert '<Paragraphs name="dialogue" value="$dialogue" layout="dialogue"/>' in label_config()
    assert label_config().count("<Choices ") == 7
    want = service.store.answers("s1")[["annotator", "dialogue_id", "dimension", "score"]]
    for minimal in (False, True):
        path = tmp_path / f"ls-{minimal}.json"
        path.write_text(json.dumps(labelstudio_export(service.store, "s1", dialogues, minimal=minimal)))
        fresh = AnnotationStore(tmp_path / f"other-{minimal}.sqlite")
        out = import_labelstudio(fresh, service.viewer.index, path, "from-ls")
        assert out["created"] and out["answers"] == len(want) and out["annotators"] == ["a1", "a2"]
        got = fresh.answers("from-ls")[["annotator", "dialogue_id", "dimension", "score"]]
        assert got.sort_values(list(got.columns)).values.tolist() == want.sort_values(list(want.columns)).values.tolist()
        assert set(fresh.answers("from-ls")["source"]) == {f"labelstudio:{path.name}"}
    # into the existing study: the same answers again replace, never duplicate
    out = import_labelstudio(service.store, service.viewer.index, tmp_path / "ls-False.json", "s1")
    assert not out["created"] and len(service.store.answers("s1")) == len(want)


def test_bad_labelstudio_files_import_nothing(answered, tmp_path):
    run, service = answered
    tasks = labelstudio_export(service.store, "s1", load_dialogues([run]))
    store = AnnotationStore(tmp_path / "x.sqlite")

    def bad(mutate, message):
        data = json.loads(json.dumps(tasks))
        mutate(data)
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(data))
        with pytest.raises(AnnotationStoreError, match=message):
            import_labelstudio(store, service.viewer.index, path, "x")
        assert store.studies() == []

    bad(lambda d: d[0]["annotations"][0]["result"][0]["value"].update(choices=["7"]), "outside the integers 0-4")
    bad(lambda d: d[1]["data"].pop("dialogue_id"), "no dialogue_id")
    bad(lambda d: d[2]["data"].update(dialogue_id="not-in-run"), "not ok dialogues of the run")
    bad(lambda d: d[0]["annotations"][0]["result"][0].update(from_name="charm"), "unknown dimension 'charm'")
    bad(lambda d: d[0]["annotations"][0]["result"][0].update(type="rating", value={"rating": 3}), "Rating")
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(AnnotationStoreError, match="cannot read as JSON"):
        read_labelstudio(tmp_path / "junk.json")


def test_cli_study_list_tokens_and_bad_input(tmp_path):
    run = fake_run(tmp_path / "run", 30)
    runner = CliRunner()
    res = runner.invoke(app, ["annotate", "study", str(run), "--name", "cli", "--annotators", "x,y,z", "--overlap", "2",
                              "--sample", "12"])
    assert res.exit_code == 0, res.output
    made = json.loads(res.stdout)
    assert made["n_dialogues"] == 12 and sum(made["queues"].values()) == 24 and set(made["tokens"]) == {"x", "y", "z", "admin"}
    listed = json.loads(runner.invoke(app, ["annotate", "list", str(run)]).stdout)
    assert [s["study"] for s in listed["studies"]] == ["cli"] and listed["studies"][0]["progress"][0]["assigned"] == 8
    new = json.loads(runner.invoke(app, ["annotate", "tokens", str(run), "--study", "cli", "--annotator", "y"]).stdout)
    store = AnnotationStore(run / "annotations" / "annotations.sqlite")
    assert store.token_identity(new["tokens"]["y"])["annotator"] == "y" and store.token_identity(made["tokens"]["y"]) is None
    ids = tmp_path / "ids.txt"
    ids.write_text("not-a-dialogue\n")
    for args, message in [
        (["study", str(run), "--name", "c2", "--annotators", "x", "--overlap", "1", "--dialogues", str(ids)], "not ok dialogues"),
        (["study", str(tmp_path / "nowhere"), "--name", "c2", "--annotators", "x", "--overlap", "1"], "does not exist"),
        (["export", str(run), "--study", "cli", "-o", str(tmp_path / "t.csv")], "holds no answer yet"),
        (["export", str(run), "--study", "nope", "-o", str(tmp_path / "t.csv")], "no study 'nope'"),
        (["export", str(run), "--study", "cli", "-o", str(tmp_path / "t.xlsx"), "--format", "excel"], "--format"),
        (["import", str(run), "--study", "cli", "--from", str(tmp_path / "missing.json")], "cannot read as JSON"),
    ]:
        res = runner.invoke(app, ["annotate", *args])
        assert res.exit_code != 0 and message in str(res.exception or res.output), (args, res.output, res.exception)
    assert [s["study"] for s in store.studies()] == ["cli"] and not (tmp_path / "t.csv").exists()


def test_rank_config_can_point_at_an_export(tmp_path):
    """The README's config: a run folder as dialogue source and the exported table."""
    from esc_eval.train.config import load_rank_config

    cfg = tmp_path / "rank.yaml"
    cfg.write_text(yaml.safe_dump({"task": "rank", "data": {"dialogues": [{"path": str(tmp_path / "run")}],
                                                            "annotations": [{"path": str(tmp_path / "ann.csv")}]}}))
    loaded = load_rank_config(cfg)
    assert loaded.data.annotations[0].format == "table"


def test_runs_in_object_storage_need_a_store_file(tmp_path):
    """A run folder behind a storage URI (fsspec's in-memory store here): the CLI asks for --store,
    then studies, answers, results and both exports work through the run-folder API."""
    from esc_eval.analysis.results.fake_runs import write_fake_run

    uri = f"memory://annotate-{tmp_path.name}/runs/a"
    write_fake_run(uri, 30, models=["m1", "m2"])
    runner = CliRunner()
    res = runner.invoke(app, ["annotate", "study", uri, "--name", "s1", "--annotators", "a1,a2", "--sample", "4"])
    assert res.exit_code != 0 and "give its file with --store" in str(res.exception)
    store = tmp_path / "store.sqlite"
    res = runner.invoke(app, ["annotate", "study", uri, "--name", "s1", "--annotators", "a1,a2", "--sample", "4",
                              "--store", str(store)])
    assert res.exit_code == 0, res.output
    with serving([uri], store) as (base, service):
        answer_queue(Client(base, "a1"), service.store, "s1", "a1")
        assert Client(base).ok("/api/results")["judges"][0]["accuracy"]
    for args in (["-o", str(tmp_path / "t.csv")], ["-o", str(tmp_path / "ls.json"), "--format", "labelstudio"]):
        res = runner.invoke(app, ["annotate", "export", uri, "--study", "s1", "--store", str(store), *args])
        assert res.exit_code == 0, res.output
