"""Pairwise judging's prompts and answers (sim/judging/pairwise_prompts.py): both dialogues in the
prompt in the order asked, en and zh; the strict parser; P(first, second, tie) from log-probabilities;
the verdict by position mapped to the pair's terms."""
from __future__ import annotations

import math

import pytest

from esc_eval.serve.chat.interface import ChatResult, GenerationParams
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES
from esc_eval.sim.judging.judge_plan import JudgePlan, constrained_params
from esc_eval.sim.judging.pairwise_prompts import (pairwise_messages, pairwise_params, parse_verdict, preferred,
                                                   read_verdict, verdict_probs)

A = [("assistant", "Hello, what brings you here?"), ("seeker", "I lost my job."), ("assistant", "ALPHA reply: that is hard.")]
B = [("assistant", "Hello, what brings you here?"), ("seeker", "I lost my job."), ("assistant", "BETA reply: tell me more.")]


def test_both_dialogues_are_shown_in_the_order_asked_en():
    system, user = pairwise_messages("empathy", A, B, "en", rendering="clean")
    assert system.role == "system" and system.content == "You are a helpful assistant!"
    text = user.content
    one, two = text.index("Dialogue 1 between user and AI assistant:"), text.index("Dialogue 2 between user and AI assistant:")
    assert one < text.index("ALPHA reply") < two < text.index("BETA reply")
    assert "AI assistant: ALPHA reply: that is hard." in text  # the clean rendering of the scoring judge
    # the dimension's description from its paper rubric, and the question with the three labels
    assert "soothing user emotions and analyzing the underlying logic of the problem" in text
    assert text.endswith("Answer 1 if the AI assistant of Dialogue 1 did better, 2 if the AI assistant of Dialogue 2 "
                         "did better, or 0 if they are equally good (The number only).")
    assert "{" not in text  # every placeholder filled
    swapped = pairwise_messages("empathy", B, A, "en", rendering="clean")[1].content
    assert swapped.index("BETA reply") < swapped.index("Dialogue 2 between") < swapped.index("ALPHA reply")


def test_both_dialogues_are_shown_in_chinese_and_every_dimension_has_its_text():
    _, user = pairwise_messages("overall", A, B, "zh", system_prompt="You are InternLM.")
    text = user.content
    assert text.index("对话1（用户与AI助手之间的对话）：") < text.index("ALPHA reply") < text.index("对话2（") < text.index("BETA reply")
    assert "整体偏好" in text and text.endswith("两者一样好请回答0（只回答数字）。")
    assert pairwise_messages("overall", A, B, "zh", system_prompt="You are InternLM.")[0].content == "You are InternLM."
    for dim in DIMENSION_NAMES:  # official keys too ("empathic")
        for lang in ("en", "zh"):
            body = pairwise_messages(dim, A, B, lang)[1].content
            assert "{" not in body and "ALPHA" in body and "BETA" in body
    assert "共情能力" in pairwise_messages("empathic", A, B, "zh")[1].content
    with pytest.raises(ValueError, match="unknown dimension 'kindness'"):
        pairwise_messages("kindness", A, B, "en")


@pytest.mark.parametrize("text,verdict", [("1", "first"), (" 2.", "second"), ("0。", "tie"), ("2\n", "second"),
                                          ("3", None), ("12", None), ("Dialogue 1", None), ("", None), (None, None)])
def test_the_strict_parser(text, verdict):
    assert parse_verdict(text) == verdict


def test_probabilities_of_first_second_tie_from_logprobs():
    # P(first) = e^0 / (e^0 + e^-1 + e^-2), by hand
    z = 1 + math.exp(-1) + math.exp(-2)
    probs = verdict_probs({"2": -1.0, "1": 0.0, " 0": -2.0, "3": 5.0})  # "3" is no label here, whatever its weight
    assert probs == pytest.approx([1 / z, math.exp(-1) / z, math.exp(-2) / z])
    partial = verdict_probs({"1": -0.1, "2": -3.0})  # the tie label outside the top-k: unknown, not 0
    assert partial[:2] == pytest.approx([1 / (1 + math.exp(-2.9)), math.exp(-2.9) / (1 + math.exp(-2.9))])
    assert math.isnan(partial[2])
    assert verdict_probs({"yes": -0.1}) is None


def test_an_answer_becomes_a_verdict_by_position():
    logprob = JudgePlan("logprob", constrained_params())
    r = read_verdict(ChatResult(text="2", top_logprobs=[{"0": -3.0, "1": -2.0, "2": -0.5}]), logprob)
    assert r["verdict"] == "second" and r["parse_status"] == "ok" and r["probs"][1] == max(r["probs"])
    # no label among the log-probabilities: the text is parsed; one that does not parse is no verdict, never a tie
    assert read_verdict(ChatResult(text="1", top_logprobs=[{"x": -0.1}]), logprob)["verdict"] == "first"
    gen = read_verdict(ChatResult(text="Both are fine"), JudgePlan("generate"))
    assert gen == {"verdict": None, "probs": None, "parse_status": "parse_failure"}
    # top_logprobs only: read at the first generated label
    top = JudgePlan("logprob:top_logprobs", GenerationParams(max_tokens=5, logprobs=20))
    r = read_verdict(ChatResult(text="Answer: 0", tokens=["Answer", ":", " 0"],
                                top_logprobs=[{"Answer": -0.1}, {":": -0.1}, {" 0": -0.2, "1": -2.0, "2": -4.0}]), top)
    assert r["verdict"] == "tie" and r["probs"][2] == max(r["probs"])


def test_verdicts_map_to_the_pairs_terms():
    assert [preferred(v, "ab") for v in ("first", "second", "tie", None)] == ["a", "b", "tie", None]
    assert [preferred(v, "ba") for v in ("first", "second", "tie", None)] == ["b", "a", "tie", None]
    with pytest.raises(ValueError, match="unknown order"):
        preferred("first", "ba2")


def test_the_calls_ask_for_the_three_labels_under_the_judges_plan():
    p = pairwise_params(JudgePlan("logprob", constrained_params()), GenerationParams())
    assert p.choices == ["0", "1", "2"] and p.logprobs == 3 and p.max_tokens == 1 and p.temperature == 0.0
    bias = pairwise_params(JudgePlan("logprob:logit_bias", constrained_params(20)), GenerationParams())
    assert bias.choices == ["0", "1", "2"] and bias.logprobs == 20
    own = GenerationParams(max_tokens=16)
    assert pairwise_params(JudgePlan("generate"), own) is own
    assert pairwise_params(JudgePlan("logprob:top_logprobs", GenerationParams(max_tokens=5, logprobs=20)), own).choices is None
