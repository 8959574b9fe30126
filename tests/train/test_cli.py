"""The CLI functions as the lead registers them (`esc-eval train role|rank --config FILE`):
bad configs and bad data exit with code 2 and a message naming the problem, before Ray starts."""
from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from esc_eval.cli.jobs.train import app as train_app


@pytest.fixture
def app():
    return train_app


def test_bad_field_exits_2_naming_it(app, tmp_path):
    cfg = tmp_path / "role.yaml"
    cfg.write_text(yaml.safe_dump({"task": "role", "train": {"deepspeed_stage": 5}, "data": {"sources": [{"path": "x"}]}}))
    result = CliRunner().invoke(app, ["role", "--config", str(cfg)])
    assert result.exit_code == 2 and "train.deepspeed_stage" in result.output


def test_bad_annotation_exits_2_before_training(app, tmp_path, tiny_llama_dir):
    import ray

    (tmp_path / "m_en.json").write_text(json.dumps({"0": ["AI assistant：Hi", "ESC-Role：Sad."]}, ensure_ascii=False))
    (tmp_path / "ann.json").write_text(json.dumps([{"dialogue_id": "m_en:0", "dimension": "fluency", "score": 9}]))
    cfg = tmp_path / "rank.yaml"
    cfg.write_text(yaml.safe_dump({"task": "rank", "train": {"model": str(tiny_llama_dir)}, "data": {
        "dialogues": [{"path": "m_en.json"}], "annotations": [{"path": "ann.json"}]}}))
    result = CliRunner().invoke(app, ["rank", "--config", str(cfg)])
    assert result.exit_code == 2, result.output
    assert "row 0: field 'score' is 9" in " ".join(result.output.split())
    assert not ray.is_initialized()
    (tmp_path / "ann.json").write_text(json.dumps([{"dialogue_id": "m_en:404", "dimension": "fluency", "score": 1}]))
    result = CliRunner().invoke(app, ["rank", "--config", str(cfg)])
    assert result.exit_code == 2 and "'m_en:404'" in result.output
    assert not ray.is_initialized()
