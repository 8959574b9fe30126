"""annotate -> export -> `esc-eval train rank` on the embedded model: the paper's loop closed.

Two annotators score a study over a run folder through the annotation API; `annotate export`
writes the table; `train rank` (Ray Train + DeepSpeed ZeRO-2, the embedded SmolLM2, the cheapest
configuration: one worker, one optimizer step, no evaluation) reads it with the run folder as its
dialogue source and trains an adapter on it.
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
        "data": {"layout": "multitask", "dimensions": ["fluency", "overall"], "split": {"ratios": [8, 1, 1]},
                 "dialogues": [{"path": str(run)}], "annotations": [{"path": str(table)}]},
        "evaluation": {"enabled": False},
    }))
    res = runner.invoke(app, ["train", "rank", "--config", str(cfg)])
    assert res.exit_code == 0, res.output
    from esc_eval.train.adapter_registry import load_registry_entry

    entry = load_registry_entry(tmp_path / "out")
    assert entry.kind == "judge" and list(entry.adapters) == ["esc-rank"]
    assert (Path(entry.adapters["esc-rank"]) / "adapter_model.safetensors").exists()
    # 10 dialogues x 2 dimensions, one median label each, split 8:1:1
    data = entry.extra["data"]
    assert data["train"] + data["validation"] + data["test"] == 20 and data["train"] >= 14
