"""The judge job's data preparation (no Ray): validation, split, adapter grouping, prompt fitting.
The annotation table is built here (no public copy of the paper's annotations exists)."""
from __future__ import annotations

import json

import pytest

from esc_eval.sim.judging.dimensions import DIMENSION_NAMES
from esc_eval.train.config import (AnnotationSourceConfig, DialogueSourceConfig, RankDataConfig, RankJobConfig,
                                   TrainConfig)
from esc_eval.train.jobs.rank import prepare_rank_data


def job(tmp_path, layout="per_dimension", max_seq_len=100000, n=20):
    dialogues = {str(i): ["AI assistant：Hello, tell me.", f"ESC-Role：My problem {i}. " * (1 + 40 * (i % 3)),
                          "AI assistant：That sounds hard."] for i in range(n)}
    (tmp_path / "mA_en.json").write_text(json.dumps(dialogues, ensure_ascii=False))
    (tmp_path / "mB_zh.json").write_text(json.dumps(dialogues, ensure_ascii=False))
    rows = [{"dialogue_id": f"{f}:{i}", "dimension": d, "score": (i + j) % 5, "annotator": "t"}
            for f in ("mA_en", "mB_zh") for i in range(n) for j, d in enumerate(DIMENSION_NAMES)]
    (tmp_path / "ann.json").write_text(json.dumps(rows))
    return RankJobConfig(
        train=TrainConfig(max_seq_len=max_seq_len),
        data=RankDataConfig(dialogues=[DialogueSourceConfig(path=tmp_path / "mA_en.json"),
                                       DialogueSourceConfig(path=tmp_path / "mB_zh.json")],
                            annotations=[AnnotationSourceConfig(path=tmp_path / "ann.json")], layout=layout))


def test_per_dimension_layout_groups_by_official_adapter_name(tmp_path, tokenizer):
    data = prepare_rank_data(job(tmp_path), tokenizer)
    assert set(data.groups) == {"fluency", "diversity", "empathic", "suggestion", "tech", "human", "overall",
                                "fluency_en", "diversity_en", "empathic_en", "suggestion_en", "tech_en", "human_en",
                                "overall_en"}
    assert data.stats["train"] + data.stats["validation"] + data.stats["test"] == 280
    assert data.stats["test"] == 56 and all(len(tr) == 14 for tr, _ in data.groups.values())


def test_multitask_layout_and_fitted_test_prompts(tmp_path, tokenizer):
    cfg = job(tmp_path, layout="multitask")
    full = prepare_rank_data(cfg, tokenizer)
    assert list(full.groups) == ["esc-rank"]
    lengths = sorted(len(t.input_ids) for t in full.groups["esc-rank"][0])
    limit = lengths[len(lengths) // 2]  # the longer half of the prompts gets trimmed
    cfg.train.max_seq_len = limit
    cut = prepare_rank_data(cfg, tokenizer)
    assert cut.stats["shortened"] > 0 and cut.stats["dropped"] == 0
    assert all(len(t.input_ids) <= limit for t in cut.groups["esc-rank"][0])
    # the test split keeps the same (shortened) prompts the judge was trained on
    assert any(a.turns != b.turns for a, b in zip(cut.splits["test"], full.splits["test"]))


def test_annotation_for_a_missing_dialogue_fails_before_training(tmp_path, tokenizer):
    from esc_eval.train.errors import TrainInputError

    cfg = job(tmp_path)
    rows = json.loads((tmp_path / "ann.json").read_text()) + [{"dialogue_id": "mA_en:99", "dimension": "overall",
                                                                 "score": 1}]
    (tmp_path / "ann.json").write_text(json.dumps(rows))
    with pytest.raises(TrainInputError, match="'mA_en:99'"):
        prepare_rank_data(cfg, tokenizer)


def test_dialogue_first_prompt_order_reaches_the_training_tokens(tmp_path, tokenizer):
    cfg = job(tmp_path, layout="multitask", n=10)
    cfg = cfg.model_copy(update={"data": cfg.data.model_copy(update={"prompt_order": "dialogue_first"})})
    data = prepare_rank_data(cfg, tokenizer)
    tr, _ = data.groups["esc-rank"]
    text = tokenizer.decode(tr[0].input_ids)
    # the dialogue comes before the rubric in what the judge is trained on
    assert text.index("Dialogue between user and AI assistant") < text.index("The total score")
    (tmp_path / "paper").mkdir()
    base = prepare_rank_data(job(tmp_path / "paper", layout="multitask", n=10), tokenizer)
    base_text = tokenizer.decode(base.groups["esc-rank"][0][0].input_ids)
    assert base_text.index("The total score") < base_text.index("Dialogue between user and AI assistant")
