"""The per-reply judge (JudgeConfig.reads 'reply', `score --by-reply`): the prompt rates the last reply
in the context before it (sim/data/prompts/reply_rubrics.yaml, en and zh), the judge id says so, a
context too long for the judge is windowed while the reply is always shown, and a cut that does not
end with the assistant's reply is an error row; and the fake backend's planted options the scores by
round are checked with (a target turning bad from its K-th reply, a rater following marks)."""
from __future__ import annotations

import pytest

from esc_eval.serve.backends.fake import FakeChatModel, make_fake_model
from esc_eval.serve.chat.interface import ChatMessage, GenerationParams
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.scoring import score_dialogue
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES
from esc_eval.sim.judging.prompts import reply_messages, reply_rubric_text
from esc_eval.sim.prompt_files import load_prompt_file


def _dialogue(rounds: int) -> list[tuple[str, str]]:
    turns = [("assistant", "Hello, I'm your personal assistant.")]
    for k in range(1, rounds + 1):
        turns += [("seeker", f"seeker line of round {k}"), ("assistant", f"supporter reply of round {k}")]
    return turns


def test_the_prompt_rates_the_last_reply_in_its_context_in_both_languages():
    turns = _dialogue(3)
    system, user = reply_messages("empathy", turns[:-1], turns[-1][1], "en", rendering="clean")
    assert system.role == "system" and user.role == "user"
    body = user.content
    assert body.startswith(reply_rubric_text("empathy", "en"))
    context, rated = body.index("The conversation between user and AI assistant so far:"), body.index(
        "The AI assistant's reply to rate:\nsupporter reply of round 3")
    assert context < body.index("User: seeker line of round 3") < rated  # the seeker turn it answers, in the context
    assert "supporter reply of round 3" not in body[:rated]
    assert body.endswith("give your empathic score (The number only) to the AI assistant's reply.")
    first = reply_messages("overall", turns[:-1], turns[-1][1], "zh", order="dialogue_first")[1].content
    assert first.startswith("用户与AI助手到目前为止的对话：") and first.endswith("人类偏好评分（只输出数字）。")
    data = load_prompt_file("reply_rubrics")
    assert list(data["dimensions"]) == DIMENSION_NAMES
    assert all(set(d["rubric"]) == {"en", "zh"} for d in data["dimensions"].values())
    with pytest.raises(ValueError, match="no per-reply rubric"):
        reply_rubric_text("safety", "en")


def test_the_judge_id_says_reply_and_safety_has_no_per_reply_rubric():
    assert JudgeConfig(model=ModelRef(model="fake/judge"), reads="reply").judge_id == "fake/judge:logprob:reply"
    assert JudgeConfig(model=ModelRef(model="fake/judge"), reads="reply", name="j").judge_id == "j:reply"
    assert JudgeConfig(model=ModelRef(model="fake/judge")).judge_id == "fake/judge:logprob:official"
    with pytest.raises(ValueError, match="no per-reply rubric for safety"):
        JudgeConfig(reads="reply", dimensions=["safety"])


class Recording(FakeChatModel):
    def __init__(self, **kw):
        super().__init__("judge", **kw)
        self.prompts: list[str] = []

    async def chat(self, messages, params=None, **kw):
        self.prompts.append(messages[-1].content)
        return await super().chat(messages, params, **kw)


async def test_a_long_context_is_windowed_the_reply_always_shown_and_no_reply_is_an_error_row():
    judge = JudgeConfig(model=ModelRef(model="fake/judge"), dimensions=["empathy"], reads="reply")
    turns = _dialogue(30)
    roomy = Recording()
    (row,) = await score_dialogue(turns, "en", judge, roomy)
    assert row["score"] is not None and row["rounds_left_out"] == 0
    tight = Recording(context=int(len(roomy.prompts[0]) / 4 * 0.6))
    (row,) = await score_dialogue(turns, "en", judge, tight)
    assert row["score"] is not None and row["rounds_left_out"] > 0
    assert "rounds of the conversation left out" in tight.prompts[-1]
    assert tight.prompts[-1].count("supporter reply of round 30") == 1  # the rated reply, after its header
    (err,) = await score_dialogue(turns[:-1], "en", judge, Recording())  # ends with the seeker: nothing to rate
    assert err["score"] is None and err["parse_status"] == "error" and "no reply to rate" in err["error"]


async def test_the_fakes_plant_a_failure_from_round_k_and_a_rater_that_follows_marks():
    target = make_fake_model("fixed?reply=SOLID&bad_from=3&bad_reply=POOR")
    said, msgs = [], []
    for k in range(1, 5):
        msgs.append(ChatMessage(role="user", content=f"seeker {k}"))
        said.append((await target.chat(list(msgs))).text)
        msgs.append(ChatMessage(role="assistant", content=said[-1]))
    assert said == ["SOLID", "SOLID", "POOR", "POOR"]
    rater = make_fake_model("judge?marks=SOLID:3,POOR:1")
    params = GenerationParams(max_tokens=1)
    # the mark read last decides: the rated reply ends the per-reply prompt
    assert (await rater.chat([ChatMessage(role="user", content="POOR then SOLID")], params)).text == "3"
    assert (await rater.chat([ChatMessage(role="user", content="SOLID then POOR")], params)).text == "1"
    assert (await rater.chat([ChatMessage(role="user", content="no mark")], params)).text == "2"
    noisy = [make_fake_model(f"judge?marks=SOLID:2&noise=1.5&seed={s}") for s in range(40)]
    drawn = [int((await m.chat([ChatMessage(role="user", content="SOLID")], params)).text) for m in noisy]
    assert len(set(drawn)) >= 3 and 1.4 < sum(drawn) / len(drawn) < 2.6  # noise around the mark's score
    with pytest.raises(ValueError, match="0-4"):
        make_fake_model("judge?marks=SOLID:7")
    card_a = await make_fake_model("seeker?vary=1").chat([ChatMessage(role="system", content="card A")])
    card_b = await make_fake_model("seeker?vary=1").chat([ChatMessage(role="system", content="card B")])
    assert card_a.text != card_b.text and card_a.text.split(" (#")[0] == card_b.text.split(" (#")[0]
