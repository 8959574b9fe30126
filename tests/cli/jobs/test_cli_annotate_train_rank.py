"""annotate -> export -> `esc-eval train rank` on the embedded model: the paper's loop closed.

Two annotators score a study over a run folder through the annotation API; `annotate export`
writes the table; `train rank` (Ray Train + DeepSpeed ZeRO-2, the embedded SmolLM2, the cheapest
configuration: one worker, one optimizer step) reads it with the run folder as its dialogue source,
splits it 7:1:2 as the paper did, trains an adapter on it and evaluates it (the paper's Table 4: ACC and
ACC_soft of the base and the trained judge on the held-out test split, on a vLLM engine holding the
adapter); `analysis judge-accuracy` reads the evaluation's scores and labels and gives the same figures.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from esc_eval.cli.app import app

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "analysis"))
from annotate_testdata import Client, answer_queue, fake_run, serving, study_request  # noqa: E402

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(Path.home() / ".cache" / "esc-eval" / "torch_extensions"))


@pytest.fixture(autouse=True)
def _no_ray_left():
    yield
    import ray

    if ray.is_initialized():
        ray.shutdown()


@pytest.mark.slow
@pytest.mark.beside
def test_annotate_export_then_train_rank_on_the_embedded_model(tmp_path):
    from esc_eval.analysis.annotation.study import create_study

    run = fake_run(tmp_path / "run", 24)
    with serving([run]) as (base, service):
        create_study(service.store, service.viewer.index, study_request(annotators=("a1", "a2"), sample=10))
        for a in ("a1", "a2"):
            answer_queue(Client(base, a), service.store, "s1", a)
    runner = CliRunner()
    table = tmp_path / "annotations.csv"
    res = runner.invoke(app, ["annotate", "export", str(run), "--study", "s1", "-o", str(table)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["rows"] == 2 * 10 * 7
    cfg = tmp_path / "rank.yaml"
    cfg.write_text(yaml.safe_dump({
        "task": "rank",
        "train": {"model": "embedded", "max_steps": 1, "checkpoint_every": 1, "num_workers": 1, "max_seq_len": 512,
                  "deepspeed_stage": 2, "learning_rate": 1e-4, "lora": {"r": 4, "alpha": 8, "dropout": 0.0},
                  "output_dir": str(tmp_path / "out")},
        "data": {"layout": "multitask", "dimensions": ["fluency", "overall"],  # the paper's 7:1:2 split (the default)
                 "dialogues": [{"path": str(run)}], "annotations": [{"path": str(table)}]},
        # Table 4 on the test split: the base model and the adapter in one engine (the prompts fit 512 tokens)
        "evaluation": {"max_model_len": 1024},
    }))
    from esc_eval.serve.backends.engine_host import _HOSTS
    from esc_eval.train.adapter_registry import load_registry_entry

    # engines this worker's earlier tests left running are theirs (which ran before depends on the schedule)
    before = set(_HOSTS)
    res = runner.invoke(app, ["train", "rank", "--config", str(cfg)])
    assert res.exit_code == 0, res.output

    entry = load_registry_entry(tmp_path / "out")
    assert entry.kind == "judge" and list(entry.adapters) == ["esc-rank"]
    assert (Path(entry.adapters["esc-rank"]) / "adapter_model.safetensors").exists()
    # 10 dialogues x 2 dimensions, one median label each, split 7:1:2 within each dimension
    assert entry.extra["data"] | {"shortened": 0, "dropped": 0} == {"train": 14, "validation": 2, "test": 4,
                                                                    "shortened": 0, "dropped": 0}
    assert not [h for k, h in _HOSTS.items() if h.adapters and k not in before], \
        "the evaluation's engine is stopped once it has scored"

    evaluation = tmp_path / "out" / "evaluation"
    assert entry.extra["evaluation"]["json"] == str(evaluation / "table4.json")
    table4 = json.loads((evaluation / "table4.json").read_text())
    assert list(table4) == ["base", "esc-rank"]
    for judge, cells in table4.items():
        for dim in ("fluency", "overall", "average"):
            cell = cells[dim]["all"]
            assert cell["n"] == (4 if dim == "average" else 2) and cell["unparsed"] == 0, (judge, dim, cell)
            assert 0 <= cell["acc"] <= cell["acc_soft"] <= 100, (judge, dim, cell)
    preds = [json.loads(line) for line in (evaluation / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == 8 and all(p["error"] is None and p["pred"] in range(5) for p in preds)
    assert {(p["judge"], p["adapter"]) for p in preds} == {("base", None), ("esc-rank", "esc-rank")}
    assert all(abs(sum(p["probs"]) - 1) < 1e-4 and p["pred"] == p["probs"].index(max(p["probs"])) for p in preds)
    # the gold labels are the two annotators' low median of the exported table (the `median` aggregate)
    import csv
    import statistics

    given: dict = {}
    for r in csv.DictReader(table.open()):
        given.setdefault((r["dialogue_id"], r["dimension"]), []).append(int(r["score"]))
    assert all(p["gold"] == statistics.median_low(given[(p["dialogue_id"], p["dimension"])]) for p in preds)

    # where the analysis reads a judge's scores: `analysis judge-accuracy` gives the job's own figures
    res = runner.invoke(app, ["analysis", "judge-accuracy", str(evaluation), "--human", str(evaluation / "test_labels.csv"),
                              "--judge", "esc-rank"])
    assert res.exit_code == 0, res.output
    rows = {r["dimension"]: r for r in json.loads((evaluation / "report" / "judge_accuracy.json").read_text())["dimensions"]}
    for dim in ("fluency", "overall", "average"):
        cell = table4["esc-rank"][dim]["all"]
        assert rows[dim]["n"] == cell["n"] and rows[dim]["n_unparsed"] == 0
        assert (rows[dim]["ACC"], rows[dim]["ACC_soft"]) == pytest.approx((cell["acc"], cell["acc_soft"]))
