"""The judge's plan from a backend's capabilities (sim/judging/judge_plan.py), and score rows read by it."""
from __future__ import annotations

import math

from esc_eval.serve.chat.interface import Capabilities, ChatModel, ChatResult, backend_capabilities
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.scoring import score_dialogue
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.judge_plan import label_position, plan_judge

LOGPROB = JudgeConfig(model=ModelRef(model="openai/gpt-4"))


def test_plan_follows_what_the_backend_has():
    vllm = plan_judge(LOGPROB, backend_capabilities("vllm/embedded"))
    assert vllm.method == "logprob" and vllm.params.choices == list("01234") and vllm.params.logprobs == 5
    openai = plan_judge(LOGPROB, backend_capabilities("openai/gpt-4"))
    assert openai.method == "logprob:logit_bias" and openai.params.logprobs == 20 and openai.params.choices
    other = plan_judge(LOGPROB, backend_capabilities("openai/my-model"))
    assert other.method == "logprob:top_logprobs" and other.params.choices is None and other.params.max_tokens == 5
    assert plan_judge(LOGPROB, backend_capabilities("serve/embedded")).method == "logprob"
    none = plan_judge(LOGPROB, Capabilities())
    assert none.method == "generate" and none.params is None and "falls back to 'generate'" in none.note
    few = plan_judge(LOGPROB, Capabilities(logprobs=True, max_top_logprobs=3))
    assert few.method == "generate"
    gen = plan_judge(LOGPROB.model_copy(update={"method": "generate"}), backend_capabilities("vllm/embedded"))
    assert gen.method == "generate" and gen.note is None


def test_label_position_is_the_first_label_the_answer_holds():
    assert label_position(["Score", ":", " 3", "."], 4) == 2
    assert label_position(["The", " answer"], 2) == 0
    assert label_position([], 0) == 0


class Unconstrained(ChatModel):
    """An endpoint answering 'Score: 3' with OpenAI-shaped top log-probabilities per token."""

    async def chat(self, messages, params=None, *, adapter=None, session_id=None):
        assert params.choices is None and params.logprobs == 20
        top = [{"Score": -0.1, "The": -2.0}, {":": -0.01}, {" 3": -0.2, " 2": -1.9, " 4": -2.5, " 1": -4.0, " 0": -6.0}]
        return ChatResult(text="Score: 3", top_logprobs=top, tokens=["Score", ":", " 3"], prompt_tokens=40)


async def test_top_logprobs_rows_read_the_label_position_and_record_the_method():
    plan = plan_judge(LOGPROB, backend_capabilities("openai/my-model"))
    [row] = await score_dialogue([("assistant", "Hi"), ("seeker", "I feel low")], "en", LOGPROB, Unconstrained(),
                                 ["empathy"], plan)
    assert row["method"] == "logprob:top_logprobs" and row["score"] == 3 and row["probs_status"] == "full"
    assert math.isclose(sum(row["probs"]), 1.0) and row["probs"][3] == max(row["probs"])
