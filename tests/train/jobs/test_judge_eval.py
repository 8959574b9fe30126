"""Judge evaluation: P(0..4) from log-probs, strict parsing, ACC / ACC_soft and the Table 4 layout.

The annotation tables here are built by the tests (no public copy of the paper's exists)."""
from __future__ import annotations

import json
import math

import pytest

from esc_eval.serve.chat.interface import ChatModel, ChatResult
from esc_eval.train.data.dialogue_sources import SourceDialogue
from esc_eval.train.data.judge_data import join_annotations
from esc_eval.train.data.annotations import validate_rows
from esc_eval.train.jobs.judge_eval import (
    JudgePrediction, accuracy_metrics, digit_probs, score_examples, strict_parse, table4_markdown, write_evaluation,
)


def test_digit_probs_renormalises_over_digits():
    probs = digit_probs({"3": math.log(0.5), "2": math.log(0.25), "x": math.log(0.2), " 1": math.log(0.05)})
    assert probs == pytest.approx([0.0, 0.05 / 0.8, 0.25 / 0.8, 0.5 / 0.8, 0.0])
    assert digit_probs({"a": -1.0}) is None and digit_probs(None) is None


@pytest.mark.parametrize("text,score", [("3", 3), (" 4.", 4), ("0\n", 0), ("5", None), ("score: 3", None), ("", None)])
def test_strict_parse(text, score):
    assert strict_parse(text) == score


def pred(dim, lang, gold, p, judge="esc-rank"):
    return JudgePrediction("d", dim, lang, judge, gold, p)


def test_acc_and_acc_soft_per_dimension_language_and_average():
    preds = [pred("fluency", "en", 3, 3), pred("fluency", "en", 3, 2), pred("fluency", "zh", 1, 4),
             pred("fluency", "zh", 0, None), pred("empathy", "en", 2, 2)]
    m = accuracy_metrics(preds)["esc-rank"]
    assert m["fluency"]["all"] == {"n": 4, "acc": 25.0, "acc_soft": 50.0, "unparsed": 1}
    assert m["fluency"]["en"]["acc"] == 50.0 and m["fluency"]["en"]["acc_soft"] == 100.0
    assert m["fluency"]["zh"]["acc_soft"] == 0.0
    assert m["empathy"]["all"]["acc"] == 100.0
    assert m["average"]["all"]["acc"] == pytest.approx((25.0 + 100.0) / 2)  # mean over dimensions
    assert m["average"]["all"]["n"] == 5


def test_table4_markdown_layout(tmp_path):
    preds = [pred("fluency", "zh", 2, 2, "base"), pred("fluency", "en", 2, 0, "base"),
             pred("fluency", "zh", 2, 2), pred("fluency", "en", 2, 3)]
    md = table4_markdown(accuracy_metrics(preds))
    lines = md.strip().splitlines()
    assert lines[0] == "| Dimension | Judge | ACC (zh/en) | ACC_soft (zh/en) | n |"
    assert "| Fluency | base | 100.00/0.00 | 100.00/0.00 | 2 |" in lines
    assert "|  | esc-rank | 100.00/0.00 | 100.00/100.00 | 2 |" in lines
    assert lines[-2].startswith("| Average | base |")
    paths = write_evaluation(tmp_path, preds)
    assert json.loads(paths["json"].read_text())["base"]["fluency"]["zh"]["acc"] == 100.0
    assert len(paths["predictions"].read_text().splitlines()) == 4


class DigitJudge(ChatModel):
    """A ChatModel answering every judge prompt with fixed log-probs; the adapter shifts the answer,
    a named adapter 'broken' fails (a failed call must count as unscored, not crash)."""

    def __init__(self):
        self.calls = []

    async def chat(self, messages, params=None, *, adapter=None, session_id=None):
        self.calls.append((adapter, params))
        if adapter == "broken":
            raise RuntimeError("engine down")
        best = "4" if adapter else "1"
        top = {d: (-0.1 if d == best else -5.0) for d in "01234"}
        return ChatResult(text=best, top_logprobs=[top])


async def test_score_examples_logprob_method():
    anns = validate_rows([{"dialogue_id": "d", "dimension": dim, "score": 4} for dim in ("fluency", "overall")])
    ex = join_annotations(anns, [SourceDialogue("d", "en", [("assistant", "Hi"), ("seeker", "Sad.")])])
    model = DigitJudge()
    base = await score_examples(model, ex, "base")
    tuned = await score_examples(model, ex, "esc-rank", adapter_for=lambda e: e.adapter)
    assert [p.pred for p in base] == [1, 1] and [p.pred for p in tuned] == [4, 4]
    assert sum(tuned[0].probs) == pytest.approx(1.0)
    assert {c[0] for c in model.calls} == {None, "fluency_en", "overall_en"}
    params = model.calls[0][1]
    assert params.max_tokens == 1 and params.logprobs == 20 and params.choices == ["0", "1", "2", "3", "4"]
    failed = await score_examples(model, ex, "x", adapter_for=lambda e: "broken")
    assert all(p.pred is None and "engine down" in p.error for p in failed)
    gen = await score_examples(model, ex, "g", method="generate")
    assert [p.pred for p in gen] == [1, 1]


def test_the_evaluation_is_written_where_the_analysis_reads_a_judges_scores(tmp_path):
    """write_evaluation's folder is also a run folder of the judges' score rows with the test labels beside it:
    `analysis judge-accuracy` (analysis/trust/judge_accuracy.py) reads them and gives table4.json's figures."""
    from esc_eval.analysis.trust.judge_accuracy import accuracy_from_sheets

    def p(did, dim, gold, got, judge, error=None):
        return JudgePrediction(did, dim, "en", judge, gold, got, probs=None if got is None else [0.0] * got + [1.0] + [0.0] * (4 - got),
                               error=error, target_model="m1", adapter=None if judge == "base" else "esc-rank")

    preds = [p("d1", "fluency", 3, 3, "esc-rank"), p("d2", "fluency", 2, 0, "esc-rank"), p("d3", "fluency", 1, None, "esc-rank"),
             p("d1", "overall", 4, 3, "esc-rank"), p("d2", "overall", 0, None, "esc-rank", error="RuntimeError: down"),
             p("d1", "fluency", 3, 1, "base"), p("d2", "fluency", 2, 2, "base"), p("d3", "fluency", 1, 1, "base"),
             p("d1", "overall", 4, 4, "base"), p("d2", "overall", 0, 4, "base")]
    paths = write_evaluation(tmp_path / "evaluation", preds)
    table4 = json.loads(paths["json"].read_text())
    for judge in ("esc-rank", "base"):
        _, written = accuracy_from_sheets([str(tmp_path / "evaluation")], paths["labels"], judge=judge)
        rows = {r["dimension"]: r for r in json.loads(open(written["json"]).read())["dimensions"]}
        for dim in ("fluency", "overall", "average"):
            assert rows[dim]["n"] == table4[judge][dim]["all"]["n"]
            assert rows[dim]["ACC"] == pytest.approx(table4[judge][dim]["all"]["acc"])
            assert rows[dim]["ACC_soft"] == pytest.approx(table4[judge][dim]["all"]["acc_soft"])
            assert rows[dim]["n_unparsed"] == table4[judge][dim]["all"]["unparsed"]
    assert table4["esc-rank"]["fluency"]["all"] == {"n": 3, "acc": pytest.approx(100 / 3), "acc_soft": pytest.approx(100 / 3),
                                                    "unparsed": 1}
    assert json.loads(paths["predictions"].read_text().splitlines()[0])["target_model"] == "m1"
